package guestconfig_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/internal/guestconfig"
)

// loadFixture loads testdata/vmconfig/NAME, a GET …/config answer as PVE sends it
// ({"data": {…}} with JSON numbers, strings and arrays), and flattens it to strings the way
// the client does: numbers in decimal, booleans "0"/"1", arrays as their JSON text.
func loadFixture(t *testing.T, name string) map[string]string {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", "vmconfig", name))
	if err != nil {
		t.Fatalf("read fixture: %v", err)
	}
	var env struct {
		Data map[string]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("decode fixture %s: %v", name, err)
	}
	out := make(map[string]string, len(env.Data))
	for k, v := range env.Data {
		v = bytes.TrimSpace(v)
		switch {
		case string(v) == "null":
		case v[0] == '"':
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				t.Fatalf("fixture %s key %s: %v", name, k, err)
			}
			out[k] = s
		case string(v) == "true":
			out[k] = "1"
		case string(v) == "false":
			out[k] = "0"
		default:
			out[k] = string(v)
		}
	}
	return out
}

// mustParse parses raw and fails the test on an error.
func mustParse(t *testing.T, guestType string, raw map[string]string, vmid int64) guestconfig.Config {
	t.Helper()
	cfg, err := guestconfig.Parse(guestType, raw, "pve1", vmid)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return cfg
}

// diff fails with both values as JSON when got != want.
func diff(t *testing.T, what string, got, want any) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	g, _ := json.MarshalIndent(got, "", "  ")
	w, _ := json.MarshalIndent(want, "", "  ")
	t.Errorf("%s:\n got: %s\nwant: %s", what, g, w)
}

// TestParseFixtures pins the parse of realistic configurations, as PVE answers
// them, field by field.
func TestParseFixtures(t *testing.T) {
	t.Parallel()
	const (
		k = int64(1) << 10
		m = int64(1) << 20
		g = int64(1) << 30
		T = int64(1) << 40
	)
	tests := []struct {
		name      string
		fixture   string
		guestType string
		vmid      int64
		want      guestconfig.Config
	}{
		{
			name: "SeaBIOS i440fx VM with virtio disks", fixture: "qemu-seabios-i440fx.json", guestType: "qemu", vmid: 100,
			want: guestconfig.Config{
				VMID: "100", Name: "web01", Node: "pve1", Type: "qemu",
				CPU:      guestconfig.CPU{Sockets: 1, Cores: 2, VCPUs: 2, Type: "kvm64"},
				MemoryMB: 4096, Firmware: "seabios", Machine: "i440fx", OSType: "l26",
				BootOrder: []string{"virtio0", "ide2", "net0"},
				Disks: []guestconfig.Disk{
					{Device: "virtio0", Storage: "local-lvm", Volume: "vm-100-disk-0", SizeBytes: 32 * g, Format: "raw", Bootable: true},
					{Device: "virtio1", Storage: "local", Volume: "100/vm-100-disk-1.qcow2", SizeBytes: 512 * m, Format: "qcow2"},
					{Device: "virtio2", Storage: "nfs-vmdk", Volume: "100/vm-100-disk-2.vmdk", SizeBytes: 2560 * k, Format: "vmdk"},
					{Device: "virtio10", Storage: "local-lvm", Volume: "vm-100-disk-3", SizeBytes: T, Format: "raw"},
				},
				Unused: []guestconfig.UnusedDisk{},
				NICs: []guestconfig.NIC{
					{Device: "net0", Model: "virtio", MAC: "BC:24:11:5E:7A:01", Bridge: "vmbr0"},
				},
				PCI: []guestconfig.PCIPassthrough{}, USB: []guestconfig.USBPassthrough{},
				Tags: []string{"prod", "web"},
			},
		},
		{
			name:    "OVMF q35 VM with EFI, TPM, two storages, Cloud-Init, CD-ROMs, VLANs, PCI and USB passthrough",
			fixture: "qemu-ovmf-q35.json", guestType: "qemu", vmid: 200,
			want: guestconfig.Config{
				VMID: "200", Name: "win-gpu", Node: "pve1", Type: "qemu",
				CPU:      guestconfig.CPU{Sockets: 2, Cores: 8, VCPUs: 12, NUMA: true, Type: "x86-64-v2-AES"},
				MemoryMB: 16384, Firmware: "ovmf", Machine: "q35", MachineVersion: "8.1", OSType: "win11",
				BootOrder: []string{"scsi0", "ide2", "net0"},
				Disks: []guestconfig.Disk{
					{Device: "scsi0", Storage: "local-lvm", Volume: "vm-200-disk-2", SizeBytes: 100 * g, Format: "raw", Bootable: true},
					{Device: "scsi1", Storage: "ceph", Volume: "vm-200-disk-0", SizeBytes: 500 * g, Format: "raw"},
					{Device: "scsi2", Storage: "ceph", Volume: "vm-200-disk-1", SizeBytes: 1536 * g, Format: "raw"},
					{Device: "efidisk0", Storage: "local-lvm", Volume: "vm-200-disk-0", SizeBytes: 4 * m, Format: "raw"},
					{Device: "tpmstate0", Storage: "local-lvm", Volume: "vm-200-disk-1", SizeBytes: 4 * m, Format: "raw"},
				},
				Unused: []guestconfig.UnusedDisk{
					{Device: "unused0", Storage: "ceph", Volume: "vm-200-disk-2"},
					{Device: "unused1", Storage: "local-lvm", Volume: "vm-200-disk-5"},
				},
				NICs: []guestconfig.NIC{
					{Device: "net0", Model: "virtio", MAC: "BC:24:11:00:00:01", Bridge: "vmbr0", VLAN: 10, Firewall: true},
					{Device: "net1", Model: "e1000e", MAC: "BC:24:11:00:00:02", Bridge: "vmbr1", VLAN: 4094, Firewall: true},
					{Device: "net2", Model: "virtio", MAC: "BC:24:11:00:00:03", Bridge: "vmbr1"},
				},
				PCI: []guestconfig.PCIPassthrough{
					{Device: "hostpci0", Mapping: "rtx4090", PCIe: true, XVGA: true},
					{Device: "hostpci1", Host: "0000:01:00.1;0000:02:00.0", PCIe: true},
					{Device: "hostpci2", Host: "03:00"},
				},
				USB: []guestconfig.USBPassthrough{
					{Device: "usb0", Host: "046d:c52b", USB3: true},
					{Device: "usb1", Mapping: "yubikey", USB3: true},
					{Device: "usb2", Host: "spice", Spice: true},
					{Device: "usb3", Host: "1-2.3"},
				},
				Description: "Windows 11 GPU workstation.\nOwner: **graphics team**\n",
				Tags:        []string{"gpu", "windows"},
			},
		},
		{
			name: "container with rootfs, volume, subvolume, device and bind mount points", fixture: "lxc-mountpoints.json",
			guestType: "lxc", vmid: 101,
			want: guestconfig.Config{
				VMID: "101", Name: "pihole", Node: "pve1", Type: "lxc",
				CPU:      guestconfig.CPU{Sockets: 1, Cores: 2, VCPUs: 2},
				MemoryMB: 1024, OSType: "debian",
				BootOrder: []string{},
				Disks: []guestconfig.Disk{
					{Device: "rootfs", Storage: "local-lvm", Volume: "vm-101-disk-0", SizeBytes: 8 * g, Format: "raw", Bootable: true, MountPoint: "/"},
					{Device: "mp0", Storage: "ceph", Volume: "vm-101-disk-1", SizeBytes: 100 * g, Format: "raw", MountPoint: "/srv/data"},
					{Device: "mp2", Storage: "local-zfs", Volume: "subvol-101-disk-2", SizeBytes: 16 * g, Format: "subvol", MountPoint: "/var/log"},
					{Device: "mp10", Volume: "/dev/sdb1", Format: "raw", MountPoint: "/mnt/usb"},
				},
				Unused: []guestconfig.UnusedDisk{{Device: "unused0", Storage: "local-lvm", Volume: "vm-101-disk-3"}},
				NICs: []guestconfig.NIC{
					{Device: "net0", Model: "veth", MAC: "BC:24:11:AA:BB:01", Bridge: "vmbr0", VLAN: 10, Firewall: true, Name: "eth0"},
					{Device: "net1", Model: "veth", MAC: "BC:24:11:AA:BB:02", Bridge: "vmbr1", Name: "eth1"},
				},
				PCI: []guestconfig.PCIPassthrough{}, USB: []guestconfig.USBPassthrough{},
				Description: "Pi-hole DNS\n",
				Tags:        []string{"dns", "infra"},
			},
		},
		{
			name: "legacy boot: cdn with bootdisk", fixture: "qemu-legacy-bootdisk.json", guestType: "qemu", vmid: 300,
			want: guestconfig.Config{
				VMID: "300", Name: "old-vm", Node: "pve1", Type: "qemu",
				CPU:      guestconfig.CPU{Sockets: 1, Cores: 1, VCPUs: 1, Type: "kvm64"},
				MemoryMB: 1024, Firmware: "seabios", Machine: "i440fx", OSType: "l26",
				BootOrder: []string{"scsi0", "ide2", "net0", "net1"},
				Disks: []guestconfig.Disk{
					{Device: "scsi0", Storage: "local", Volume: "300/vm-300-disk-0.raw", SizeBytes: 10 * g, Format: "raw", Bootable: true},
					{Device: "scsi1", Storage: "local", Volume: "300/vm-300-disk-1.qcow2", SizeBytes: 20 * g, Format: "qcow2"},
				},
				Unused: []guestconfig.UnusedDisk{},
				NICs: []guestconfig.NIC{
					{Device: "net0", Model: "e1000", MAC: "52:54:00:12:34:56", Bridge: "vmbr0"},
					{Device: "net1", Model: "rtl8139", MAC: "52:54:00:12:34:57", Bridge: "vmbr0", VLAN: 5},
				},
				PCI: []guestconfig.PCIPassthrough{}, USB: []guestconfig.USBPassthrough{},
				Tags: []string{},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := mustParse(t, tt.guestType, loadFixture(t, tt.fixture), tt.vmid)
			diff(t, "config", got, tt.want)
		})
	}
}

// TestParseDefaults pins what an absent key means (qemu-server's defaults).
func TestParseDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		guestType string
		raw       map[string]string
		check     func(t *testing.T, c guestconfig.Config)
	}{
		{"empty VM", "qemu", nil, func(t *testing.T, c guestconfig.Config) {
			diff(t, "config", c, guestconfig.Config{
				VMID: "42", Node: "pve1", Type: "qemu",
				CPU:      guestconfig.CPU{Sockets: 1, Cores: 1, VCPUs: 1, Type: "kvm64"},
				MemoryMB: 512, Firmware: "seabios", Machine: "i440fx", OSType: "other",
				BootOrder: []string{}, Disks: []guestconfig.Disk{}, Unused: []guestconfig.UnusedDisk{},
				NICs: []guestconfig.NIC{}, PCI: []guestconfig.PCIPassthrough{}, USB: []guestconfig.USBPassthrough{},
				Tags: []string{},
			})
		}},
		{"empty container", "lxc", map[string]string{}, func(t *testing.T, c guestconfig.Config) {
			diff(t, "config", c, guestconfig.Config{
				VMID: "42", Node: "pve1", Type: "lxc",
				CPU:      guestconfig.CPU{Sockets: 1},
				MemoryMB: 512, BootOrder: []string{}, Disks: []guestconfig.Disk{}, Unused: []guestconfig.UnusedDisk{},
				NICs: []guestconfig.NIC{}, PCI: []guestconfig.PCIPassthrough{}, USB: []guestconfig.USBPassthrough{},
				Tags: []string{},
			})
		}},
		{"no boot key: legacy cdn", "qemu", map[string]string{
			"bootdisk": "virtio0", "virtio0": "local-lvm:vm-42-disk-0,size=8G",
			"ide2": "local:iso/x.iso,media=cdrom", "net0": "virtio=BC:24:11:00:00:09,bridge=vmbr0",
		}, func(t *testing.T, c guestconfig.Config) {
			diff(t, "boot order", c.BootOrder, []string{"virtio0", "ide2", "net0"})
			diff(t, "bootable", c.Disks[0].Bootable, true)
		}},
		{"legacy without c: bootdisk not bootable", "qemu", map[string]string{
			"boot": "legacy=nd", "bootdisk": "sata0", "sata0": "local-lvm:vm-42-disk-0,size=8G",
			"ide2": "local:iso/x.iso,media=cdrom", "net0": "virtio,bridge=vmbr0",
		}, func(t *testing.T, c guestconfig.Config) {
			diff(t, "boot order", c.BootOrder, []string{"net0", "ide2"})
			diff(t, "bootable", c.Disks[0].Bootable, false)
		}},
		{"legacy: Cloud-Init drive is not a CD-ROM to boot", "qemu", map[string]string{
			"boot": "dc", "bootdisk": "scsi0", "scsi0": "local-lvm:vm-42-disk-0,size=8G",
			"ide2": "local-lvm:vm-42-cloudinit,media=cdrom",
		}, func(t *testing.T, c guestconfig.Config) {
			diff(t, "boot order", c.BootOrder, []string{"scsi0"})
		}},
		{"order= wins over bootdisk; disks not listed are not bootable", "qemu", map[string]string{
			"boot": "order=scsi1;net0", "bootdisk": "scsi0",
			"scsi0": "local-lvm:vm-42-disk-0,size=8G", "scsi1": "local-lvm:vm-42-disk-1,size=8G",
			"net0": "virtio=BC:24:11:00:00:09,bridge=vmbr0",
		}, func(t *testing.T, c guestconfig.Config) {
			diff(t, "boot order", c.BootOrder, []string{"scsi1", "net0"})
			diff(t, "bootable", []bool{c.Disks[0].Bootable, c.Disks[1].Bootable}, []bool{false, true})
		}},
		{"kvm disabled: qemu64", "qemu", map[string]string{"kvm": "0"}, func(t *testing.T, c guestconfig.Config) {
			diff(t, "cpu type", c.CPU.Type, "qemu64")
		}},
		{"aarch64: host on virt (qemu-server 9.2.3+)", "qemu", map[string]string{"arch": "aarch64"}, func(t *testing.T, c guestconfig.Config) {
			diff(t, "cpu, machine", []string{c.CPU.Type, c.Machine}, []string{"host", "virt"})
		}},
		{"aarch64 without KVM: max", "qemu", map[string]string{"arch": "aarch64", "kvm": "0"}, func(t *testing.T, c guestconfig.Config) {
			diff(t, "cpu type", c.CPU.Type, "max")
		}},
		{"aarch64 with a cpu line keeps it", "qemu", map[string]string{"arch": "aarch64", "cpu": "cortex-a72"}, func(t *testing.T, c guestconfig.Config) {
			diff(t, "cpu type", c.CPU.Type, "cortex-a72")
		}},
		{"empty boot: boots from nothing, no device bootable", "qemu", map[string]string{
			"boot": "", "bootdisk": "virtio0", "virtio0": "local-lvm:vm-42-disk-0,size=8G",
			"ide2": "none,media=cdrom", "net0": "virtio=BC:24:11:00:00:09,bridge=vmbr0",
		}, func(t *testing.T, c guestconfig.Config) {
			diff(t, "boot order", c.BootOrder, []string{})
			diff(t, "bootable", c.Disks[0].Bootable, false)
		}},
		{"blank boot (the config file's \"boot: \"): boots from nothing", "qemu", map[string]string{
			"boot": " ", "virtio0": "local-lvm:vm-42-disk-0,size=8G", "ide2": "none,media=cdrom",
			"net0": "virtio=BC:24:11:00:00:09,bridge=vmbr0",
		}, func(t *testing.T, c guestconfig.Config) {
			diff(t, "boot order", c.BootOrder, []string{})
		}},
		{"cpu with flags only keeps the default type", "qemu", map[string]string{"cpu": "flags=+aes"}, func(t *testing.T, c guestconfig.Config) {
			diff(t, "cpu type", c.CPU.Type, "kvm64")
		}},
		{"cpu bare type and vcpus below sockets*cores", "qemu", map[string]string{
			"cpu": "host,hidden=1", "sockets": "2", "cores": "4", "vcpus": "3", "numa": "1",
		}, func(t *testing.T, c guestconfig.Config) {
			diff(t, "cpu", c.CPU, guestconfig.CPU{Sockets: 2, Cores: 4, VCPUs: 3, NUMA: true, Type: "host"})
		}},
		{"memory without current keeps the default", "qemu", map[string]string{"memory": ""}, func(t *testing.T, c guestconfig.Config) {
			diff(t, "memory", c.MemoryMB, int64(512))
		}},
		{"drive forms: volume= alias, passthrough path, empty CD-ROM, format option, linked clones", "qemu", map[string]string{
			"scsi0":   "volume=local-lvm:vm-42-disk-0,size=8G",
			"sata0":   "/dev/disk/by-id/ata-WDC_WD40EFRX-68N32N0_WD-WCC7K0000000,backup=0,size=3907018584K",
			"ide0":    "none,media=cdrom",
			"ide1":    "cdrom,media=cdrom",
			"virtio0": "local:42/vm-42-disk-1.qcow2,format=raw,size=1G",
			"virtio1": "local:9000/base-9000-disk-0.qcow2/42/vm-42-disk-2.qcow2,size=2G",
			"virtio2": "ceph:base-9000-disk-0/vm-42-disk-3,size=3G",
		}, func(t *testing.T, c guestconfig.Config) {
			diff(t, "disks", c.Disks, []guestconfig.Disk{
				{Device: "scsi0", Storage: "local-lvm", Volume: "vm-42-disk-0", SizeBytes: 8 << 30, Format: "raw"},
				{Device: "virtio0", Storage: "local", Volume: "42/vm-42-disk-1.qcow2", SizeBytes: 1 << 30, Format: "raw"},
				{Device: "virtio1", Storage: "local", Volume: "9000/base-9000-disk-0.qcow2/42/vm-42-disk-2.qcow2", SizeBytes: 2 << 30, Format: "qcow2"},
				{Device: "virtio2", Storage: "ceph", Volume: "base-9000-disk-0/vm-42-disk-3", SizeBytes: 3 << 30, Format: "raw"},
				{Device: "sata0", Volume: "/dev/disk/by-id/ata-WDC_WD40EFRX-68N32N0_WD-WCC7K0000000", SizeBytes: 3907018584 << 10, Format: "raw"},
			})
			diff(t, "legacy boot order (cdn: CD-ROMs only)", c.BootOrder, []string{"ide0", "ide1"})
		}},
		{"Cloud-Init on a file storage is excluded", "qemu", map[string]string{
			"scsi1": "local:42/vm-42-cloudinit.qcow2,media=cdrom", "scsi2": "local:42/vm-42-cloudinit.qcow2",
			"scsi3": "local-lvm:vm-42-cloudinit-data,size=1G",
		}, func(t *testing.T, c guestconfig.Config) {
			diff(t, "disks", c.Disks, []guestconfig.Disk{
				{Device: "scsi3", Storage: "local-lvm", Volume: "vm-42-cloudinit-data", SizeBytes: 1 << 30, Format: "raw"},
			})
		}},
		{"NIC without MAC, model= form, unknown options", "qemu", map[string]string{
			"net0": "virtio,bridge=vmbr0,mtu=1", "net1": "model=vmxnet3,bridge=vmbr1,rate=12.5,trunks=10;20",
			"net2": "virtio=BC:24:11:00:00:0A",
		}, func(t *testing.T, c guestconfig.Config) {
			diff(t, "nics", c.NICs, []guestconfig.NIC{
				{Device: "net0", Model: "virtio", Bridge: "vmbr0"},
				{Device: "net1", Model: "vmxnet3", Bridge: "vmbr1"},
				{Device: "net2", Model: "virtio", MAC: "BC:24:11:00:00:0A"},
			})
		}},
		{"tags separated by commas, semicolons and spaces", "qemu", map[string]string{"tags": " a,b;c  d "}, func(t *testing.T, c guestconfig.Config) {
			diff(t, "tags", c.Tags, []string{"a", "b", "c", "d"})
		}},
		{"device order is numeric within each bus", "qemu", map[string]string{
			"net10": "virtio,bridge=vmbr0", "net2": "virtio,bridge=vmbr0", "net0": "virtio,bridge=vmbr0",
			"usb10": "spice", "usb1": "spice", "hostpci10": "01:00", "hostpci9": "02:00",
			"unused10": "local:a", "unused2": "local:b",
			"sata1": "local:42/d.raw", "ide3": "local:42/c.raw", "scsi10": "local:42/b.raw", "scsi2": "local:42/a.raw",
		}, func(t *testing.T, c guestconfig.Config) {
			var disks, nics, usb, pci, unused []string
			for _, d := range c.Disks {
				disks = append(disks, d.Device)
			}
			for _, n := range c.NICs {
				nics = append(nics, n.Device)
			}
			for _, u := range c.USB {
				usb = append(usb, u.Device)
			}
			for _, p := range c.PCI {
				pci = append(pci, p.Device)
			}
			for _, u := range c.Unused {
				unused = append(unused, u.Device)
			}
			diff(t, "order", [][]string{disks, nics, usb, pci, unused}, [][]string{
				{"ide3", "scsi2", "scsi10", "sata1"}, {"net0", "net2", "net10"}, {"usb1", "usb10"},
				{"hostpci9", "hostpci10"}, {"unused2", "unused10"},
			})
		}},
		{"container bind mount and unknown options skipped, net without hwaddr", "lxc", map[string]string{
			"rootfs": "volume=local:101/vm-101-disk-0.raw,size=4G,mountoptions=noatime",
			"mp0":    "/srv/share,mp=/share,ro=1",
			"net0":   "name=eth0,bridge=vmbr0,ip=dhcp", "cores": "4", "cpulimit": "1.5",
		}, func(t *testing.T, c guestconfig.Config) {
			diff(t, "disks", c.Disks, []guestconfig.Disk{
				{Device: "rootfs", Storage: "local", Volume: "101/vm-101-disk-0.raw", SizeBytes: 4 << 30, Format: "raw", Bootable: true, MountPoint: "/"},
			})
			diff(t, "nics", c.NICs, []guestconfig.NIC{{Device: "net0", Model: "veth", Bridge: "vmbr0", Name: "eth0"}})
			diff(t, "cpu", c.CPU, guestconfig.CPU{Sockets: 1, Cores: 4, VCPUs: 4})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.check(t, mustParse(t, tt.guestType, tt.raw, 42))
		})
	}
}

// TestParseMachine pins the machine family and pinned version of every machine form.
func TestParseMachine(t *testing.T) {
	t.Parallel()
	tests := []struct{ machine, family, version string }{
		{"", "i440fx", ""},
		{"pc", "i440fx", ""},
		{"q35", "q35", ""},
		{"pc-i440fx-8.1", "i440fx", "8.1"},
		{"pc-i440fx-9.2+pve1", "i440fx", "9.2+pve1"},
		{"pc-6.2", "i440fx", "6.2"},
		{"pc-q35-8.1", "q35", "8.1"},
		{"pc-q35-7.2.pxe", "q35", "7.2"},
		{"pc-q35-10.0+pve1.pxe", "q35", "10.0+pve1"},
		{"type=q35,viommu=intel", "q35", ""},
		{"viommu=virtio", "i440fx", ""},
		{"virt-9.0", "virt", "9.0"},
	}
	for _, tt := range tests {
		t.Run(tt.machine, func(t *testing.T) {
			t.Parallel()
			c := mustParse(t, "qemu", map[string]string{"machine": tt.machine}, 100)
			diff(t, "machine", []string{c.Machine, c.MachineVersion}, []string{tt.family, tt.version})
		})
	}
}

// TestParseWindowsMachinePin pins the machine version qemu-server's get_vm_machine
// pins a Windows guest to at start when its config pins none: creation-qemu's major.minor
// from 9.1 on, else 5.1; a pinned version, or a guest that is not Windows, is left as it is.
func TestParseWindowsMachinePin(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, ostype, machine, meta string
		family, version             string
	}{
		{"windows, no machine, no meta: 5.1", "win11", "", "", "i440fx", "5.1"},
		{"windows q35, creation 9.2.0", "win11", "q35", "creation-qemu=9.2.0,ctime=1741179133", "q35", "9.2"},
		{"windows pc, creation 9.1", "win10", "pc", "creation-qemu=9.1,ctime=1", "i440fx", "9.1"},
		{"windows q35, creation 10.0.2", "win11", "type=q35,viommu=intel", "creation-qemu=10.0.2", "q35", "10.0"},
		{"windows, creation before 9.1: 5.1", "win10", "q35", "creation-qemu=8.1.5,ctime=1", "q35", "5.1"},
		{"windows, unreadable meta: 5.1", "w2k8", "", "creation-qemu", "i440fx", "5.1"},
		{"windows, meta without creation-qemu: 5.1", "wxp", "", "ctime=1", "i440fx", "5.1"},
		{"windows with a pinned version keeps it", "win11", "pc-q35-8.1", "creation-qemu=9.2.0", "q35", "8.1"},
		{"windows on aarch64 virt", "win11", "", "creation-qemu=9.2.0", "virt", "9.2"},
		{"linux floats", "l26", "q35", "creation-qemu=9.2.0", "q35", ""},
		{"other floats", "", "", "", "i440fx", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			raw := map[string]string{"ostype": tt.ostype, "machine": tt.machine, "meta": tt.meta}
			if tt.family == "virt" {
				raw["arch"] = "aarch64"
			}
			c := mustParse(t, "qemu", raw, 100)
			diff(t, "machine", []string{c.Machine, c.MachineVersion}, []string{tt.family, tt.version})
		})
	}
}

// TestParseSizes pins disk sizes: K/M/G/T are powers of 1024, fractions truncate,
// a bare number is bytes.
func TestParseSizes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		size string
		want int64
	}{
		{"1073741824", 1 << 30},
		{"528K", 528 << 10},
		{"4M", 4 << 20},
		{"32G", 32 << 30},
		{"2T", 2 << 40},
		{"1.5G", 3 << 29},
		{"0.5K", 512},
		{"0", 0},
	}
	for _, tt := range tests {
		t.Run(tt.size, func(t *testing.T) {
			t.Parallel()
			c := mustParse(t, "qemu", map[string]string{"scsi0": "local-lvm:vm-100-disk-0,size=" + tt.size}, 100)
			diff(t, "size", c.Disks[0].SizeBytes, tt.want)
		})
	}
}

// TestParseMalformed pins that a malformed value of an understood key fails with
// ErrMalformed, a *Error naming that key, and an error text without the value.
func TestParseMalformed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, guestType, key, value string
	}{
		{"sockets not a number", "qemu", "sockets", "two-sockets"},
		{"cores zero", "qemu", "cores", "0"},
		{"vcpus negative", "qemu", "vcpus", "-1"},
		{"vcpus overflow", "qemu", "vcpus", "99999999999999999999"},
		{"memory not a number", "qemu", "memory", "lots-of-it"},
		{"memory current not a number", "qemu", "memory", "current=plenty"},
		{"numa not a boolean", "qemu", "numa", "maybe-later"},
		{"kvm not a boolean", "qemu", "kvm", "perhaps"},
		{"bios unknown", "qemu", "bios", "uefi-classic"},
		{"machine unknown", "qemu", "machine", "pc-q99-banana"},
		{"machine duplicate type", "qemu", "machine", "q35,type=pc"},
		{"cpu duplicate type", "qemu", "cpu", "cputype=host,cputype=kvm64"},
		{"boot order bad device", "qemu", "boot", "order=scsi0;floppy0"},
		{"boot legacy bad letters", "qemu", "boot", "legacy=xyz"},
		{"boot legacy too long", "qemu", "boot", "cdncd"},
		{"bootdisk not a disk", "qemu", "bootdisk", "efidisk0"},
		{"disk size unit", "qemu", "scsi0", "local-lvm:vm-100-disk-0,size=32Q"},
		{"disk size overflow", "qemu", "scsi0", "local-lvm:vm-100-disk-0,size=99999999999T"},
		{"disk without volume", "qemu", "scsi0", "size=32G,iothread=1"},
		{"disk volume not a volume id", "qemu", "virtio0", "just-a-name"},
		{"disk media unknown", "qemu", "sata0", "local-lvm:vm-100-disk-0,media=tape"},
		{"disk duplicate option", "qemu", "scsi0", "local-lvm:vm-100-disk-0,size=1G,size=2G"},
		{"disk empty option value", "qemu", "scsi0", "local-lvm:vm-100-disk-0,size="},
		{"efidisk size", "qemu", "efidisk0", "local-lvm:vm-100-disk-1,size=four-megabytes"},
		{"nic bad MAC", "qemu", "net0", "virtio=ZZ:24:11:00:00:01,bridge=vmbr0"},
		{"nic macaddr bad", "qemu", "net0", "model=virtio,macaddr=01:02,bridge=vmbr0"},
		{"nic without model", "qemu", "net0", "bridge=vmbr0,firewall=1"},
		{"nic two models", "qemu", "net0", "virtio=BC:24:11:00:00:01,e1000=BC:24:11:00:00:02"},
		{"nic VLAN out of range", "qemu", "net0", "virtio,bridge=vmbr0,tag=5000"},
		{"nic VLAN not a number", "qemu", "net0", "virtio,bridge=vmbr0,tag=ten-ten"},
		{"nic firewall not a boolean", "qemu", "net1", "virtio,bridge=vmbr0,firewall=enabled"},
		{"hostpci neither host nor mapping", "qemu", "hostpci0", "pcie=1,x-vga=1"},
		{"hostpci bad id", "qemu", "hostpci0", "host=zz:00.0"},
		{"hostpci bad id in list", "qemu", "hostpci1", "0000:01:00.0;gpu-two"},
		{"hostpci pcie not a boolean", "qemu", "hostpci0", "mapping=gpu,pcie=sometimes"},
		{"usb neither host nor mapping", "qemu", "usb0", "usb3=1"},
		{"usb bad host", "qemu", "usb0", "host=keyboard"},
		{"usb usb3 not a boolean", "qemu", "usb1", "mapping=yubikey,usb3=fast"},
		{"unused empty", "qemu", "unused0", ""},
		{"unused not a volume", "qemu", "unused0", "orphaned-disk"},
		{"container cores zero", "lxc", "cores", "0"},
		{"container memory", "lxc", "memory", "one-gigabyte"},
		{"rootfs without volume", "lxc", "rootfs", "size=8G"},
		{"rootfs bad size", "lxc", "rootfs", "local-lvm:vm-101-disk-0,size=eight"},
		{"mount point without mp", "lxc", "mp0", "local-lvm:vm-101-disk-1,size=8G"},
		{"container nic without name", "lxc", "net0", "bridge=vmbr0,hwaddr=BC:24:11:00:00:01"},
		{"container nic value without key", "lxc", "net0", "eth0,bridge=vmbr0"},
		{"container nic bad hwaddr", "lxc", "net0", "name=eth0,hwaddr=not-a-mac-address"},
		{"container nic VLAN zero", "lxc", "net0", "name=eth0,bridge=vmbr0,tag=0"},
		{"container unused", "lxc", "unused3", "volume=nowhere"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := guestconfig.Parse(tt.guestType, map[string]string{tt.key: tt.value, "name": "x"}, "pve1", 100)
			if !errors.Is(err, guestconfig.ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
			var ce *guestconfig.Error
			if !errors.As(err, &ce) || ce.Key != tt.key {
				t.Fatalf("err = %#v, want a *Error for key %q", err, tt.key)
			}
			if !strings.Contains(err.Error(), tt.key+": ") {
				t.Errorf("error %q does not name key %q", err, tt.key)
			}
			if len(tt.value) >= 6 && strings.Contains(err.Error(), tt.value) {
				t.Errorf("error %q echoes the value", err)
			}
		})
	}
	t.Run("unknown guest type", func(t *testing.T) {
		t.Parallel()
		_, err := guestconfig.Parse("docker", nil, "pve1", 100)
		var ce *guestconfig.Error
		if !errors.Is(err, guestconfig.ErrMalformed) || !errors.As(err, &ce) || ce.Key != "type" {
			t.Fatalf("err = %v, want a Error for key type", err)
		}
	})
}

// TestParseUnknownKeys pins that keys the parser does not understand, including
// keys shaped like devices that PVE never writes, never fail the parse and are not reported.
func TestParseUnknownKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		guestType string
		raw       map[string]string
	}{
		{"qemu", "qemu", map[string]string{
			"hookscript": "local:snippets/x.pl", "lock": "backup", "cipassword": "$5$secret$hash",
			"scsi01": "garbage", "net": "garbage", "efidisk1": "garbage", "mp0": "garbage", "rootfs": "garbage",
			"hostname": "garbage", "ipconfig0": "ip=dhcp", "future-option": "x=1,y",
			"scsi0": "local-lvm:vm-100-disk-0,future-flag=1,size=1G",
			"usb0":  "host=spice,future=1", "hostpci0": "01:00.0,device-id=0x1234,driver=vfio",
		}},
		{"lxc", "lxc", map[string]string{
			"lxc": `[["lxc.apparmor.profile","unconfined"]]`, "features": "nesting=1,keyctl=1",
			"dev0": "/dev/ttyUSB0,mode=0666", "hostpci0": "garbage", "usb0": "garbage", "bios": "garbage",
			"machine": "garbage", "boot": "garbage", "scsi0": "garbage", "name": "qemu-only",
			"rootfs": "local-lvm:vm-101-disk-0,size=1G,future=1",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := mustParse(t, tt.guestType, tt.raw, 100)
			if len(c.Disks) != 1 {
				t.Errorf("disks = %+v, want exactly the one understood disk", c.Disks)
			}
			if len(c.NICs)+len(c.Unused) != 0 || (tt.guestType == "lxc" && len(c.PCI)+len(c.USB) != 0) {
				t.Errorf("unexpected devices: %+v", c)
			}
			if c.Name != "" {
				t.Errorf("name = %q, want the key of the other guest type ignored", c.Name)
			}
			out, _ := json.Marshal(c)
			if bytes.Contains(out, []byte("secret")) {
				t.Errorf("output carries an unknown key's value: %s", out)
			}
		})
	}
}

// TestConfigJSON pins the JSON shape of contract §9 vm.config.get.
func TestConfigJSON(t *testing.T) {
	t.Parallel()
	c := mustParse(t, "qemu", loadFixture(t, "qemu-ovmf-q35.json"), 200)
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	diff(t, "top-level keys", keys, []string{
		"boot_order", "cpu", "description", "disks", "firmware", "machine", "machine_version", "memory_mb",
		"name", "nics", "node", "os_type", "pci_passthrough", "tags", "type", "unused", "usb_passthrough", "vmid",
	})
	for _, want := range []string{
		`"vmid":"200"`,
		`"cpu":{"sockets":2,"cores":8,"vcpus":12,"numa":true,"type":"x86-64-v2-AES"}`,
		`{"device":"scsi0","storage":"local-lvm","volume":"vm-200-disk-2","size_bytes":107374182400,"format":"raw","bootable":true}`,
		`{"device":"net2","model":"virtio","mac":"BC:24:11:00:00:03","bridge":"vmbr1","vlan":0,"firewall":false}`,
		`{"device":"hostpci0","mapping":"rtx4090","pcie":true,"x_vga":true}`,
		`{"device":"hostpci2","host":"03:00","pcie":false,"x_vga":false}`,
		`{"device":"usb1","mapping":"yubikey","usb3":true,"spice":false}`,
		`{"device":"unused0","storage":"ceph","volume":"vm-200-disk-2"}`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("JSON lacks %s\n%s", want, out)
		}
	}
	empty, _ := json.Marshal(mustParse(t, "lxc", nil, 7))
	for _, want := range []string{`"boot_order":[]`, `"disks":[]`, `"nics":[]`, `"tags":[]`, `"pci_passthrough":[]`} {
		if !strings.Contains(string(empty), want) {
			t.Errorf("empty config JSON lacks %s: %s", want, empty)
		}
	}
}

// confText turns "key: value" lines (the /etc/pve config file form) into a config map.
func confText(text string) map[string]string {
	raw := map[string]string{}
	for line := range strings.SplitSeq(text, "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if ok {
			raw[k] = v
		}
	}
	return raw
}

// FuzzParse checks that no configuration makes the parser panic, that every error
// is a *Error matching ErrMalformed, and that a parsed config keeps its invariants.
func FuzzParse(f *testing.F) {
	f.Add("qemu", "boot: order=scsi0;ide2;net0\nscsi0: local-lvm:vm-100-disk-0,iothread=1,size=32G\nide2: local:iso/a.iso,media=cdrom\nnet0: virtio=BC:24:11:5E:7A:01,bridge=vmbr0,tag=10,firewall=1")
	f.Add("qemu", "bios: ovmf\nmachine: pc-q35-8.1+pve1\nefidisk0: local-lvm:vm-1-disk-0,efitype=4m,size=4M\nhostpci0: mapping=gpu,pcie=1,x-vga=1\nusb0: host=046d:c52b,usb3=1\nmemory: current=2048")
	f.Add("qemu", "boot: cdn\nbootdisk: virtio0\nvirtio0: local:100/vm-100-disk-0.qcow2,size=1.5G\nunused0: local:100/old.raw")
	f.Add("lxc", "rootfs: local-lvm:vm-101-disk-0,size=8G\nmp0: /mnt/a,mp=/a\nnet0: name=eth0,bridge=vmbr0,hwaddr=BC:24:11:AA:BB:01,tag=5")
	f.Fuzz(func(t *testing.T, guestType, text string) {
		raw := confText(text)
		c, err := guestconfig.Parse(guestType, raw, "pve1", 100)
		if err != nil {
			var ce *guestconfig.Error
			if !errors.Is(err, guestconfig.ErrMalformed) || !errors.As(err, &ce) || ce.Key == "" {
				t.Fatalf("error %v is not a Error naming a key", err)
			}
			return
		}
		if c.BootOrder == nil || c.Disks == nil || c.Unused == nil || c.NICs == nil || c.PCI == nil || c.USB == nil || c.Tags == nil {
			t.Fatalf("nil slice in %+v", c)
		}
		if _, err := json.Marshal(c); err != nil {
			t.Fatalf("marshal: %v", err)
		}
		if guestType == "qemu" && (c.CPU.VCPUs < 1 || c.CPU.Type == "" || c.Firmware == "" || c.Machine == "") {
			t.Fatalf("qemu defaults missing: %+v", c)
		}
		for _, d := range c.Disks {
			if d.Device == "" || d.Volume == "" || d.Format == "" || d.SizeBytes < 0 {
				t.Fatalf("bad disk %+v", d)
			}
			if guestType == "qemu" && d.Bootable != slices.Contains(c.BootOrder, d.Device) {
				t.Fatalf("disk %s bootable=%v but boot order %v", d.Device, d.Bootable, c.BootOrder)
			}
		}
	})
}
