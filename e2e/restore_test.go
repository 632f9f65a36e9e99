package e2e_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/proxbus/proxbus/events"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// backupList is vm.backup.list's output.
type backupList struct {
	Backups []struct {
		VolID     string `json:"volid"`
		Protected bool   `json:"protected"`
	} `json:"backups"`
}

func (l backupList) volids() []string {
	var out []string
	for _, b := range l.Backups {
		out = append(out, b.VolID)
	}
	return out
}

// TestBackupLifecycle pins issue #35's backup lifecycle end to end through the bus on one
// demo cluster: a PBS storage registered, a VM backed up into it, its backups listed, the
// backup restored into a new guest (201 created, a qmrestore task; again → 409 vm_exists),
// the backup deleted (200 ok; again → already_absent; gone from the list), and the demo's
// protected backup refused (409 backup_protected).
func TestBackupLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	if res := e.send(e.command(pbs("pbs-life"))); res.Status != 201 {
		t.Fatalf("storage.pbs.create: %d %s %s", res.Status, res.Reason, res.Detail)
	}
	backup := e.send(e.guestCommand("vm.backup", `{"vm":"web-01","storage":"pbs-life"}`))
	if backup.Status != 201 {
		t.Fatalf("vm.backup: %d %s %s", backup.Status, backup.Reason, backup.Detail)
	}
	volid := decodeBackup(t, backup).VolID
	list := func() backupList {
		t.Helper()
		res := e.send(e.guestCommand("vm.backup.list", `{"storage":"pbs-life"}`))
		var out backupList
		if res.Status != 200 || json.Unmarshal(res.Output, &out) != nil {
			t.Fatalf("vm.backup.list: %d %s %s", res.Status, res.Reason, res.Output)
		}
		return out
	}
	if got := list().volids(); !slices.Equal(got, []string{volid}) {
		t.Errorf("listed %v, want [%s]", got, volid)
	}
	restore := fmt.Sprintf(`{"archive":%q,"vmid":420,"target_node":"pve1","storage":"local-lvm"}`, volid)
	runGuestCases(t, e, []guestCase{
		{name: "restore into a new vmid", verb: "vm.restore", data: restore, wantStatus: 201, wantResult: "created",
			check: func(t *testing.T, e *env, res events.Result) {
				var out struct{ VMID, Type, UPID, VolID string }
				if json.Unmarshal(res.Output, &out) != nil || out.VMID != "420" || out.Type != "qemu" || out.VolID != volid || out.UPID == "" {
					t.Errorf("output %s", res.Output)
				}
				if g, ok := e.pve.Guest(420); !ok || g.Node != "pve1" || g.Name != "web-01" {
					t.Errorf("restored guest %+v (found %v)", g, ok)
				}
			}},
		{name: "restore into it again", verb: "vm.restore", data: restore, wantStatus: 409, wantResult: "refused", wantReason: "vm_exists"},
		{name: "delete the backup", verb: "vm.backup.delete", data: fmt.Sprintf(`{"volid":%q}`, volid), wantStatus: 200, wantResult: "ok"},
		{name: "delete it again", verb: "vm.backup.delete", data: fmt.Sprintf(`{"volid":%q}`, volid), wantStatus: 200, wantResult: "already_absent"},
		{name: "a protected backup", verb: "vm.backup.delete", data: fmt.Sprintf(`{"volid":%q}`, simpve.DemoBackupCT),
			wantStatus: 409, wantResult: "refused", wantReason: "backup_protected"},
	})
	if got := list().volids(); len(got) != 0 {
		t.Errorf("listed after the delete: %v", got)
	}
	if n := e.pve.Requests("POST", "/nodes/pve1/qemu"); n != 1 {
		t.Errorf("restore POSTs = %d, want 1", n)
	}
}

// TestVMRestoreLostAnswerIsConfirmed: Proxmox started the restore but its answer was lost; the
// verb finds the guest's restore task and the guest (201 created) and never sends a second
// restore.
func TestVMRestoreLostAnswerIsConfirmed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	e.pve.DropAnswerAfterApply("POST", "/nodes/pve1/lxc", 1)
	res := e.send(e.guestCommand("vm.restore", fmt.Sprintf(`{"archive":%q,"vmid":421,"target_node":"pve1","storage":"local-lvm"}`, simpve.DemoBackupCT)))
	if res.Status != 201 || res.Result != "created" {
		t.Fatalf("%d %s %s %s", res.Status, res.Result, res.Reason, res.Detail)
	}
	if n := e.pve.Requests("POST", "/nodes/pve1/lxc"); n != 1 {
		t.Errorf("restore POSTs = %d, want 1", n)
	}
	if g, ok := e.pve.Guest(421); !ok || g.Name != "ct-pve1" {
		t.Errorf("restored container %+v (found %v)", g, ok)
	}
}
