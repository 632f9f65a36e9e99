package handlers

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// backupList runs vm.backup.list and returns its result and entries.
func (e *rtEnv) backupList(t *testing.T, id, data string) (events.Result, []BackupListEntry) {
	t.Helper()
	res := e.resultOf(t, "vm.backup.list", id, data)
	var out struct {
		Backups []BackupListEntry `json:"backups"`
	}
	if res.Status == 200 {
		if err := json.Unmarshal(res.Output, &out); err != nil {
			t.Fatalf("output %s: %v", res.Output, err)
		}
	}
	return res, out.Backups
}

// volids are the entries' volume ids, in order.
func volids(list []BackupListEntry) []string {
	out := make([]string, len(list))
	for i, b := range list {
		out[i] = b.VolID
	}
	return out
}

// TestVMBackupList pins vm.backup.list: a storage's backups newest first with their size,
// format, type, protection and notes (a local storage's with the node that has them); one
// guest's by vmid or name; a PBS backup's verification state; a storage that cannot be read
// → 409 backup_storage_unavailable naming storage, journaled nowhere (a read).
func TestVMBackupList(t *testing.T) {
	t.Parallel()
	e := backupEnv(t)
	res, all := e.backupList(t, "all", `{"storage":"local"}`)
	if res.Status != 200 || !slices.Equal(volids(all), []string{simpve.DemoBackupCT, simpve.DemoBackupWeb}) {
		t.Fatalf("list %d %s: %v, want the demo's two backups, newest first", res.Status, res.Detail, volids(all))
	}
	ct, web := all[0], all[1]
	if ct.VMID != "200" || ct.Type != "lxc" || !ct.Protected || ct.Format != "tar.zst" || ct.Node != "pve1" || ct.SizeBytes <= 0 ||
		ct.Notes != "ct-pve1, before the upgrade" || ct.Created != "2026-11-30T02:10:00Z" || ct.Verified != nil {
		t.Errorf("container backup %+v", ct)
	}
	if web.VMID != "100" || web.Type != "qemu" || web.Protected || web.Format != "vma.zst" || web.SizeBytes != 1932735283 {
		t.Errorf("VM backup %+v", web)
	}
	if _, one := e.backupList(t, "one", `{"storage":"local","vm":"web-01"}`); !slices.Equal(volids(one), []string{simpve.DemoBackupWeb}) {
		t.Errorf("web-01's backups %v", volids(one))
	}
	if _, gone := e.backupList(t, "gone", `{"storage":"local","vm":4711}`); len(gone) != 0 {
		t.Errorf("backups of a vmid no guest has: %v", volids(gone))
	}

	// two backups into PBS a second apart, the older verified
	first := e.backupResult(t, "pbs-1", `{"vm":100,"storage":"pbs1"}`)
	time.Sleep(1100 * time.Millisecond) // backup times have second precision
	second := e.backupResult(t, "pbs-2", `{"vm":100,"storage":"pbs1","protected":true}`)
	older, newer := decodeBackupOutput(t, first).VolID, decodeBackupOutput(t, second).VolID
	e.pve.SetBackupVerification(older, "ok")
	_, pbs := e.backupList(t, "pbs", `{"storage":"pbs1"}`)
	if !slices.Equal(volids(pbs), []string{newer, older}) || pbs[0].Verified != nil || pbs[1].Verified == nil || !*pbs[1].Verified ||
		!pbs[0].Protected || pbs[0].Node != "" || pbs[0].Format != "pbs-vm" {
		t.Errorf("PBS backups %+v, want newest first, the older verified, no node (shared)", pbs)
	}
	e.pve.SetBackupVerification(older, "failed")
	if _, pbs := e.backupList(t, "pbs-failed", `{"storage":"pbs1"}`); len(pbs) != 2 || pbs[1].Verified == nil || *pbs[1].Verified {
		t.Errorf("a failed verification: %+v", pbs)
	}

	for data, why := range map[string]string{
		`{"storage":"nowhere"}`:   "does not exist",
		`{"storage":"local-lvm"}`: "has no content 'backup'",
		`{"storage":"pbs-down"}`:  "", // down on pve1 only: listed from another node
	} {
		res, _ := e.backupList(t, "bad-"+strings.Trim(data, `{}":`), data)
		if why == "" {
			if res.Status != 200 {
				t.Errorf("%s: %d %s", data, res.Status, res.Detail)
			}
			continue
		}
		if res.Status != 409 || res.Reason != ReasonBackupStorageUnavailable || !slices.Equal(res.Fields, []string{"storage"}) || !strings.Contains(res.Detail, why) {
			t.Errorf("%s: %d %s %v (%s), want 409 %s saying %q", data, res.Status, res.Reason, res.Fields, res.Detail, ReasonBackupStorageUnavailable, why)
		}
	}
	if n := len(e.nb.JournalEntries()); n != 2 {
		t.Errorf("journal entries %d, want the two backups' only", n)
	}
}

// contentDeletes counts the backup DELETEs the simulator read.
func contentDeletes(e *rtEnv) int {
	n := 0
	for _, r := range e.pve.RequestLog() {
		if r.Method == "DELETE" && r.Route == "/nodes/{node}/storage/{storage}/content/{volume}" {
			n++
		}
	}
	return n
}

// TestVMBackupDelete pins vm.backup.delete: a backup is deleted with one DELETE on the node
// that lists it (200 ok, journaled with its volid and size on its guest's NetBox VM) and is
// gone from the listing; a repeat is 200 already_absent without a DELETE; a protected backup
// is 409 backup_protected without a DELETE; a lost answer is confirmed by the listing, never
// by a second DELETE.
func TestVMBackupDelete(t *testing.T) {
	t.Parallel()
	e := backupEnv(t)
	res := e.resultOf(t, "vm.backup.delete", "del", `{"volid":"`+simpve.DemoBackupWeb+`"}`)
	if res.Status != 200 || res.Result != ResultOK || !res.Finalized() || !strings.Contains(string(res.Output), `"node":"pve1"`) {
		t.Fatalf("delete %d %s %s (%s) %s", res.Status, res.Result, res.Reason, res.Detail, res.Output)
	}
	if _, left := e.backupList(t, "after", `{"storage":"local"}`); slices.Contains(volids(left), simpve.DemoBackupWeb) {
		t.Errorf("the deleted backup is still listed: %v", volids(left))
	}
	again := e.resultOf(t, "vm.backup.delete", "again", `{"volid":"`+simpve.DemoBackupWeb+`"}`)
	if again.Status != 200 || again.Result != ResultAlreadyAbsent {
		t.Errorf("repeat %d %s (%s), want 200 %s", again.Status, again.Result, again.Detail, ResultAlreadyAbsent)
	}
	prot := e.resultOf(t, "vm.backup.delete", "prot", `{"volid":"`+simpve.DemoBackupCT+`"}`)
	if prot.Status != 409 || prot.Reason != ReasonBackupProtected || !slices.Equal(prot.Fields, []string{"volid"}) || !prot.Finalized() {
		t.Errorf("protected %d %s %v (%s), want 409 %s", prot.Status, prot.Reason, prot.Fields, prot.Detail, ReasonBackupProtected)
	}
	if n := contentDeletes(e); n != 1 {
		t.Errorf("DELETEs = %d, want 1", n)
	}
	found := 0
	for _, je := range e.nb.JournalEntries() {
		if strings.Contains(je.Comments, "- command_id: del\n") {
			found++
			for _, want := range []string{"- verb: vm.backup.delete", "- volid: " + simpve.DemoBackupWeb, "- size_bytes: 1932735283", "- result: ok"} {
				if !strings.Contains(je.Comments, want) {
					t.Errorf("journal comment lacks %q:\n%s", want, je.Comments)
				}
			}
			if je.ObjectType != "virtualization.virtualmachine" {
				t.Errorf("journaled on %s, want the guest's NetBox VM", je.ObjectType)
			}
		}
	}
	if found != 1 {
		t.Errorf("journal entries of the delete: %d, want 1", found)
	}

	lost := backupEnv(t)
	lost.p.cfg.ConfirmFor = 300 * time.Millisecond
	lost.pve.DropAnswerAfterApply("DELETE", "/nodes/pve1/storage/local/content/"+simpve.DemoBackupWeb, 1)
	res = lost.resultOf(t, "vm.backup.delete", "lost", `{"volid":"`+simpve.DemoBackupWeb+`"}`)
	dropped := slices.ContainsFunc(lost.pve.RequestLog(), func(r simpve.RequestRecord) bool { return r.Method == "DELETE" && r.Dropped })
	if !dropped || res.Status != 200 || res.Result != ResultOK || contentDeletes(lost) != 1 {
		t.Errorf("lost answer (dropped %v): %d %s %s (%s), %d DELETEs; want 200 ok after one", dropped, res.Status, res.Result, res.Reason, res.Detail, contentDeletes(lost))
	}
}

// TestVMBackupDeleteDryRun: a dry run plans the one DELETE and sends nothing.
func TestVMBackupDeleteDryRun(t *testing.T) {
	t.Parallel()
	e := backupEnv(t)
	p := e.dryRun(t, "vm.backup.delete", "dry", `{"volid":"`+simpve.DemoBackupWeb+`"}`)
	if len(p.Writes) != 1 || p.Writes[0].Method != "DELETE" || !strings.HasPrefix(p.Writes[0].Path, "/nodes/pve1/storage/local/content/") {
		t.Errorf("plan %+v", p)
	}
	refused := e.dryRun(t, "vm.backup.delete", "dry-prot", `{"volid":"`+simpve.DemoBackupCT+`"}`)
	if refused.Outcome == nil || refused.Outcome.Reason != ReasonBackupProtected || len(refused.Writes) != 0 {
		t.Errorf("refused plan %+v (outcome %+v)", refused, refused.Outcome)
	}
	if n := contentDeletes(e); n != 0 {
		t.Errorf("a dry run sent %d DELETEs", n)
	}
}
