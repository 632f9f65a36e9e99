package guestconfig

import (
	"errors"
	"strconv"
	"strings"
)

// ErrMalformed: a guest configuration key that [Parse] understands holds a value it
// cannot parse. Returned errors are [*Error]s naming the key. Its text names Proxmox: the
// configuration is a Proxmox guest's.
var ErrMalformed = errors.New("proxmox: malformed guest configuration")

// Error is a malformed value of one configuration key. It matches [ErrMalformed].
// Neither field ever holds the configuration value itself (only its key and what is wrong).
type Error struct {
	Key    string // the configuration key, e.g. "scsi0", "net1", "memory"
	Reason string // what is wrong, e.g. "size: not a disk size"
}

// Error renders "proxmox: malformed guest configuration: KEY: REASON".
func (e *Error) Error() string {
	return ErrMalformed.Error() + ": " + e.Key + ": " + e.Reason
}

// Is makes errors.Is(err, ErrMalformed) true.
func (e *Error) Is(target error) bool { return target == ErrMalformed }

// Config is a guest's configuration as contract §9 vm.config.get outputs it.
// Every slice is non-nil (JSON "[]" when empty).
type Config struct {
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
	// suffix dropped). A Windows guest (ostype wxp, w2k, w2k3, w2k8, wvista, winN) without
	// one is pinned by qemu-server at start: to the major.minor of "meta: creation-qemu"
	// when that is 9.1 or later, else to "5.1"; that version is reported. "" for any other
	// guest without one: its machine floats with the installed QEMU.
	MachineVersion string `json:"machine_version,omitempty"`
	// OSType: QEMU "ostype" (PVE's default "other"), LXC "ostype" ("" when unset).
	OSType string `json:"os_type"`
	// BootOrder lists boot devices. From "boot: order=a;b" as written; otherwise from the
	// legacy form ("boot: cdn", or absent = "cdn") expanded the way qemu-server does it:
	// c = "bootdisk" (when set and not a CD-ROM), d = every CD-ROM drive (Cloud-Init drives
	// excluded), n = every netN; "a" (floppy) adds nothing. A "boot" present but empty
	// boots from nothing (qemu-server gives no device a bootindex): empty. Empty for
	// containers.
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
// actually uses: "kvm64" ("qemu64" with kvm: 0); with arch: aarch64 "host" ("max" with
// kvm: 0), as qemu-server 9.2.3 and later choose (earlier ones used "cortex-a57"). New VMs
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

// Parse turns a guest's config (GET /nodes/{node}/{qemu|lxc}/{vmid}/config, values as
// strings: numbers in decimal, booleans "0"/"1") into the typed structure of contract §9
// vm.config.get. guestType is "qemu" or "lxc". It never fails on unknown keys or unknown
// options inside a property string; a malformed value of a key it understands → a
// [*Error] naming the key (errors.Is ErrMalformed). An empty value of a scalar key
// counts as unset, as in qemu-server. Defaults are documented on [Config] and [CPU].
func Parse(guestType string, raw map[string]string, node string, vmid int64) (Config, error) {
	cfg := Config{
		VMID:      strconv.FormatInt(vmid, 10),
		Node:      node,
		Type:      guestType,
		BootOrder: []string{},
		Disks:     []Disk{},
		Unused:    []UnusedDisk{},
		NICs:      []NIC{},
		PCI:       []PCIPassthrough{},
		USB:       []USBPassthrough{},
		Tags:      splitTags(raw["tags"]),
	}
	cfg.Description = raw["description"]
	var err error
	switch guestType {
	case "qemu":
		err = qemu(&cfg, raw)
	case "lxc":
		err = lxc(&cfg, raw)
	default:
		err = &Error{Key: "type", Reason: "guest type must be qemu or lxc"}
	}
	if err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// splitTags splits a pve-tag-list the way PVE::Tools::split_list does (";", "," and spaces).
func splitTags(s string) []string {
	tags := strings.FieldsFunc(s, func(r rune) bool {
		return r == ';' || r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r'
	})
	if tags == nil {
		tags = []string{}
	}
	return tags
}
