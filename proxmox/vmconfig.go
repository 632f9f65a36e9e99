package proxmox

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// ErrBadConfig: a guest configuration key that [ParseVMConfig] understands holds a value it
// cannot parse. Returned errors are [*ConfigError]s naming the key.
var ErrBadConfig = errors.New("proxmox: malformed guest configuration")

// ConfigError is a malformed value of one configuration key. It matches [ErrBadConfig].
// Neither field ever holds the configuration value itself (only its key and what is wrong).
type ConfigError struct {
	Key    string // the configuration key, e.g. "scsi0", "net1", "memory"
	Reason string // what is wrong, e.g. "size: not a disk size"
}

// Error renders "proxmox: malformed guest configuration: KEY: REASON".
func (e *ConfigError) Error() string {
	return ErrBadConfig.Error() + ": " + e.Key + ": " + e.Reason
}

// Is makes errors.Is(err, ErrBadConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrBadConfig }

// VMConfig is a guest's configuration as contract §9 vm.config.get outputs it.
// Every slice is non-nil (JSON "[]" when empty).
type VMConfig struct {
	VMID string `json:"vmid"` // decimal, e.g. "100"
	Name string `json:"name"` // QEMU "name" / LXC "hostname"; "" when unset
	Node string `json:"node"`
	Type string `json:"type"` // "qemu" | "lxc"
	CPU  CPU    `json:"cpu"`
	// MemoryMB: QEMU "memory" (plain or PVE 9 "current=N"), LXC "memory"; PVE's default 512.
	MemoryMB int64 `json:"memory_mb"`
	// Firmware: "seabios" (default) or "ovmf", from "bios"; "" for containers.
	Firmware string `json:"firmware"`
	// Machine is the machine family: "i440fx" (the default, also for "pc" and
	// "pc-i440fx-X.Y"/"pc-X.Y"), "q35" ("q35", "pc-q35-X.Y") or "virt" (aarch64, the default
	// there); "" for containers.
	Machine string `json:"machine"`
	// MachineVersion is the pinned machine version, e.g. "8.1" or "8.1+pve1" (a ".pxe"
	// suffix dropped); "" when the machine type floats with the installed QEMU.
	MachineVersion string `json:"machine_version,omitempty"`
	// OSType: QEMU "ostype" (PVE's default "other"), LXC "ostype" ("" when unset).
	OSType string `json:"os_type"`
	// BootOrder lists boot devices. From "boot: order=a;b" as written; otherwise from the
	// legacy form ("boot: cdn", or absent = "cdn") expanded the way qemu-server does it:
	// c = "bootdisk" (when set and not a CD-ROM), d = every CD-ROM drive (Cloud-Init drives
	// excluded), n = every netN; "a" (floppy) adds nothing. Empty for containers.
	BootOrder []string `json:"boot_order"`
	// Disks: QEMU ide/scsi/virtio/sata drives (CD-ROMs, Cloud-Init drives and "none"
	// excluded), efidisk0 and tpmstate0; LXC rootfs and mpN (bind mounts of host directories
	// excluded; /dev device mounts included with storage ""). Ordered by bus in qemu-server's
	// order (ide, scsi, virtio, sata, efidisk, tpmstate; rootfs then mp for LXC), then index.
	Disks []Disk `json:"disks"`
	// Unused: unusedN volumes, by index.
	Unused []UnusedDisk `json:"unused"`
	// NICs: netN, by index.
	NICs []NIC `json:"nics"`
	// PCI: hostpciN, by index (QEMU only).
	PCI []PCIPassthrough `json:"pci_passthrough"`
	// USB: usbN, by index (QEMU only).
	USB         []USBPassthrough `json:"usb_passthrough"`
	Description string           `json:"description"`
	// Tags: "tags" split on ';', ',' and spaces, in their order.
	Tags []string `json:"tags"`
}

// CPU is the guest's processor configuration.
// QEMU: Sockets and Cores default to 1; VCPUs is "vcpus" when set (hotplug), else
// Sockets*Cores; Type is the "cpu" cputype, and when "cpu" is unset the type qemu-server
// actually uses: "kvm64" ("qemu64" with kvm: 0, "cortex-a57" with arch: aarch64). New VMs
// created by the PVE 8/9 GUI carry "cpu: x86-64-v2-AES" explicitly; it is reported as is.
// LXC: Sockets 1, Cores = "cores" (0 when unset: the container may use every host core),
// VCPUs = Cores, NUMA false, Type "".
type CPU struct {
	Sockets int    `json:"sockets"`
	Cores   int    `json:"cores"`
	VCPUs   int    `json:"vcpus"`
	NUMA    bool   `json:"numa"`
	Type    string `json:"type"`
}

// Disk is one disk of a guest.
type Disk struct {
	Device string `json:"device"` // "scsi0", "efidisk0", "rootfs", "mp0", …
	// Storage is the PVE storage id ("local-lvm"); "" for an absolute path (a host device
	// or image file passed through).
	Storage string `json:"storage"`
	// Volume is the volume name within Storage ("vm-100-disk-0", "100/vm-100-disk-0.qcow2"),
	// or the absolute path when Storage is "". The PVE volume id is Storage+":"+Volume.
	Volume string `json:"volume"`
	// SizeBytes is the size= option (K/M/G/T are powers of 1024); 0 when absent.
	SizeBytes int64 `json:"size_bytes"`
	// Format: format= when set, else the volume's extension (raw, qcow2, vmdk, qed),
	// "subvol" for LXC subvolumes (subvol-…), else "raw".
	Format string `json:"format"`
	// Bootable: QEMU: the device is in BootOrder. LXC: true for rootfs.
	Bootable bool `json:"bootable"`
	// MountPoint is the path inside a container ("/" for rootfs); "" for VMs.
	MountPoint string `json:"mount_point,omitempty"`
}

// UnusedDisk is an unusedN volume: detached from the guest but still owned by it.
type UnusedDisk struct {
	Device  string `json:"device"` // "unused0"
	Storage string `json:"storage"`
	Volume  string `json:"volume"` // volume name within Storage, as for [Disk]
}

// NIC is one network interface.
type NIC struct {
	Device string `json:"device"` // "net0"
	// Model: the QEMU NIC model ("virtio", "e1000", …; both "virtio=MAC" and
	// "model=virtio,macaddr=MAC" forms), or the container interface type ("veth").
	Model string `json:"model"`
	// MAC in upper case; "" when the config holds none.
	MAC      string `json:"mac"`
	Bridge   string `json:"bridge"`
	VLAN     int    `json:"vlan"` // tag=, 0 when untagged
	Firewall bool   `json:"firewall"`
	// Name is the interface name inside a container ("eth0"); "" for VMs.
	Name string `json:"name,omitempty"`
}

// PCIPassthrough is a hostpciN device: host PCI ids or a cluster resource mapping.
type PCIPassthrough struct {
	Device string `json:"device"` // "hostpci0"
	// Host as configured: "0000:01:00.0", "01:00" (all functions) or several ids
	// separated by ";".
	Host    string `json:"host,omitempty"`
	Mapping string `json:"mapping,omitempty"` // cluster-wide PCI mapping id
	PCIe    bool   `json:"pcie"`
	XVGA    bool   `json:"x_vga"`
}

// USBPassthrough is a usbN device: a host device/port, SPICE redirection or a mapping.
type USBPassthrough struct {
	Device  string `json:"device"`            // "usb0"
	Host    string `json:"host,omitempty"`    // "046d:c52b", "1-2.3" or "spice"
	Mapping string `json:"mapping,omitempty"` // cluster-wide USB mapping id
	USB3    bool   `json:"usb3"`
	Spice   bool   `json:"spice"` // host=spice: a SPICE USB redirection channel
}

// ParseVMConfig turns a guest's config (GET /nodes/{node}/{qemu|lxc}/{vmid}/config, values as
// strings: numbers in decimal, booleans "0"/"1") into the typed structure of contract §9
// vm.config.get. guestType is "qemu" or "lxc". It never fails on unknown keys or unknown
// options inside a property string; a malformed value of a key it understands → a
// [*ConfigError] naming the key (errors.Is ErrBadConfig). An empty value of a scalar key
// counts as unset, as in qemu-server. Defaults are documented on [VMConfig] and [CPU].
func ParseVMConfig(guestType string, raw map[string]string, node string, vmid int64) (VMConfig, error) {
	cfg := VMConfig{
		VMID:      strconv.FormatInt(vmid, 10),
		Node:      node,
		Type:      guestType,
		BootOrder: []string{},
		Disks:     []Disk{},
		Unused:    []UnusedDisk{},
		NICs:      []NIC{},
		PCI:       []PCIPassthrough{},
		USB:       []USBPassthrough{},
		Tags:      vmcTags(raw["tags"]),
	}
	cfg.Description = raw["description"]
	var err error
	switch guestType {
	case "qemu":
		err = vmcQemu(&cfg, raw)
	case "lxc":
		err = vmcLXC(&cfg, raw)
	default:
		err = &ConfigError{Key: "type", Reason: "guest type must be qemu or lxc"}
	}
	if err != nil {
		return VMConfig{}, err
	}
	return cfg, nil
}

// vmcDevKey is a configuration key of an indexed device ("scsi10" → bus "scsi", index 10).
type vmcDevKey struct {
	key   string
	bus   string
	index int
}

// vmcDevKeyRE matches indexed device keys; indexes have no leading zeros, as PVE writes them.
var vmcDevKeyRE = regexp.MustCompile(`^([a-z]+)(0|[1-9][0-9]{0,3})$`)

// vmcDevices returns the keys of raw whose bus is in buses (bus → rank), ordered by rank
// then index.
func vmcDevices(raw map[string]string, buses map[string]int) []vmcDevKey {
	var out []vmcDevKey
	for k := range raw {
		m := vmcDevKeyRE.FindStringSubmatch(k)
		if m == nil {
			continue
		}
		if _, ok := buses[m[1]]; !ok {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		out = append(out, vmcDevKey{key: k, bus: m[1], index: n})
	}
	slices.SortFunc(out, func(a, b vmcDevKey) int {
		if d := buses[a.bus] - buses[b.bus]; d != 0 {
			return d
		}
		return a.index - b.index
	})
	return out
}

// vmcTags splits a pve-tag-list the way PVE::Tools::split_list does (";", "," and spaces).
func vmcTags(s string) []string {
	tags := strings.FieldsFunc(s, func(r rune) bool {
		return r == ';' || r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r'
	})
	if tags == nil {
		tags = []string{}
	}
	return tags
}

// vmcOpt is one option of a property string; Key is "" for a value without a key.
type vmcOpt struct{ Key, Val string }

// vmcSplit splits a PVE property string ("a,k=v,k2=v2") like
// PVE::JSONSchema::parse_property_string: blank parts are skipped, "k=" is an error.
func vmcSplit(key, s string) ([]vmcOpt, error) {
	var out []vmcOpt
	for part := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, v, found := strings.Cut(part, "=")
		switch {
		case !found:
			out = append(out, vmcOpt{Val: part})
		case k == "" || v == "":
			return nil, &ConfigError{Key: key, Reason: "option without key or value"}
		default:
			out = append(out, vmcOpt{Key: k, Val: v})
		}
	}
	return out, nil
}

// vmcProps parses a property string into options: a value without a key goes to defKey
// ("" = the format has no default key: an error), alias keys are renamed, and a repeated
// option is an error.
func vmcProps(key, s, defKey string, aliases map[string]string) (map[string]string, error) {
	opts, err := vmcSplit(key, s)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(opts))
	for _, o := range opts {
		k := o.Key
		if k == "" {
			if defKey == "" {
				return nil, &ConfigError{Key: key, Reason: "value without a key"}
			}
			k = defKey
		} else if a, ok := aliases[k]; ok {
			k = a
		}
		if _, dup := out[k]; dup {
			return nil, &ConfigError{Key: key, Reason: "duplicate option " + k}
		}
		out[k] = o.Val
	}
	return out, nil
}

// vmcBool parses a PVE boolean (1|on|yes|true, 0|off|no|false, any case).
func vmcBool(key, opt, v string) (bool, error) {
	switch strings.ToLower(v) {
	case "1", "on", "yes", "true":
		return true, nil
	case "0", "off", "no", "false":
		return false, nil
	}
	return false, &ConfigError{Key: key, Reason: vmcWhat(opt) + "not a boolean"}
}

// vmcOptBool is vmcBool of opts[opt], false when absent.
func vmcOptBool(key string, opts map[string]string, opt string) (bool, error) {
	v, ok := opts[opt]
	if !ok {
		return false, nil
	}
	return vmcBool(key, opt, v)
}

// vmcWhat prefixes a reason with the option name ("size: "), or nothing for a plain key.
func vmcWhat(opt string) string {
	if opt == "" {
		return ""
	}
	return opt + ": "
}

// vmcInt parses a decimal integer in [lo, hi].
func vmcInt(key, opt, v string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, &ConfigError{Key: key, Reason: fmt.Sprintf("%snot an integer in %d..%d", vmcWhat(opt), lo, hi)}
	}
	return n, nil
}

// vmcScalarInt parses raw[key] as an integer in [lo, hi]; def when unset or empty.
func vmcScalarInt(raw map[string]string, key string, def, lo, hi int64) (int64, error) {
	v := raw[key]
	if v == "" {
		return def, nil
	}
	return vmcInt(key, "", v, lo, hi)
}

var vmcSizeRE = regexp.MustCompile(`^([0-9]+)(\.[0-9]+)?([KMGT])?$`)

// vmcSize parses a PVE disk size ("32G", "4M", "528K", "1.5T", "1073741824") into bytes,
// like PVE::JSONSchema::parse_size (powers of 1024, fractions truncated).
func vmcSize(key, v string) (int64, error) {
	m := vmcSizeRE.FindStringSubmatch(v)
	bad := &ConfigError{Key: key, Reason: "size: not a disk size"}
	if m == nil {
		return 0, bad
	}
	mult := int64(1)
	switch m[3] {
	case "K":
		mult = 1 << 10
	case "M":
		mult = 1 << 20
	case "G":
		mult = 1 << 30
	case "T":
		mult = 1 << 40
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n > math.MaxInt64/mult {
		return 0, bad
	}
	size := n * mult
	if m[2] != "" {
		frac, err := strconv.ParseFloat("0"+m[2], 64)
		if err != nil {
			return 0, bad
		}
		extra := int64(frac * float64(mult))
		if size > math.MaxInt64-extra {
			return 0, bad
		}
		size += extra
	}
	return size, nil
}

// vmcVolIDRE is a PVE volume id "storage:volname" (storage id as PVE::Storage checks it).
var vmcVolIDRE = regexp.MustCompile(`^(?i:([a-z][a-z0-9._-]*[a-z0-9])):(.+)$`)

// vmcVolume splits a volume id into storage and volume name; an absolute path gives
// storage "" and the path.
func vmcVolume(key, v string) (storage, volume string, err error) {
	if strings.HasPrefix(v, "/") {
		return "", v, nil
	}
	if m := vmcVolIDRE.FindStringSubmatch(v); m != nil {
		return m[1], m[2], nil
	}
	return "", "", &ConfigError{Key: key, Reason: "not a volume id (storage:volume) or absolute path"}
}

// vmcFormat is the disk format: explicit, else from the volume's extension, else raw.
func vmcFormat(explicit, volume string) string {
	if explicit != "" {
		return explicit
	}
	base := volume[strings.LastIndex(volume, "/")+1:]
	if i := strings.LastIndex(base, "."); i >= 0 {
		switch ext := strings.ToLower(base[i+1:]); ext {
		case "raw", "qcow2", "vmdk", "qed":
			return ext
		}
	}
	if strings.HasPrefix(base, "subvol-") {
		return "subvol"
	}
	return "raw"
}

// vmcUnused parses the unusedN keys ("[file=|volume=]storage:volume").
func vmcUnused(raw map[string]string) ([]UnusedDisk, error) {
	out := []UnusedDisk{}
	for _, d := range vmcDevices(raw, map[string]int{"unused": 0}) {
		opts, err := vmcProps(d.key, raw[d.key], "file", map[string]string{"volume": "file"})
		if err != nil {
			return nil, err
		}
		if opts["file"] == "" {
			return nil, &ConfigError{Key: d.key, Reason: "no volume"}
		}
		storage, volume, err := vmcVolume(d.key, opts["file"])
		if err != nil {
			return nil, err
		}
		out = append(out, UnusedDisk{Device: d.key, Storage: storage, Volume: volume})
	}
	return out, nil
}

// vmcMACRE is a MAC address as PVE accepts it in net and hwaddr options.
var vmcMACRE = regexp.MustCompile(`^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$`)

// vmcMAC validates and upper-cases a MAC address option.
func vmcMAC(key, opt, v string) (string, error) {
	if !vmcMACRE.MatchString(v) {
		return "", &ConfigError{Key: key, Reason: opt + ": not a MAC address"}
	}
	return strings.ToUpper(v), nil
}

// vmcVLAN parses tag= (1..4094); 0 when absent.
func vmcVLAN(key string, opts map[string]string) (int, error) {
	v, ok := opts["tag"]
	if !ok {
		return 0, nil
	}
	n, err := vmcInt(key, "tag", v, 1, 4094)
	return int(n), err
}

// vmcQemuDiskBuses ranks the QEMU drive keys in qemu-server's valid_drive_names order.
var vmcQemuDiskBuses = map[string]int{"ide": 0, "scsi": 1, "virtio": 2, "sata": 3, "efidisk": 4, "tpmstate": 5}

// vmcNICModels are the QEMU NIC models, which also act as "MODEL=MAC" option keys.
var vmcNICModels = []string{
	"e1000", "e1000-82540em", "e1000-82544gc", "e1000-82545em", "e1000e", "i82551", "i82557b",
	"i82559er", "ne2k_isa", "ne2k_pci", "pcnet", "rtl8139", "virtio", "vmxnet3",
}

// vmcCloudInitRE is qemu-server's drive_is_cloudinit test on the drive's file.
var vmcCloudInitRE = regexp.MustCompile(`[:/](?:vm-\d+-)?cloudinit(?:\.(?:raw|cow|qcow|qcow2|qed|vmdk|cloop))?$`)

// vmcBootDevRE is a device that may appear in "boot: order=".
var vmcBootDevRE = regexp.MustCompile(`^(?:ide|sata|scsi|virtio|net|usb|hostpci)(?:0|[1-9][0-9]*)$`)

// vmcBootDiskRE is the legacy "bootdisk" value.
var vmcBootDiskRE = regexp.MustCompile(`^(?:ide|sata|scsi|virtio)(?:0|[1-9][0-9]*)$`)

// vmcMachineRE is qemu-server's machine type pattern: family prefix, version, +pveN, .pxe.
var vmcMachineRE = regexp.MustCompile(`^(?:(pc)|(q35)|(virt)|(pc(?:-i440fx)?|pc-q35|virt)-([0-9]+(?:\.[0-9]+)+(?:\+pve[0-9]+)?)(?:\.pxe)?|(virt)(\+pve[0-9]+))$`)

// vmcQemu fills cfg from a QEMU VM's configuration.
func vmcQemu(cfg *VMConfig, raw map[string]string) error {
	cfg.Name = raw["name"]
	cfg.OSType = raw["ostype"]
	if cfg.OSType == "" {
		cfg.OSType = "other"
	}
	var err error
	if cfg.CPU, err = vmcQemuCPU(raw); err != nil {
		return err
	}
	if cfg.MemoryMB, err = vmcQemuMemory(raw); err != nil {
		return err
	}
	switch bios := raw["bios"]; bios {
	case "", "seabios":
		cfg.Firmware = "seabios"
	case "ovmf":
		cfg.Firmware = "ovmf"
	default:
		return &ConfigError{Key: "bios", Reason: "must be seabios or ovmf"}
	}
	if cfg.Machine, cfg.MachineVersion, err = vmcMachine(raw); err != nil {
		return err
	}
	disks, cdroms, err := vmcQemuDisks(raw)
	if err != nil {
		return err
	}
	if cfg.NICs, err = vmcQemuNICs(raw); err != nil {
		return err
	}
	if cfg.BootOrder, err = vmcBootOrder(raw, cdroms, cfg.NICs); err != nil {
		return err
	}
	for i := range disks {
		disks[i].Bootable = slices.Contains(cfg.BootOrder, disks[i].Device)
	}
	cfg.Disks = disks
	if cfg.Unused, err = vmcUnused(raw); err != nil {
		return err
	}
	if cfg.PCI, err = vmcHostPCI(raw); err != nil {
		return err
	}
	if cfg.USB, err = vmcUSB(raw); err != nil {
		return err
	}
	return nil
}

// vmcQemuCPU reads sockets, cores, vcpus, numa and cpu.
func vmcQemuCPU(raw map[string]string) (CPU, error) {
	const maxCPUs = 1 << 16
	sockets, err := vmcScalarInt(raw, "sockets", 1, 1, maxCPUs)
	if err != nil {
		return CPU{}, err
	}
	cores, err := vmcScalarInt(raw, "cores", 1, 1, maxCPUs)
	if err != nil {
		return CPU{}, err
	}
	vcpus, err := vmcScalarInt(raw, "vcpus", 0, 0, maxCPUs)
	if err != nil {
		return CPU{}, err
	}
	if vcpus == 0 {
		vcpus = sockets * cores
	}
	cpu := CPU{Sockets: int(sockets), Cores: int(cores), VCPUs: int(vcpus)}
	if v := raw["numa"]; v != "" {
		if cpu.NUMA, err = vmcBool("numa", "", v); err != nil {
			return CPU{}, err
		}
	}
	if v := raw["cpu"]; v != "" {
		opts, err := vmcProps("cpu", v, "cputype", nil)
		if err != nil {
			return CPU{}, err
		}
		cpu.Type = opts["cputype"]
	}
	if cpu.Type == "" {
		kvm := true
		if v := raw["kvm"]; v != "" {
			if kvm, err = vmcBool("kvm", "", v); err != nil {
				return CPU{}, err
			}
		}
		switch {
		case raw["arch"] == "aarch64":
			cpu.Type = "cortex-a57"
		case !kvm:
			cpu.Type = "qemu64"
		default:
			cpu.Type = "kvm64"
		}
	}
	return cpu, nil
}

// vmcQemuMemory reads "memory": "2048" or PVE 9's "current=2048"; 512 when unset.
func vmcQemuMemory(raw map[string]string) (int64, error) {
	v := raw["memory"]
	if v == "" {
		return 512, nil
	}
	opts, err := vmcProps("memory", v, "current", nil)
	if err != nil {
		return 0, err
	}
	cur, ok := opts["current"]
	if !ok {
		return 512, nil
	}
	return vmcInt("memory", "current", cur, 1, math.MaxInt32)
}

// vmcMachine reads "machine" ([type=]TYPE[,viommu=…]) into family and pinned version.
func vmcMachine(raw map[string]string) (family, version string, err error) {
	typ := ""
	if v := raw["machine"]; v != "" {
		opts, err := vmcProps("machine", v, "type", nil)
		if err != nil {
			return "", "", err
		}
		typ = opts["type"]
	}
	if typ == "" {
		if raw["arch"] == "aarch64" {
			return "virt", "", nil
		}
		return "i440fx", "", nil
	}
	m := vmcMachineRE.FindStringSubmatch(typ)
	switch {
	case m == nil:
		return "", "", &ConfigError{Key: "machine", Reason: "type: not a QEMU machine type"}
	case m[1] != "":
		return "i440fx", "", nil
	case m[2] != "":
		return "q35", "", nil
	case m[3] != "":
		return "virt", "", nil
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

// vmcQemuDisks parses the drive keys. It returns the disks (bootable not yet set) and the
// CD-ROM drives (media=cdrom, Cloud-Init excluded) in drive order, for the legacy boot order.
func vmcQemuDisks(raw map[string]string) ([]Disk, []string, error) {
	disks := []Disk{}
	var cdroms []string
	for _, d := range vmcDevices(raw, vmcQemuDiskBuses) {
		if (d.bus == "efidisk" || d.bus == "tpmstate") && d.index != 0 {
			continue // not a PVE key
		}
		opts, err := vmcProps(d.key, raw[d.key], "file", map[string]string{"volume": "file"})
		if err != nil {
			return nil, nil, err
		}
		file := opts["file"]
		if file == "" {
			return nil, nil, &ConfigError{Key: d.key, Reason: "no volume"}
		}
		media := opts["media"]
		if media != "" && media != "disk" && media != "cdrom" {
			return nil, nil, &ConfigError{Key: d.key, Reason: "media: must be disk or cdrom"}
		}
		cloudInit := vmcCloudInitRE.MatchString(file)
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
		if disk.Storage, disk.Volume, err = vmcVolume(d.key, file); err != nil {
			return nil, nil, err
		}
		if v, ok := opts["size"]; ok {
			if disk.SizeBytes, err = vmcSize(d.key, v); err != nil {
				return nil, nil, err
			}
		}
		disk.Format = vmcFormat(opts["format"], disk.Volume)
		disks = append(disks, disk)
	}
	return disks, cdroms, nil
}

// vmcQemuNICs parses netN: "MODEL[=MAC]" or "model=MODEL,macaddr=MAC", bridge, tag, firewall.
func vmcQemuNICs(raw map[string]string) ([]NIC, error) {
	out := []NIC{}
	for _, d := range vmcDevices(raw, map[string]int{"net": 0}) {
		opts, err := vmcSplit(d.key, raw[d.key])
		if err != nil {
			return nil, err
		}
		nic := NIC{Device: d.key}
		seen := map[string]bool{}
		set := func(opt string) error {
			if seen[opt] {
				return &ConfigError{Key: d.key, Reason: "duplicate option " + opt}
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
				if nic.MAC, err = vmcMAC(d.key, "macaddr", o.Val); err != nil {
					return nil, err
				}
			case slices.Contains(vmcNICModels, o.Key) || (!seen["model"] && vmcMACRE.MatchString(o.Val) && !vmcNetOption(o.Key)):
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
				if nic.MAC, err = vmcMAC(d.key, o.Key, o.Val); err != nil {
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
			return nil, &ConfigError{Key: d.key, Reason: "no NIC model"}
		}
		nic.Bridge = vals["bridge"]
		if nic.VLAN, err = vmcVLAN(d.key, vals); err != nil {
			return nil, err
		}
		if nic.Firewall, err = vmcOptBool(d.key, vals, "firewall"); err != nil {
			return nil, err
		}
		out = append(out, nic)
	}
	return out, nil
}

// vmcNetOption reports whether k is a known non-model option of a QEMU netN value.
func vmcNetOption(k string) bool {
	switch k {
	case "bridge", "queues", "rate", "tag", "trunks", "firewall", "link_down", "mtu":
		return true
	}
	return false
}

// vmcBootOrder computes the boot order from "boot" / "bootdisk" (see VMConfig.BootOrder).
func vmcBootOrder(raw map[string]string, cdroms []string, nics []NIC) ([]string, error) {
	order := []string{}
	legacy := "cdn"
	if v := raw["boot"]; v != "" {
		opts, err := vmcProps("boot", v, "legacy", nil)
		if err != nil {
			return nil, err
		}
		if o, ok := opts["order"]; ok {
			for _, dev := range strings.FieldsFunc(o, func(r rune) bool { return r == ';' || r == ' ' }) {
				if !vmcBootDevRE.MatchString(dev) {
					return nil, &ConfigError{Key: "boot", Reason: "order: not a boot device"}
				}
				order = append(order, dev)
			}
			return order, nil
		}
		if l, ok := opts["legacy"]; ok {
			legacy = l
		}
	}
	if len(legacy) < 1 || len(legacy) > 4 || strings.Trim(legacy, "acdn") != "" {
		return nil, &ConfigError{Key: "boot", Reason: "legacy: must be 1 to 4 of a, c, d, n"}
	}
	bootdisk := raw["bootdisk"]
	if bootdisk != "" && !vmcBootDiskRE.MatchString(bootdisk) {
		return nil, &ConfigError{Key: "bootdisk", Reason: "not a disk device"}
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

// vmcPCIRE is one host PCI id as qemu-server accepts it ([domain:]bus:dev[.func]).
var vmcPCIRE = regexp.MustCompile(`^(?i:(?:[0-9a-f]{4,}:)?[0-9a-f]{2}:[0-9a-f]{2}(?:\.[0-9a-f])?)$`)

// vmcHostPCI parses hostpciN: [host=]IDS | mapping=ID, pcie, x-vga.
func vmcHostPCI(raw map[string]string) ([]PCIPassthrough, error) {
	out := []PCIPassthrough{}
	for _, d := range vmcDevices(raw, map[string]int{"hostpci": 0}) {
		opts, err := vmcProps(d.key, raw[d.key], "host", nil)
		if err != nil {
			return nil, err
		}
		p := PCIPassthrough{Device: d.key, Host: opts["host"], Mapping: opts["mapping"]}
		if p.Host == "" && p.Mapping == "" {
			return nil, &ConfigError{Key: d.key, Reason: "neither host nor mapping"}
		}
		if p.Host != "" {
			for id := range strings.SplitSeq(p.Host, ";") {
				if !vmcPCIRE.MatchString(id) {
					return nil, &ConfigError{Key: d.key, Reason: "host: not a PCI id list"}
				}
			}
		}
		if p.PCIe, err = vmcOptBool(d.key, opts, "pcie"); err != nil {
			return nil, err
		}
		if p.XVGA, err = vmcOptBool(d.key, opts, "x-vga"); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// vmcUSBHostRE is a usbN host: vendor:product, bus-port(.port)* or spice.
var vmcUSBHostRE = regexp.MustCompile(`^(?:(?:0x)?[0-9A-Fa-f]{4}:(?:0x)?[0-9A-Fa-f]{4}|\d+-\d+(?:\.\d+)*|(?i:spice))$`)

// vmcUSB parses usbN: [host=]DEVICE|spice | mapping=ID, usb3.
func vmcUSB(raw map[string]string) ([]USBPassthrough, error) {
	out := []USBPassthrough{}
	for _, d := range vmcDevices(raw, map[string]int{"usb": 0}) {
		opts, err := vmcProps(d.key, raw[d.key], "host", nil)
		if err != nil {
			return nil, err
		}
		u := USBPassthrough{Device: d.key, Host: opts["host"], Mapping: opts["mapping"]}
		if u.Host == "" && u.Mapping == "" {
			return nil, &ConfigError{Key: d.key, Reason: "neither host nor mapping"}
		}
		if u.Host != "" && !vmcUSBHostRE.MatchString(u.Host) {
			return nil, &ConfigError{Key: d.key, Reason: "host: not a USB device, port or spice"}
		}
		u.Spice = strings.EqualFold(u.Host, "spice")
		if u.USB3, err = vmcOptBool(d.key, opts, "usb3"); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// vmcLXC fills cfg from a container's configuration.
func vmcLXC(cfg *VMConfig, raw map[string]string) error {
	cfg.Name = raw["hostname"]
	cfg.OSType = raw["ostype"]
	cores, err := vmcScalarInt(raw, "cores", 0, 1, 8192)
	if err != nil {
		return err
	}
	cfg.CPU = CPU{Sockets: 1, Cores: int(cores), VCPUs: int(cores)}
	if cfg.MemoryMB, err = vmcScalarInt(raw, "memory", 512, 1, math.MaxInt32); err != nil {
		return err
	}
	if cfg.Disks, err = vmcLXCDisks(raw); err != nil {
		return err
	}
	if cfg.NICs, err = vmcLXCNICs(raw); err != nil {
		return err
	}
	if cfg.Unused, err = vmcUnused(raw); err != nil {
		return err
	}
	return nil
}

// vmcLXCDisks parses rootfs and mpN ([volume=]VOLUME,mp=PATH,size=…). Bind mounts (an
// absolute path outside /dev) are not disks and are skipped.
func vmcLXCDisks(raw map[string]string) ([]Disk, error) {
	keys := []vmcDevKey{}
	if _, ok := raw["rootfs"]; ok {
		keys = append(keys, vmcDevKey{key: "rootfs"})
	}
	keys = append(keys, vmcDevices(raw, map[string]int{"mp": 0})...)
	disks := []Disk{}
	for _, d := range keys {
		opts, err := vmcProps(d.key, raw[d.key], "volume", nil)
		if err != nil {
			return nil, err
		}
		vol := opts["volume"]
		if vol == "" {
			return nil, &ConfigError{Key: d.key, Reason: "no volume"}
		}
		disk := Disk{Device: d.key, MountPoint: opts["mp"], Bootable: d.key == "rootfs"}
		if d.key == "rootfs" {
			disk.MountPoint = "/"
		} else if disk.MountPoint == "" {
			return nil, &ConfigError{Key: d.key, Reason: "no mount point (mp)"}
		}
		if strings.HasPrefix(vol, "/") && !strings.HasPrefix(vol, "/dev/") {
			continue // bind mount of a host directory
		}
		if disk.Storage, disk.Volume, err = vmcVolume(d.key, vol); err != nil {
			return nil, err
		}
		if v, ok := opts["size"]; ok {
			if disk.SizeBytes, err = vmcSize(d.key, v); err != nil {
				return nil, err
			}
		}
		disk.Format = vmcFormat(opts["format"], disk.Volume)
		disks = append(disks, disk)
	}
	return disks, nil
}

// vmcLXCNICs parses a container's netN: name=eth0,bridge=…,hwaddr=…,tag=…,firewall=1,type=veth.
func vmcLXCNICs(raw map[string]string) ([]NIC, error) {
	out := []NIC{}
	for _, d := range vmcDevices(raw, map[string]int{"net": 0}) {
		opts, err := vmcProps(d.key, raw[d.key], "", nil)
		if err != nil {
			return nil, err
		}
		nic := NIC{Device: d.key, Name: opts["name"], Bridge: opts["bridge"], Model: opts["type"]}
		if nic.Name == "" {
			return nil, &ConfigError{Key: d.key, Reason: "no interface name"}
		}
		if nic.Model == "" {
			nic.Model = "veth"
		}
		if v, ok := opts["hwaddr"]; ok {
			if nic.MAC, err = vmcMAC(d.key, "hwaddr", v); err != nil {
				return nil, err
			}
		}
		if nic.VLAN, err = vmcVLAN(d.key, opts); err != nil {
			return nil, err
		}
		if nic.Firewall, err = vmcOptBool(d.key, opts, "firewall"); err != nil {
			return nil, err
		}
		out = append(out, nic)
	}
	return out, nil
}
