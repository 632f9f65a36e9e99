package pveparam

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// verifyStorageServer is verify_server (pve-storage src/PVE/Storage/Plugin.pm): an IP
// address or a DNS name, so "[fe80::1]" is refused.
func verifyStorageServer(s string) error {
	if verifyIP(s) != nil && verifyDNSName(s) != nil {
		return errors.New("value does not look like a valid server name or IP address\n")
	}
	return nil
}

// dirContent is the content a dir storage takes, which is every type
// (pve-storage src/PVE/Storage/DirPlugin.pm, plugindata).
var dirContent = []string{"images", "rootdir", "vztmpl", "iso", "backup", "snippets", "none", "import"}

// verifyContent is verify_content (pve-storage src/PVE/Storage/Plugin.pm).
func verifyContent(s string) error {
	if s == "import" || slices.Contains(dirContent, s) {
		return nil
	}
	return fmt.Errorf("invalid content type '%s'\n", s)
}

var volumeIDRe = perlRe(`(?i:[a-z][a-z0-9\-\_\.]*[a-z0-9]):.+`)

// verifyVolumeID is parse_volume_id (pve-storage src/PVE/Storage/Plugin.pm).
func verifyVolumeID(s string) error {
	if !volumeIDRe.MatchString(s) {
		return fmt.Errorf("unable to parse volume ID '%s'\n", s)
	}
	return nil
}

// verifyVolumeIDOrQMPath is verify_volume_id_or_qm_path (qemu-server src/PVE/QemuServer.pm).
func verifyVolumeIDOrQMPath(s string) error {
	if s == "none" || s == "cdrom" {
		return nil
	}
	return verifyVolumeIDOrAbsolutePath(s)
}

// verifyVolumeIDOrAbsolutePath is verify_volume_id_or_absolute_path (qemu-server
// src/PVE/QemuServer.pm).
func verifyVolumeIDOrAbsolutePath(s string) error {
	if strings.HasPrefix(s, "/") {
		return nil
	}
	return verifyVolumeID(s)
}

// pruneBackupsFormat is $prune_backups_format (pve-storage src/PVE/Storage/Plugin.pm).
func pruneBackupsFormat() map[string]Schema {
	out := map[string]Schema{"keep-all": {Type: "boolean", Optional: true}}
	for _, k := range []string{"keep-last", "keep-hourly", "keep-daily", "keep-weekly", "keep-monthly", "keep-yearly"} {
		out[k] = Schema{Type: "integer", Minimum: num(0), Optional: true}
	}
	return out
}

// validatePruneBackups is validate_prune_backups (pve-storage src/PVE/Storage/Plugin.pm):
// keep-all may not be set together with another option above 0.
func validatePruneBackups(p map[string]string) error {
	others := 0
	for k, v := range p {
		if k != "keep-all" && numify(v) > 0 {
			others++
		}
	}
	if others > 0 && parseBoolean(p["keep-all"]) == "1" {
		return errors.New("keep-all cannot be set together with other options.\n")
	}
	return nil
}

// ipconfigFormat is $ipconfig_fmt (qemu-server src/PVE/QemuServer/Network.pm): a gateway
// requires the address of its family.
func ipconfigFormat() map[string]Schema {
	return map[string]Schema{
		"ip":  {Type: "string", Format: "pve-ipv4-config", Optional: true},
		"gw":  {Type: "string", Format: "ipv4", Optional: true, Requires: "ip"},
		"ip6": {Type: "string", Format: "pve-ipv6-config", Optional: true},
		"gw6": {Type: "string", Format: "ipv6", Optional: true, Requires: "ip6"},
	}
}

// bootFormat is $boot_fmt (qemu-server src/PVE/QemuServer.pm).
func bootFormat() map[string]Schema {
	return map[string]Schema{
		"legacy": {Type: "string", Pattern: `[acdn]{1,4}`, Optional: true, DefaultKey: true},
		"order":  {Type: "string", Format: "pve-qm-bootdev-list", Optional: true},
	}
}

// bootdevCounts are the indexed devices verify_bootdev accepts (qemu-server
// src/PVE/QemuServer.pm: is_valid_drivename without efidisk and tpmstate, and the net, usb
// and hostpci keys of $confdesc: $MAX_NETS, USB.pm $MAX_USB_DEVICES, PCI.pm
// $MAX_HOSTPCI_DEVICES; Drive.pm $MAX_*_DISKS).
var bootdevCounts = map[string]int{"ide": 4, "scsi": 31, "virtio": 16, "sata": 6, "net": 32, "usb": 14, "hostpci": 16}

var bootdevRe = regexp.MustCompile(`^([a-z]+)([0-9]+)\n?$`)

// verifyBootdev is verify_bootdev (qemu-server src/PVE/QemuServer.pm).
func verifyBootdev(s string) error {
	if m := bootdevRe.FindStringSubmatch(s); m != nil {
		n, err := strconv.Atoi(m[2])
		if count, ok := bootdevCounts[m[1]]; ok && err == nil && strconv.Itoa(n) == m[2] && n < count {
			return nil
		}
	}
	return fmt.Errorf("invalid boot device '%s'\n", s)
}

// cpuModels are the CPU models qemu-server knows without QEMU's model files: the fallback
// list of initialize_cpu_models and $builtin_models_by_arch (qemu-server
// src/PVE/QemuServer/CPUConfig.pm).
var cpuModels = strings.Fields(`486 pentium pentium2 pentium3 coreduo core2duo Conroe Penryn
Nehalem Nehalem-IBRS Westmere Westmere-IBRS SandyBridge SandyBridge-IBRS IvyBridge
IvyBridge-IBRS Haswell Haswell-IBRS Haswell-noTSX Haswell-noTSX-IBRS Broadwell Broadwell-IBRS
Broadwell-noTSX Broadwell-noTSX-IBRS Skylake-Client Skylake-Client-IBRS Skylake-Client-noTSX-IBRS
Skylake-Client-v4 Skylake-Server Skylake-Server-IBRS Skylake-Server-noTSX-IBRS Skylake-Server-v4
Skylake-Server-v5 Cascadelake-Server Cascadelake-Server-v2 Cascadelake-Server-noTSX
Cascadelake-Server-v4 Cascadelake-Server-v5 Cooperlake Cooperlake-v2 KnightsMill Icelake-Client
Icelake-Client-noTSX Icelake-Server Icelake-Server-noTSX Icelake-Server-v3 Icelake-Server-v4
Icelake-Server-v5 Icelake-Server-v6 Icelake-Server-v7 SapphireRapids SapphireRapids-v2
SapphireRapids-v3 SapphireRapids-v4 GraniteRapids GraniteRapids-v2 GraniteRapids-v3 SierraForest
SierraForest-v2 SierraForest-v3 ClearwaterForest athlon phenom Opteron_G1 Opteron_G2 Opteron_G3
Opteron_G4 Opteron_G5 EPYC EPYC-IBPB EPYC-v3 EPYC-v4 EPYC-v5 EPYC-Rome EPYC-Rome-v2 EPYC-Rome-v3
EPYC-Rome-v4 EPYC-Rome-v5 EPYC-Milan EPYC-Milan-v2 EPYC-Milan-v3 EPYC-Genoa EPYC-Genoa-v2
EPYC-Turin kvm32 kvm64 qemu32 qemu64 max host a64fx cortex-a35 cortex-a53 cortex-a55 cortex-a57
cortex-a710 cortex-a72 cortex-a76 neoverse-n1 neoverse-n2 neoverse-v1
x86-64-v2 x86-64-v2-AES x86-64-v3 x86-64-v4`)

// cpuFlags are the VM-specific CPU flags (qemu-server src/PVE/QemuServer/CPUFlags.pm,
// supported_cpu_flags_names), sorted.
var cpuFlags = []string{"aes", "amd-no-ssb", "amd-ssbd", "hv-evmcs", "hv-tlbflush", "ibpb", "md-clear",
	"nested-virt", "pcid", "pdpe1gb", "spec-ctrl", "ssbd", "virt-ssbd"}

const cpuFlagAny = `[+-][a-zA-Z0-9\-_\.]+` // cpu_flag_any_re

// cpuFormat is $cpu_fmt (qemu-server src/PVE/QemuServer/CPUConfig.pm); reported-model's
// enumeration is every CPU model.
func cpuFormat() map[string]Schema {
	return map[string]Schema{
		"cputype":         {Type: "string", Optional: true, DefaultKey: true},
		"reported-model":  {Type: "string", Enum: reportedModels(), Optional: true},
		"hidden":          {Type: "boolean", Optional: true},
		"hv-vendor-id":    {Type: "string", Pattern: `[a-zA-Z0-9]{1,12}`, Optional: true},
		"flags":           {Type: "string", Pattern: cpuFlagAny + `(;` + cpuFlagAny + `)*`, Optional: true},
		"guest-phys-bits": {Type: "integer", Minimum: num(32), Maximum: num(64), Optional: true},
		"phys-bits":       {Type: "string", Format: "pve-phys-bits", Optional: true},
		"level":           {Type: "integer", Minimum: num(0), Maximum: num(4294967295), Optional: true},
	}
}

// reportedModels is reported-model's enumeration: the CPU models without the built-in ones,
// sorted case-insensitively (sort { lc("$a") cmp lc("$b") } keys get_all_cpu_models()).
func reportedModels() []string {
	out := slices.DeleteFunc(slices.Clone(cpuModels), func(m string) bool { return strings.HasPrefix(m, "x86-64-v") })
	slices.SortStableFunc(out, func(a, b string) int { return strings.Compare(strings.ToLower(a), strings.ToLower(b)) })
	return slices.Compact(out)
}

var physBitsRe = perlRe(`host|\d{1,2}`)

// verifyPhysBits is parse_phys_bits (qemu-server src/PVE/QemuServer/CPUConfig.pm).
func verifyPhysBits(s string) error {
	if !physBitsRe.MatchString(s) {
		return errors.New("value must be an integer between 8 and 64 or 'host'\n")
	}
	if n, err := strconv.Atoi(strings.TrimSuffix(s, "\n")); err == nil && (n < 8 || n > 64) {
		return errors.New("value must be an integer between 8 and 64 or 'host'\n")
	}
	return nil
}

// validateVMCPUConf is validate_vm_cpu_conf (qemu-server src/PVE/QemuServer/CPUConfig.pm):
// a cputype that exists (the simulator has no custom models, so a "custom-" one is
// unknown, as get_custom_model dies for it), flags among the VM-specific ones, no
// reported-model.
func validateVMCPUConf(cpu map[string]string) error {
	typ := cpu["cputype"]
	if typ == "" || typ == "0" {
		return errors.New("CPU is missing cputype\n")
	}
	if name, custom := strings.CutPrefix(typ, "custom-"); custom {
		return fmt.Errorf("Custom cputype '%s' not found\n", name)
	}
	if !slices.Contains(cpuModels, typ) {
		return fmt.Errorf("Built-in cputype '%s' is not defined (missing 'custom-' prefix?)\n", typ)
	}
	if f := cpu["flags"]; f != "" && f != "0" {
		supported := `[+-](` + strings.Join(cpuFlags, "|") + `)`
		if !perlMatch(supported+`(;`+supported+`)*`, f) {
			return fmt.Errorf("VM-specific CPU flags must be a subset of: %s\n", strings.Join(cpuFlags, ", "))
		}
	}
	if _, ok := cpu["reported-model"]; ok {
		return errors.New("Property 'reported-model' not allowed in VM-specific CPU config.\n")
	}
	return nil
}
