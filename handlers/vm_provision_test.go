package handlers

import (
	"slices"
	"testing"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// TestImportStorage pins which storage Proxmox downloads images into: active, enabled,
// file-based, with content import, on the target node; ESXi storages list import too and are
// skipped.
func TestImportStorage(t *testing.T) {
	t.Parallel()
	importing := func(name, typ, node string, enabled, active bool) proxmox.StorageStatus {
		return proxmox.StorageStatus{Storage: name, Type: typ, Node: node, Content: []string{"import", "iso"}, Enabled: enabled, Active: active}
	}
	tests := []struct {
		name string
		inv  []proxmox.StorageStatus
		want string
	}{
		{"nfs with import", []proxmox.StorageStatus{importing("images", "nfs", "pve2", true, true)}, "images"},
		{"esxi is skipped", []proxmox.StorageStatus{importing("esx", "esxi", "pve2", true, true), importing("images", "dir", "pve2", true, true)}, "images"},
		{"only esxi", []proxmox.StorageStatus{importing("esx", "esxi", "pve2", true, true)}, ""},
		{"inactive", []proxmox.StorageStatus{importing("images", "nfs", "pve2", true, false)}, ""},
		{"disabled", []proxmox.StorageStatus{importing("images", "nfs", "pve2", false, true)}, ""},
		{"another node", []proxmox.StorageStatus{importing("images", "nfs", "pve1", true, true)}, ""},
		{"block storage", []proxmox.StorageStatus{importing("lvm", "lvmthin", "pve2", true, true)}, ""},
		{"no import content", []proxmox.StorageStatus{{Storage: "local", Type: "dir", Node: "pve2", Content: []string{"iso"}, Enabled: true, Active: true}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st, ok := importStorage(tt.inv, "pve2")
			if ok != (tt.want != "") || st.Storage != tt.want {
				t.Errorf("importStorage = %q, %v; want %q", st.Storage, ok, tt.want)
			}
		})
	}
}

// TestNICRendering pins the netN values: the net0 override keeps model, MAC and other options;
// an extra NIC keeps the MAC of a NIC already at its index.
func TestNICRendering(t *testing.T) {
	t.Parallel()
	const mac = "BC:24:11:00:00:01"
	if got := overrideNIC("virtio="+mac+",bridge=vmbr0,firewall=1", "vmbr1", 30); got != "virtio="+mac+",firewall=1,bridge=vmbr1,tag=30" {
		t.Errorf("overrideNIC = %q", got)
	}
	if got := overrideNIC("model=e1000,macaddr="+mac+",bridge=vmbr0,tag=5", "", 7); got != "model=e1000,macaddr="+mac+",bridge=vmbr0,tag=7" {
		t.Errorf("overrideNIC vlan only = %q", got)
	}
	if got := renderNIC("e1000="+mac+",bridge=vmbr0", ExtraNetwork{Index: 2, Bridge: "vmbr1", Model: "virtio", VLANTag: 20, Firewall: true}); got != "virtio="+mac+",bridge=vmbr1,tag=20,firewall=1" {
		t.Errorf("renderNIC with an existing MAC = %q", got)
	}
	if got := renderNIC("", ExtraNetwork{Index: 2, Bridge: "vmbr1", Model: "virtio"}); got != "virtio,bridge=vmbr1" {
		t.Errorf("renderNIC new = %q", got)
	}
}

// TestLocalVolumes pins which template volumes make a cross-node clone impossible: every
// drive's volume on a storage not shared on the template's node, CD-ROM and Cloud-Init ones
// included; "none", the host "cdrom", host paths and storages the inventory does not list are
// left to Proxmox.
func TestLocalVolumes(t *testing.T) {
	t.Parallel()
	inv := []proxmox.StorageStatus{
		{Storage: "local-lvm", Node: "pve1"}, {Storage: "local", Node: "pve1"},
		{Storage: "ceph", Node: "pve1", Shared: true}, {Storage: "local-lvm", Node: "pve2"},
	}
	raw := map[string]string{
		"scsi0":     "local-lvm:base-9000-disk-0,size=8G",
		"scsi1":     "ceph:base-9000-disk-1,size=8G",
		"ide2":      "local-lvm:vm-9000-cloudinit,media=cdrom",
		"ide0":      "file=local:iso/ubuntu.iso,media=cdrom",
		"ide1":      "none,media=cdrom",
		"sata0":     "cdrom,media=cdrom",
		"virtio0":   "/dev/sdb",
		"efidisk0":  "elsewhere:vm-9000-disk-2",
		"unused0":   "local-lvm:vm-9000-disk-9",
		"net0":      "virtio,bridge=vmbr0",
		"tpmstate0": "ceph:vm-9000-disk-3,size=4M",
	}
	got := localVolumes(raw, inv, "pve1")
	want := []string{"ide0 local:iso/ubuntu.iso", "ide2 local-lvm:vm-9000-cloudinit", "scsi0 local-lvm:base-9000-disk-0"}
	if !slices.Equal(got, want) {
		t.Errorf("localVolumes = %v\nwant %v", got, want)
	}
	if got := localVolumes(map[string]string{"scsi0": "ceph:base-1-disk-0"}, inv, "pve1"); len(got) != 0 {
		t.Errorf("a template on shared storage: %v", got)
	}
}
