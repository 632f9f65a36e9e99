package guestconfig

import (
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// qemuDiskBuses ranks the QEMU drive keys in qemu-server's valid_drive_names order.
var qemuDiskBuses = map[string]int{"ide": 0, "scsi": 1, "virtio": 2, "sata": 3, "efidisk": 4, "tpmstate": 5}

// nicModels are the QEMU NIC models, which also act as "MODEL=MAC" option keys.
var nicModels = []string{
	"e1000", "e1000-82540em", "e1000-82544gc", "e1000-82545em", "e1000e", "i82551", "i82557b",
	"i82559er", "ne2k_isa", "ne2k_pci", "pcnet", "rtl8139", "virtio", "vmxnet3",
}

// cloudInitRE is qemu-server's drive_is_cloudinit test on the drive's file.
var cloudInitRE = regexp.MustCompile(`[:/](?:vm-\d+-)?cloudinit(?:\.(?:raw|cow|qcow|qcow2|qed|vmdk|cloop))?$`)

// bootDevRE is a device that may appear in "boot: order=".
var bootDevRE = regexp.MustCompile(`^(?:ide|sata|scsi|virtio|net|usb|hostpci)(?:0|[1-9][0-9]*)$`)

// bootDiskRE is the legacy "bootdisk" value.
var bootDiskRE = regexp.MustCompile(`^(?:ide|sata|scsi|virtio)(?:0|[1-9][0-9]*)$`)

// machineRE is qemu-server's machine type pattern: family prefix, version, +pveN, .pxe.
var machineRE = regexp.MustCompile(`^(?:(pc)|(q35)|(virt)|(pc(?:-i440fx)?|pc-q35|virt)-([0-9]+(?:\.[0-9]+)+(?:\+pve[0-9]+)?)(?:\.pxe)?|(virt)(\+pve[0-9]+))$`)

// qemu fills cfg from a QEMU VM's configuration.
func qemu(cfg *Config, raw map[string]string) error {
	cfg.Name = raw["name"]
	cfg.OSType = raw["ostype"]
	if cfg.OSType == "" {
		cfg.OSType = "other"
	}
	var err error
	if cfg.CPU, err = qemuCPU(raw); err != nil {
		return err
	}
	if cfg.MemoryMB, err = qemuMemory(raw); err != nil {
		return err
	}
	switch bios := raw["bios"]; bios {
	case "", "seabios":
		cfg.Firmware = "seabios"
	case "ovmf":
		cfg.Firmware = "ovmf"
	default:
		return &Error{Key: "bios", Reason: "must be seabios or ovmf"}
	}
	if cfg.Machine, cfg.MachineVersion, err = machine(raw); err != nil {
		return err
	}
	disks, cdroms, err := qemuDisks(raw)
	if err != nil {
		return err
	}
	if cfg.NICs, err = qemuNICs(raw); err != nil {
		return err
	}
	if cfg.BootOrder, err = bootOrder(raw, cdroms, cfg.NICs); err != nil {
		return err
	}
	for i := range disks {
		disks[i].Bootable = slices.Contains(cfg.BootOrder, disks[i].Device)
	}
	cfg.Disks = disks
	if cfg.Unused, err = unused(raw); err != nil {
		return err
	}
	if cfg.PCI, err = hostPCI(raw); err != nil {
		return err
	}
	if cfg.USB, err = usb(raw); err != nil {
		return err
	}
	return nil
}

// qemuCPU reads sockets, cores, vcpus, numa and cpu.
func qemuCPU(raw map[string]string) (CPU, error) {
	const maxCPUs = 1 << 16
	sockets, err := scalarInt(raw, "sockets", 1, 1, maxCPUs)
	if err != nil {
		return CPU{}, err
	}
	cores, err := scalarInt(raw, "cores", 1, 1, maxCPUs)
	if err != nil {
		return CPU{}, err
	}
	vcpus, err := scalarInt(raw, "vcpus", 0, 0, maxCPUs)
	if err != nil {
		return CPU{}, err
	}
	if vcpus == 0 {
		vcpus = sockets * cores
	}
	cpu := CPU{Sockets: int(sockets), Cores: int(cores), VCPUs: int(vcpus)}
	if v := raw["numa"]; v != "" {
		if cpu.NUMA, err = parseBool("numa", "", v); err != nil {
			return CPU{}, err
		}
	}
	if v := raw["cpu"]; v != "" {
		opts, err := props("cpu", v, "cputype", nil)
		if err != nil {
			return CPU{}, err
		}
		cpu.Type = opts["cputype"]
	}
	if cpu.Type == "" {
		// qemu-server's CPUConfig::get_default_cpu_type (9.2.3 and later for aarch64).
		kvm := true
		if v := raw["kvm"]; v != "" {
			if kvm, err = parseBool("kvm", "", v); err != nil {
				return CPU{}, err
			}
		}
		switch aarch64 := raw["arch"] == "aarch64"; {
		case aarch64 && kvm:
			cpu.Type = "host"
		case aarch64:
			cpu.Type = "max"
		case !kvm:
			cpu.Type = "qemu64"
		default:
			cpu.Type = "kvm64"
		}
	}
	return cpu, nil
}

// qemuMemory reads "memory": "2048" or PVE 9's "current=2048"; 512 when unset.
func qemuMemory(raw map[string]string) (int64, error) {
	v := raw["memory"]
	if v == "" {
		return 512, nil
	}
	opts, err := props("memory", v, "current", nil)
	if err != nil {
		return 0, err
	}
	cur, ok := opts["current"]
	if !ok {
		return 512, nil
	}
	return parseInt("memory", "current", cur, 1, math.MaxInt32)
}

// machine reads "machine" ([type=]TYPE[,viommu=…]) into family and pinned version; a
// Windows guest without a pinned version gets the version qemu-server pins it to at start.
func machine(raw map[string]string) (family, version string, err error) {
	typ := ""
	if v := raw["machine"]; v != "" {
		opts, err := props("machine", v, "type", nil)
		if err != nil {
			return "", "", err
		}
		typ = opts["type"]
	}
	if typ == "" {
		if raw["arch"] == "aarch64" {
			return "virt", windowsPin(raw), nil
		}
		return "i440fx", windowsPin(raw), nil
	}
	m := machineRE.FindStringSubmatch(typ)
	switch {
	case m == nil:
		return "", "", &Error{Key: "machine", Reason: "type: not a QEMU machine type"}
	case m[1] != "":
		return "i440fx", windowsPin(raw), nil
	case m[2] != "":
		return "q35", windowsPin(raw), nil
	case m[3] != "":
		return "virt", windowsPin(raw), nil
	case m[6] != "":
		return "virt", m[7][1:], nil
	}
	switch m[4] {
	case "pc-q35":
		family = "q35"
	case "virt":
		family = "virt"
	default:
		family = "i440fx"
	}
	return family, m[5], nil
}

// windowsOSRE is qemu-server's Helpers::windows_version: the ostypes of Windows guests.
var windowsOSRE = regexp.MustCompile(`^(?:wxp|w2k|w2k3|w2k8|wvista|win[0-9]+)$`)

// creationQEMURE is the major.minor of a "meta: creation-qemu=" version (MetaInfo's
// pattern \d+(\.\d+)+).
var creationQEMURE = regexp.MustCompile(`^([0-9]+)\.([0-9]+)(?:\.[0-9]+)*$`)

// windowsPin is the machine version qemu-server's Machine::get_vm_machine pins a Windows
// guest without a pinned version to at start: the major.minor of "meta: creation-qemu" when
// that is 9.1 or later, else 5.1 (an unreadable meta counts as none). "" for other guests,
// whose machine floats with the installed QEMU. (When the installed QEMU can no longer run
// the pinned version, qemu-server takes its newest; that cannot be seen from the config.)
func windowsPin(raw map[string]string) string {
	if !windowsOSRE.MatchString(raw["ostype"]) {
		return ""
	}
	const base = "5.1"
	opts, err := props("meta", raw["meta"], "", nil)
	if err != nil {
		return base
	}
	m := creationQEMURE.FindStringSubmatch(opts["creation-qemu"])
	if m == nil {
		return base
	}
	major, errMajor := strconv.Atoi(m[1])
	minor, errMinor := strconv.Atoi(m[2])
	if errMajor != nil || errMinor != nil || major < 9 || (major == 9 && minor < 1) {
		return base
	}
	return m[1] + "." + m[2]
}

// qemuDisks parses the drive keys. It returns the disks (bootable not yet set) and the
// CD-ROM drives (media=cdrom, Cloud-Init excluded) in drive order, for the legacy boot order.
func qemuDisks(raw map[string]string) ([]Disk, []string, error) {
	disks := []Disk{}
	var cdroms []string
	for _, d := range devices(raw, qemuDiskBuses) {
		if (d.bus == "efidisk" || d.bus == "tpmstate") && d.index != 0 {
			continue // not a PVE key
		}
		opts, err := props(d.key, raw[d.key], "file", map[string]string{"volume": "file"})
		if err != nil {
			return nil, nil, err
		}
		file := opts["file"]
		if file == "" {
			return nil, nil, &Error{Key: d.key, Reason: "no volume"}
		}
		media := opts["media"]
		if media != "" && media != "disk" && media != "cdrom" {
			return nil, nil, &Error{Key: d.key, Reason: "media: must be disk or cdrom"}
		}
		cloudInit := cloudInitRE.MatchString(file)
		if media == "cdrom" || file == "none" || file == "cdrom" {
			if !cloudInit {
				cdroms = append(cdroms, d.key)
			}
			continue
		}
		if cloudInit {
			continue
		}
		disk := Disk{Device: d.key}
		if disk.Storage, disk.Volume, err = splitVolume(d.key, file); err != nil {
			return nil, nil, err
		}
		if v, ok := opts["size"]; ok {
			if disk.SizeBytes, err = parseSize(d.key, v); err != nil {
				return nil, nil, err
			}
		}
		disk.Format = format(opts["format"], disk.Volume)
		disks = append(disks, disk)
	}
	return disks, cdroms, nil
}

// qemuNICs parses netN: "MODEL[=MAC]" or "model=MODEL,macaddr=MAC", bridge, tag, firewall.
func qemuNICs(raw map[string]string) ([]NIC, error) {
	out := []NIC{}
	for _, d := range devices(raw, map[string]int{"net": 0}) {
		opts, err := split(d.key, raw[d.key])
		if err != nil {
			return nil, err
		}
		nic := NIC{Device: d.key}
		seen := map[string]bool{}
		set := func(opt string) error {
			if seen[opt] {
				return &Error{Key: d.key, Reason: "duplicate option " + opt}
			}
			seen[opt] = true
			return nil
		}
		vals := map[string]string{}
		for _, o := range opts {
			switch {
			case o.Key == "" || o.Key == "model":
				if err := set("model"); err != nil {
					return nil, err
				}
				nic.Model = o.Val
			case o.Key == "macaddr":
				if err := set("macaddr"); err != nil {
					return nil, err
				}
				if nic.MAC, err = mac(d.key, "macaddr", o.Val); err != nil {
					return nil, err
				}
			case slices.Contains(nicModels, o.Key) || (!seen["model"] && macRE.MatchString(o.Val) && !netOption(o.Key)):
				// "virtio=BC:24:11:…": the model as key, the MAC as value (a model
				// unknown to this list is accepted, before any model, when its value
				// is a MAC).
				if err := set("model"); err != nil {
					return nil, err
				}
				if err := set("macaddr"); err != nil {
					return nil, err
				}
				nic.Model = o.Key
				if nic.MAC, err = mac(d.key, o.Key, o.Val); err != nil {
					return nil, err
				}
			default:
				if err := set(o.Key); err != nil {
					return nil, err
				}
				vals[o.Key] = o.Val
			}
		}
		if nic.Model == "" {
			return nil, &Error{Key: d.key, Reason: "no NIC model"}
		}
		nic.Bridge = vals["bridge"]
		if nic.VLAN, err = vlan(d.key, vals); err != nil {
			return nil, err
		}
		if nic.Firewall, err = optBool(d.key, vals, "firewall"); err != nil {
			return nil, err
		}
		out = append(out, nic)
	}
	return out, nil
}

// netOption reports whether k is a known non-model option of a QEMU netN value.
func netOption(k string) bool {
	switch k {
	case "bridge", "queues", "rate", "tag", "trunks", "firewall", "link_down", "mtu":
		return true
	}
	return false
}

// bootOrder computes the boot order from "boot" / "bootdisk" (see Config.BootOrder).
func bootOrder(raw map[string]string, cdroms []string, nics []NIC) ([]string, error) {
	order := []string{}
	legacy := "cdn"
	if v, ok := raw["boot"]; ok {
		opts, err := props("boot", v, "legacy", nil)
		if err != nil {
			return nil, err
		}
		if o, ok := opts["order"]; ok {
			for _, dev := range strings.FieldsFunc(o, func(r rune) bool { return r == ';' || r == ' ' }) {
				if !bootDevRE.MatchString(dev) {
					return nil, &Error{Key: "boot", Reason: "order: not a boot device"}
				}
				order = append(order, dev)
			}
			return order, nil
		}
		l, ok := opts["legacy"]
		if !ok {
			// "boot: " present but empty: qemu-server's device_bootorder gives no device a
			// bootindex (the legacy fallback is only for an absent "boot").
			return order, nil
		}
		legacy = l
	}
	if len(legacy) < 1 || len(legacy) > 4 || strings.Trim(legacy, "acdn") != "" {
		return nil, &Error{Key: "boot", Reason: "legacy: must be 1 to 4 of a, c, d, n"}
	}
	bootdisk := raw["bootdisk"]
	if bootdisk != "" && !bootDiskRE.MatchString(bootdisk) {
		return nil, &Error{Key: "bootdisk", Reason: "not a disk device"}
	}
	// qemu-server numbers each letter by its last position in the string.
	pos := map[byte]int{}
	for i := range len(legacy) {
		pos[legacy[i]] = i
	}
	letters := []byte{'c', 'd', 'n'}
	slices.SortFunc(letters, func(a, b byte) int { return pos[a] - pos[b] })
	for _, l := range letters {
		if _, ok := pos[l]; !ok {
			continue
		}
		switch l {
		case 'c':
			if bootdisk != "" && raw[bootdisk] != "" && !slices.Contains(cdroms, bootdisk) {
				order = append(order, bootdisk)
			}
		case 'd':
			order = append(order, cdroms...)
		case 'n':
			for _, n := range nics {
				order = append(order, n.Device)
			}
		}
	}
	return order, nil
}

// pciRE is one host PCI id as qemu-server accepts it ([domain:]bus:dev[.func]).
var pciRE = regexp.MustCompile(`^(?i:(?:[0-9a-f]{4,}:)?[0-9a-f]{2}:[0-9a-f]{2}(?:\.[0-9a-f])?)$`)

// hostPCI parses hostpciN: [host=]IDS | mapping=ID, pcie, x-vga.
func hostPCI(raw map[string]string) ([]PCIPassthrough, error) {
	out := []PCIPassthrough{}
	for _, d := range devices(raw, map[string]int{"hostpci": 0}) {
		opts, err := props(d.key, raw[d.key], "host", nil)
		if err != nil {
			return nil, err
		}
		p := PCIPassthrough{Device: d.key, Host: opts["host"], Mapping: opts["mapping"]}
		if p.Host == "" && p.Mapping == "" {
			return nil, &Error{Key: d.key, Reason: "neither host nor mapping"}
		}
		if p.Host != "" {
			for id := range strings.SplitSeq(p.Host, ";") {
				if !pciRE.MatchString(id) {
					return nil, &Error{Key: d.key, Reason: "host: not a PCI id list"}
				}
			}
		}
		if p.PCIe, err = optBool(d.key, opts, "pcie"); err != nil {
			return nil, err
		}
		if p.XVGA, err = optBool(d.key, opts, "x-vga"); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// usbHostRE is a usbN host: vendor:product, bus-port(.port)* or spice.
var usbHostRE = regexp.MustCompile(`^(?:(?:0x)?[0-9A-Fa-f]{4}:(?:0x)?[0-9A-Fa-f]{4}|\d+-\d+(?:\.\d+)*|(?i:spice))$`)

// usb parses usbN: [host=]DEVICE|spice | mapping=ID, usb3.
func usb(raw map[string]string) ([]USBPassthrough, error) {
	out := []USBPassthrough{}
	for _, d := range devices(raw, map[string]int{"usb": 0}) {
		opts, err := props(d.key, raw[d.key], "host", nil)
		if err != nil {
			return nil, err
		}
		u := USBPassthrough{Device: d.key, Host: opts["host"], Mapping: opts["mapping"]}
		if u.Host == "" && u.Mapping == "" {
			return nil, &Error{Key: d.key, Reason: "neither host nor mapping"}
		}
		if u.Host != "" && !usbHostRE.MatchString(u.Host) {
			return nil, &Error{Key: d.key, Reason: "host: not a USB device, port or spice"}
		}
		u.Spice = strings.EqualFold(u.Host, "spice")
		if u.USB3, err = optBool(d.key, opts, "usb3"); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}
