package proxmox

import "testing"

// TestParseBackupVolID pins which volume ids are backups and what their names say: PBS
// snapshots (vm/ct) and vzdump archives (qemu/lxc, and openvz's old name) of a guest.
func TestParseBackupVolID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		volid, storage string
		typ            GuestType
		vmid           int64
		ok             bool
	}{
		{"pbs1:backup/vm/100/2026-12-01T10:00:00Z", "pbs1", GuestQEMU, 100, true},
		{"pbs1:backup/ct/200/2026-12-01T10:00:00Z", "pbs1", GuestLXC, 200, true},
		{"local:backup/vzdump-qemu-101-2026_12_01-10_00_00.vma.zst", "local", GuestQEMU, 101, true},
		{"local:backup/vzdump-lxc-202-2026_12_01-10_00_00.tar.zst", "local", GuestLXC, 202, true},
		{"nfs-1:backup/vzdump-openvz-203-2013_01_01-10_00_00.tar", "nfs-1", GuestLXC, 203, true},
		{"local:iso/debian.iso", "", "", 0, false},
		{"local-lvm:vm-100-disk-0", "", "", 0, false},
		{"/var/lib/vz/dump/vzdump-qemu-100-2026_12_01-10_00_00.vma", "", "", 0, false},
		{"pbs1:backup/host/pve1/2026-12-01T10:00:00Z", "", "", 0, false},
	}
	for _, tt := range tests {
		storage, typ, vmid, ok := ParseBackupVolID(tt.volid)
		if storage != tt.storage || typ != tt.typ || vmid != tt.vmid || ok != tt.ok {
			t.Errorf("ParseBackupVolID(%q) = %q %q %d %v, want %q %q %d %v", tt.volid, storage, typ, vmid, ok, tt.storage, tt.typ, tt.vmid, tt.ok)
		}
	}
}

// TestRestoreRequest pins a restore's request: a VM's POST /nodes/{node}/qemu with archive, a
// container's POST /nodes/{node}/lxc with ostemplate and restore=1; booleans only when set,
// bwlimit only when given (0 included).
func TestRestoreRequest(t *testing.T) {
	t.Parallel()
	zero := int64(0)
	vm := RestoreRequest{Archive: "pbs1:backup/vm/100/2026-12-01T10:00:00Z", Type: GuestQEMU, VMID: 400, Node: "pve1", Unique: true}.request()
	if vm.path != "/nodes/pve1/qemu" || vm.form.Encode() != "archive=pbs1%3Abackup%2Fvm%2F100%2F2026-12-01T10%3A00%3A00Z&unique=1&vmid=400" {
		t.Errorf("VM restore %s %s", vm.path, vm.form.Encode())
	}
	ct := RestoreRequest{Archive: "local:backup/vzdump-lxc-200-x.tar.zst", Type: GuestLXC, VMID: 401, Node: "pve2", Storage: "ceph",
		Start: true, Force: true, BandwidthLimitKiB: &zero}.request()
	if ct.path != "/nodes/pve2/lxc" || ct.form.Encode() != "bwlimit=0&force=1&ostemplate=local%3Abackup%2Fvzdump-lxc-200-x.tar.zst&restore=1&start=1&storage=ceph&vmid=401" {
		t.Errorf("container restore %s %s", ct.path, ct.form.Encode())
	}
}
