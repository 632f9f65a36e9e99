package e2e_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/proxmox"
)

// backupOutput is vm.backup's output.
type backupOutput struct {
	UPID      string `json:"upid"`
	VolID     string `json:"volid"`
	Storage   string `json:"storage"`
	SizeBytes int64  `json:"size_bytes"`
	VMID      string `json:"vmid"`
}

func decodeBackup(t *testing.T, res events.Result) backupOutput {
	t.Helper()
	var out backupOutput
	if err := json.Unmarshal(res.Output, &out); err != nil {
		t.Fatalf("output %s: %v", res.Output, err)
	}
	return out
}

// wantBackup checks a created backup: its volid's prefix, the storage listing it, its size.
func wantBackup(volidPrefix string) func(*testing.T, *env, events.Result) {
	return func(t *testing.T, e *env, res events.Result) {
		t.Helper()
		out := decodeBackup(t, res)
		if !strings.HasPrefix(out.VolID, volidPrefix) || out.SizeBytes <= 0 || out.UPID == "" {
			t.Errorf("output %+v, want a volid %s… with its size and task", out, volidPrefix)
		}
		if !res.Finalized() {
			t.Error("journal not finalized")
		}
	}
}

// vzdumpPOSTs counts the vzdump requests the simulator read, on every node.
func vzdumpPOSTs(e *env) int {
	n := 0
	for _, node := range []string{"pve1", "pve2", "pve3"} {
		n += e.pve.Requests("POST", "/nodes/"+node+"/vzdump")
	}
	return n
}

// TestVMBackup pins contract §9 vm.backup end to end on one demo cluster: a VM backed up to
// the PBS storage storage.pbs.create made (201 created, the volume read back from the
// storage), a container into the directory storage, each storage that cannot take it (409
// backup_storage_unavailable, no vzdump), an unknown guest (404).
func TestVMBackup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	if res := e.send(e.command(pbs("pbs-bk"))); res.Status != 201 {
		t.Fatalf("storage.pbs.create: %d %s %s", res.Status, res.Reason, res.Detail)
	}
	e.pve.AddStorage(proxmox.StorageConfig{"storage": "pbs-pve2", "type": "pbs", "server": "pbs.lan", "datastore": "s", "content": "backup", "nodes": "pve2"})
	e.pve.AddStorage(proxmox.StorageConfig{"storage": "pbs-off", "type": "pbs", "server": "pbs.lan", "datastore": "s", "content": "backup", "disable": "1"})
	runGuestCases(t, e, []guestCase{
		{name: "a VM into PBS", verb: "vm.backup", data: `{"vm":"web-01","storage":"pbs-bk","notes_template":"{{guestname}}"}`,
			wantStatus: 201, wantResult: "created", check: wantBackup("pbs-bk:backup/vm/100/")},
		{name: "a container into local", verb: "vm.backup", data: `{"vm":201,"storage":"local","compress":"zstd","mode":"stop"}`,
			wantStatus: 201, wantResult: "created", check: wantBackup("local:backup/vzdump-lxc-201-")},
		{name: "missing storage", verb: "vm.backup", data: `{"vm":100,"storage":"nowhere"}`,
			wantStatus: 409, wantResult: "refused", wantReason: "backup_storage_unavailable"},
		{name: "disabled storage", verb: "vm.backup", data: `{"vm":100,"storage":"pbs-off"}`,
			wantStatus: 409, wantResult: "refused", wantReason: "backup_storage_unavailable"},
		{name: "storage not on the guest's node", verb: "vm.backup", data: `{"vm":100,"storage":"pbs-pve2"}`,
			wantStatus: 409, wantResult: "refused", wantReason: "backup_storage_unavailable"},
		{name: "storage without content backup", verb: "vm.backup", data: `{"vm":100,"storage":"ceph"}`,
			wantStatus: 409, wantResult: "refused", wantReason: "backup_storage_unavailable"},
		{name: "unknown guest", verb: "vm.backup", data: `{"vm":"nope","storage":"pbs-bk"}`,
			wantStatus: 404, wantResult: "refused", wantReason: "vm_not_found"},
	})
	if n := vzdumpPOSTs(e); n != 2 {
		t.Errorf("vzdumps = %d, want 2 (refusals send none)", n)
	}
}

// TestVMBackupLostAnswerIsConfirmed: Proxmox started the vzdump but its answer was lost; the
// verb finds the backup in the storage (201 created with its volid) and never sends a
// second vzdump.
func TestVMBackupLostAnswerIsConfirmed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	e.pve.SetTaskDuration(300 * time.Millisecond) // the vzdump still runs when the confirmation starts
	e.pve.DropAnswerAfterApply("POST", "/nodes/pve1/vzdump", 1)
	res := e.send(e.guestCommand("vm.backup", `{"vm":100,"storage":"local"}`))
	if res.Status != 201 || res.Result != "created" {
		t.Fatalf("%d %s %s %s", res.Status, res.Result, res.Reason, res.Detail)
	}
	if out := decodeBackup(t, res); !strings.HasPrefix(out.VolID, "local:backup/vzdump-qemu-100-") {
		t.Errorf("volid %q", out.VolID)
	}
	if n := vzdumpPOSTs(e); n != 1 {
		t.Errorf("vzdumps sent = %d, want 1", n)
	}
}

// TestVMBackupResumedAfterCrash: a replica sent the vzdump and died while the task ran (its
// write-ahead journal entry is its only trace); the command, redelivered to another replica,
// waits for that vzdump task (running confirm steps with the progress of its log), finds its
// backup (201 created) and never sends a second one.
func TestVMBackupResumedAfterCrash(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if err := e.replica("r0")(); err != nil { // it makes the streams, and goes
		t.Fatal(err)
	}
	cmd := e.guestCommand("vm.backup", `{"vm":100,"storage":"local"}`)
	e.publish(cmd) // it arrives, then the replica that took it sends the vzdump and dies
	e.deadReplica(cmd, 200*time.Millisecond, true, "backup_vm")
	e.pve.SetTaskDuration(3 * time.Second)
	pve, err := proxmox.NewClient(e.base.Endpoints[0], proxmox.Secret(app.DemoPVESecret))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g, err := pve.ResolveGuest(ctx, "100")
	if err != nil {
		t.Fatal(err)
	}
	// the dead replica's vzdump: sent, its answer never read
	e.pve.DropAnswerAfterApply("POST", "/nodes/pve1/vzdump", 1)
	if _, err := pve.Backup(ctx, g, proxmox.BackupRequest{Storage: "local", Mode: proxmox.BackupModeSnapshot}); err == nil {
		t.Fatal("the dead replica's vzdump was answered")
	}
	time.Sleep(300 * time.Millisecond) // the dead replica's lease runs out
	running := false
	for _, task := range e.pve.Tasks() {
		running = running || (task.Type == proxmox.BackupTaskType && task.Running)
	}
	if !running {
		t.Fatal("the vzdump ended before the command resumed; the test proves nothing")
	}
	e.start()
	res := e.result(cmd)
	if res.Status != 201 || res.Result != "created" || !res.Finalized() {
		t.Fatalf("got %d %s %s (%s)", res.Status, res.Result, res.Reason, res.Detail)
	}
	out := decodeBackup(t, res)
	tasks := e.pve.Tasks()
	if last := tasks[len(tasks)-1]; last.Type != proxmox.BackupTaskType || out.UPID != last.UPID || !strings.HasPrefix(out.VolID, "local:backup/vzdump-qemu-100-") {
		t.Errorf("output %+v, want the dead replica's vzdump %s and its backup", out, last.UPID)
	}
	if n := vzdumpPOSTs(e); n != 1 {
		t.Errorf("vzdumps = %d, want 1: the resumed command sent another", n)
	}
	waited, progress := false, false
	for _, st := range e.steps(cmd) {
		waited = waited || (st.Step == "confirm" && st.Status == events.StepRunning)
		progress = progress || (st.Progress != nil && st.Progress.Unit == "bytes" && st.Progress.Total == 132<<30)
	}
	if !waited || !progress {
		t.Errorf("running confirm step %v, with the vzdump's progress %v: the resumed command did not follow the vzdump", waited, progress)
	}
	entries := e.netbox.JournalEntries()
	if len(entries) != 1 || strings.Contains(entries[0].Comments, "result: in_progress") {
		t.Errorf("journal entries %+v, want the dead replica's, finalized", entries)
	}
}
