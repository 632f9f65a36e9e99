package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/proxmox"
)

// TestVMBackupDecode pins vm.backup's data: the default mode is part of the fingerprint (a
// body that spells it out is the same request), compress accepts the number 0 as "0", and
// every broken field is named.
func TestVMBackupDecode(t *testing.T) {
	t.Parallel()
	fp := func(t *testing.T, data string) string {
		t.Helper()
		p, out := VMBackup().prepare(json.RawMessage(data))
		if out != nil {
			t.Fatalf("prepare(%s) = %+v", data, out)
		}
		return p.fingerprint
	}
	if a, b := fp(t, `{"vm":100,"storage":"pbs1"}`), fp(t, `{"vm":100,"storage":"pbs1","mode":"snapshot","protected":false}`); a != b {
		t.Error("the defaults spelled out change the fingerprint")
	}
	if a, b := fp(t, `{"vm":100,"storage":"pbs1","compress":0}`), fp(t, `{"vm":100,"storage":"pbs1","compress":"0"}`); a != b {
		t.Error("compress 0 and \"0\" differ")
	}
	if a, b := fp(t, `{"vm":100,"storage":"pbs1"}`), fp(t, `{"vm":100,"storage":"pbs1","mode":"stop"}`); a == b {
		t.Error("mode stop has the fingerprint of the default")
	}
	for data, field := range map[string]string{
		`{"storage":"pbs1"}`:                                                               "vm",
		`{"vm":100}`:                                                                       "storage",
		`{"vm":100,"storage":"1bad"}`:                                                      "storage",
		`{"vm":100,"storage":"pbs1","mode":"fast"}`:                                        "mode",
		`{"vm":100,"storage":"pbs1","compress":"xz"}`:                                      "compress",
		`{"vm":100,"storage":"pbs1","compress":1}`:                                         "compress",
		`{"vm":100,"storage":"pbs1","notes_template":"a\nb"}`:                              "notes_template",
		`{"vm":100,"storage":"pbs1","notes_template":7}`:                                   "notes_template",
		`{"vm":100,"storage":"pbs1","protected":"yes"}`:                                    "protected",
		`{"vm":100,"storage":"pbs1","notes_template":"` + strings.Repeat("n", 1025) + `"}`: "notes_template",
	} {
		_, out := VMBackup().prepare(json.RawMessage(data))
		if out == nil || out.Status != 422 || out.Reason != ReasonInvalidBody || !slices.Equal(out.Fields, []string{field}) {
			t.Errorf("prepare(%.80s) = %+v, want 422 invalid_body naming %s", data, out, field)
		}
	}
}

// backupEnv is the round-trip environment with the storages vm.backup's tests use: a PBS
// storage, and one storage per reason a storage cannot take a backup of a guest on pve1.
func backupEnv(t *testing.T) *rtEnv {
	t.Helper()
	e := newRTEnv(t)
	pbs := func(id string, extra map[string]string) {
		cfg := proxmox.StorageConfig{"storage": id, "type": "pbs", "server": "pbs.lan", "datastore": "store1", "content": "backup",
			"prune-backups": "keep-all=1"}
		for k, v := range extra {
			cfg[k] = v
		}
		e.pve.AddStorage(cfg)
	}
	pbs("pbs1", nil)
	pbs("pbs-off", map[string]string{"disable": "1"})
	pbs("pbs-pve2", map[string]string{"nodes": "pve2"})
	pbs("pbs-down", nil)
	e.pve.SetStorageStatus("pbs-down", "pve1", "unknown")
	return e
}

// backupResult handles one vm.backup as a first delivery and returns its result.
func (e *rtEnv) backupResult(t *testing.T, id, data string) events.Result {
	t.Helper()
	return e.resultOf(t, "vm.backup", id, data)
}

// backupOutput is vm.backup's output.
type backupOutput struct {
	UPID      string `json:"upid"`
	VolID     string `json:"volid"`
	Storage   string `json:"storage"`
	SizeBytes int64  `json:"size_bytes"`
	VMID      string `json:"vmid"`
	Node      string `json:"node"`
}

func decodeBackupOutput(t *testing.T, res events.Result) backupOutput {
	t.Helper()
	var out backupOutput
	if err := json.Unmarshal(res.Output, &out); err != nil {
		t.Fatalf("output %s: %v", res.Output, err)
	}
	return out
}

// vzdumps counts the vzdump POSTs the simulator read on node.
func vzdumps(e *rtEnv, node string) int { return e.pve.Requests("POST", "/nodes/"+node+"/vzdump") }

// TestVMBackupOutcomes pins every outcome of vm.backup through the real pipeline against the
// simulator: a backup into PBS or a directory storage → 201 created with the volume read back
// from the storage (volid, size) and the vzdump task's UPID, after exactly one vzdump with the
// options as PVE's parameters; each storage that cannot take it → 409
// backup_storage_unavailable naming the storage and saying why, with no vzdump; an unknown or
// ambiguous guest → 404 vm_not_found / 409 vm_ambiguous; a failed job → 502 task_failed.
func TestVMBackupOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		setup      func(e *rtEnv)
		data       string
		status     int
		result     string
		reason     string
		node       string // where the vzdump goes
		vzdumps    int
		volid      string // prefix of the output's volid
		size       int64
		detailLike string
	}{
		{name: "VM into PBS", data: `{"vm":"web-01","storage":"pbs1","notes_template":"{{guestname}}","protected":true}`,
			status: 201, result: ResultCreated, node: "pve1", vzdumps: 1, volid: "pbs1:backup/vm/100/", size: 132 << 30},
		{name: "container into a directory storage", data: `{"vm":202,"storage":"local","compress":"zstd","mode":"suspend"}`,
			status: 201, result: ResultCreated, node: "pve3", vzdumps: 1, volid: "local:backup/vzdump-lxc-202-"},
		{name: "stopped VM, stop mode, no compression", data: `{"vm":"db-01","storage":"local","mode":"stop","compress":0}`,
			status: 201, result: ResultCreated, node: "pve2", vzdumps: 1, volid: "local:backup/vzdump-qemu-101-"},
		{name: "missing storage", data: `{"vm":100,"storage":"nowhere"}`, status: 409, result: ResultRefused,
			reason: ReasonBackupStorageUnavailable, node: "pve1", detailLike: "storage 'nowhere' does not exist"},
		{name: "disabled storage", data: `{"vm":100,"storage":"pbs-off"}`, status: 409, result: ResultRefused,
			reason: ReasonBackupStorageUnavailable, node: "pve1", detailLike: "storage 'pbs-off' is disabled"},
		{name: "storage not on the guest's node", data: `{"vm":100,"storage":"pbs-pve2"}`, status: 409, result: ResultRefused,
			reason: ReasonBackupStorageUnavailable, node: "pve1", detailLike: "is not available on node 'pve1'"},
		{name: "storage without content backup", data: `{"vm":100,"storage":"local-lvm"}`, status: 409, result: ResultRefused,
			reason: ReasonBackupStorageUnavailable, node: "pve1", detailLike: "has no content 'backup'"},
		{name: "storage not active on the node", data: `{"vm":100,"storage":"pbs-down"}`, status: 409, result: ResultRefused,
			reason: ReasonBackupStorageUnavailable, node: "pve1", detailLike: "is not active on node 'pve1'"},
		{name: "unknown guest", data: `{"vm":"nope","storage":"pbs1"}`, status: 404, result: ResultRefused, reason: ReasonVMNotFound, node: "pve1"},
		{name: "ambiguous guest", data: `{"vm":"dup","storage":"pbs1"}`, status: 409, result: ResultRefused, reason: ReasonVMAmbiguous, node: "pve1"},
		{name: "the job fails", setup: func(e *rtEnv) { e.pve.FailTask("pve1", 100, "job errors") },
			data: `{"vm":100,"storage":"pbs1"}`, status: 502, result: ResultFailed, reason: ReasonTaskFailed, node: "pve1", vzdumps: 1,
			detailLike: "job errors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := backupEnv(t)
			if tt.setup != nil {
				tt.setup(e)
			}
			res := e.backupResult(t, "bk", tt.data)
			if res.Status != tt.status || res.Result != tt.result || res.Reason != tt.reason {
				t.Fatalf("result %d %s %q (%s), want %d %s %q", res.Status, res.Result, res.Reason, res.Detail, tt.status, tt.result, tt.reason)
			}
			if !strings.Contains(res.Detail, tt.detailLike) {
				t.Errorf("detail %q, want it to say %q", res.Detail, tt.detailLike)
			}
			if n := vzdumps(e, tt.node); n != tt.vzdumps {
				t.Errorf("vzdumps on %s = %d, want %d", tt.node, n, tt.vzdumps)
			}
			if tt.reason == ReasonBackupStorageUnavailable && (!slices.Equal(res.Fields, []string{"storage"}) || !res.Finalized()) {
				t.Errorf("refusal fields %v, journal finalized %v; want [storage], journaled", res.Fields, res.Finalized())
			}
			if tt.status != 201 {
				return
			}
			out := decodeBackupOutput(t, res)
			u, err := proxmox.ParseUPID(out.UPID)
			if err != nil || u.Type != proxmox.BackupTaskType || u.Node != tt.node {
				t.Errorf("output upid %q (%v)", out.UPID, err)
			}
			if !strings.HasPrefix(out.VolID, tt.volid) || out.Storage == "" || out.VMID != u.ID || out.Node != tt.node {
				t.Errorf("output %+v, want volid %s…", out, tt.volid)
			}
			if tt.size != 0 && out.SizeBytes != tt.size {
				t.Errorf("size_bytes %d, want %d", out.SizeBytes, tt.size)
			}
			if out.SizeBytes <= 0 {
				t.Errorf("size_bytes %d, want the backup's size", out.SizeBytes)
			}
			if !res.Finalized() {
				t.Error("journal not finalized")
			}
		})
	}
}

// TestVMBackupSameSecond: two backups of one guest sent back to back — the second's vzdump
// would start in the second the first one's started, and vzdump names its archive after that
// second and renames it over an existing file (into PBS, the second is refused: its snapshot is
// not newer than the group's last). The second waits for a second of its own: both are
// answered with their own volume, both volumes are on the storage, and the two tasks started in
// two seconds of the node's clock. Without the wait, the second backup replaced the first's
// archive and both commands were answered with one volid.
func TestVMBackupSameSecond(t *testing.T) {
	t.Parallel()
	for _, storage := range []string{"local", "pbs1"} {
		t.Run(storage, func(t *testing.T) {
			t.Parallel()
			e := backupEnv(t)
			first := e.backupResult(t, "zstd", `{"vm":101,"storage":"`+storage+`","compress":"zstd","mode":"stop"}`)
			second := e.backupResult(t, "again", `{"vm":101,"storage":"`+storage+`","compress":"zstd","mode":"stop"}`)
			if first.Status != 201 || second.Status != 201 {
				t.Fatalf("results %d %s (%s) and %d %s (%s), want two 201", first.Status, first.Reason, first.Detail, second.Status, second.Reason, second.Detail)
			}
			out1, out2 := decodeBackupOutput(t, first), decodeBackupOutput(t, second)
			if out1.VolID == out2.VolID {
				t.Fatalf("both answered %s", out1.VolID)
			}
			listed := map[string]bool{}
			for _, v := range e.pve.Backups(storage) {
				listed[v] = true
			}
			if !listed[out1.VolID] || !listed[out2.VolID] {
				t.Errorf("storage %s lists %v, want both %s and %s", storage, listed, out1.VolID, out2.VolID)
			}
			var starts []time.Time // of the two vzdump tasks, from their UPIDs (the node's clock)
			for _, task := range e.pve.Tasks() {
				if u, err := proxmox.ParseUPID(task.UPID); err == nil && u.Type == proxmox.BackupTaskType {
					starts = append(starts, u.StartTime)
				}
			}
			if len(starts) != 2 || starts[0].Equal(starts[1]) {
				t.Errorf("vzdump tasks started at %v, want two in two seconds", starts)
			}
		})
	}
}

// TestVMBackupJournal: a backup is journaled on the guest's NetBox VM as a success, with the
// verb's bullets, the vzdump task and the backup it made (volid, size).
func TestVMBackupJournal(t *testing.T) {
	t.Parallel()
	e := backupEnv(t)
	res := e.backupResult(t, "journal", `{"vm":100,"storage":"pbs1","notes_template":"from {{node}}"}`)
	if res.Status != 201 {
		t.Fatalf("result %d %s %s", res.Status, res.Reason, res.Detail)
	}
	out := decodeBackupOutput(t, res)
	upid := out.UPID
	found := 0
	for _, je := range e.nb.JournalEntries() {
		if je.ObjectType != "virtualization.virtualmachine" || je.ObjectID != 1 {
			continue
		}
		found++
		for _, want := range []string{"- verb: vm.backup", "- result: created", "- storage: pbs1", "- mode: snapshot",
			"- notes_template: from {{node}}", "- protected: false", "- proxmox_task_upid: " + upid,
			"- volid: " + out.VolID, fmt.Sprintf("- size_bytes: %d", out.SizeBytes)} {
			if !strings.Contains(je.Comments, want) {
				t.Errorf("journal comment lacks %q:\n%s", want, je.Comments)
			}
		}
		if je.Kind != "success" {
			t.Errorf("journal kind %q, want success", je.Kind)
		}
	}
	if found != 1 {
		t.Errorf("journal entries on NetBox VM 1 = %d, want 1", found)
	}
}

// TestVMBackupLostAnswer pins the confirmation of a vzdump whose answer was lost, never by a
// second vzdump: the backup is found in the storage (201 created with its volid, not an
// older backup's); a vzdump still running is waited for, then its backup found; a failed one
// is 502 task_failed; a vzdump that made nothing is 502 proxmox_write_unconfirmed.
func TestVMBackupLostAnswer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		setup   func(e *rtEnv)
		status  int
		reason  string
		running bool // the task outlives the POST
	}{
		{name: "backup made", setup: func(e *rtEnv) {
			e.pve.DropAnswerAfterApply("POST", "/nodes/pve1/vzdump", 1)
		}, status: 201},
		{name: "backup still running", setup: func(e *rtEnv) {
			e.pve.SetTaskDuration(600 * time.Millisecond)
			e.pve.DropAnswerAfterApply("POST", "/nodes/pve1/vzdump", 1)
		}, status: 201, running: true},
		{name: "job failed", setup: func(e *rtEnv) {
			e.pve.FailTask("pve1", 100, "job errors")
			e.pve.DropAnswerAfterApply("POST", "/nodes/pve1/vzdump", 1)
		}, status: 502, reason: ReasonTaskFailed},
		{name: "nothing made", setup: func(e *rtEnv) {
			e.pve.FailNext("POST", "/nodes/pve1/vzdump", 1, 500, "refused before any task")
			e.pve.DropAnswerAfterApply("POST", "/nodes/pve1/vzdump", 1)
		}, status: 502, reason: ReasonProxmoxWriteUnconfirmed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := backupEnv(t)
			e.p.cfg.ConfirmFor = 300 * time.Millisecond
			// an older backup of the guest in the same storage, a second earlier at least
			if res := e.backupResult(t, "older", `{"vm":100,"storage":"pbs1"}`); res.Status != 201 {
				t.Fatalf("older backup: %d %s", res.Status, res.Detail)
			}
			older := decodeBackupOutput(t, e.pub.result(t, "older")).VolID
			time.Sleep(1100 * time.Millisecond) // backup times have second precision
			tt.setup(e)
			res := e.backupResult(t, "lost", `{"vm":100,"storage":"pbs1"}`)
			if res.Status != tt.status || res.Reason != tt.reason || !res.Finalized() {
				t.Fatalf("result %d %s %q (%s), want %d %q", res.Status, res.Result, res.Reason, res.Detail, tt.status, tt.reason)
			}
			if n := vzdumps(e, "pve1"); n != 2 {
				t.Errorf("vzdumps = %d, want 2 (the older backup's and one for the lost answer)", n)
			}
			if tt.status != 201 {
				return
			}
			out := decodeBackupOutput(t, res)
			if out.VolID == older || !strings.HasPrefix(out.VolID, "pbs1:backup/vm/100/") {
				t.Errorf("confirmed volid %q, want the new backup (the older is %q)", out.VolID, older)
			}
			tasks := e.pve.Tasks()
			if last := tasks[len(tasks)-1]; out.UPID != last.UPID || last.Running {
				t.Errorf("output upid %q, want the finished vzdump %q", out.UPID, last.UPID)
			}
			if tt.running && !e.pub.hasStep(t, "lost", "confirm", events.StepRunning) {
				t.Error("no running confirm step while the vzdump ran")
			}
		})
	}
}

// hasStep reports whether command id published step with status.
func (c *collector) hasStep(t *testing.T, id, step string, status events.StepStatus) bool {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.msgs {
		if !strings.HasSuffix(m.Subject, ".step") {
			continue
		}
		var ev struct {
			Data events.Step `json:"data"`
		}
		if json.Unmarshal(m.Data, &ev) == nil && ev.Data.CommandID == id && ev.Data.Step == step && ev.Data.Status == status {
			return true
		}
	}
	return false
}

// TestVMBackupResumed: a command whose earlier delivery sent the vzdump and stopped (its
// progress says dispatched) is confirmed on its next delivery from the guest's backups made
// since the command arrived, without a second vzdump.
func TestVMBackupResumed(t *testing.T) {
	t.Parallel()
	e := backupEnv(t)
	arrived := time.Now()
	// the earlier delivery's vzdump, sent straight to Proxmox
	c, _ := e.p.cfg.Proxmox.Get(1)
	g, err := c.ResolveGuest(context.Background(), "100")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Backup(context.Background(), g, proxmox.BackupRequest{Storage: "pbs1"}); err != nil {
		t.Fatal(err)
	}
	x := &Exec{Proxmox: c, r: &run{p: e.p, delivery: events.Delivery{Number: 2, Stored: arrived}, log: slog.New(slog.DiscardHandler)}, prior: true}
	in := BackupInput{GuestRef: GuestRef{VM: "100", guest: g}, Storage: "pbs1", Mode: proxmox.BackupModeSnapshot}
	out, err := confirmBackup(context.Background(), x, in)
	if err != nil || out.Status != 201 || out.Result != ResultCreated {
		t.Fatalf("confirm = %+v, %v", out, err)
	}
	if o := out.Output.(map[string]any); !strings.HasPrefix(o["volid"].(string), "pbs1:backup/vm/100/") || o["upid"] == nil {
		t.Errorf("output %v", o)
	}
	if n := vzdumps(e, "pve1"); n != 1 {
		t.Errorf("vzdumps = %d, want 1", n)
	}
}

// TestVMBackupDryRun pins contract §4a for vm.backup: the storage is checked and the plan is
// the one vzdump it would send, without sending it or journaling; the plan stops there (the
// backup's volume is read back from what the vzdump makes); a storage that cannot take it
// plans the refusal and no write.
func TestVMBackupDryRun(t *testing.T) {
	t.Parallel()
	e := backupEnv(t)
	run := func(id, data string) Plan { t.Helper(); return e.dryRun(t, "vm.backup", id, data) }
	p := run("dry", `{"vm":"web-01","storage":"pbs1","protected":true}`)
	if p.Complete || p.Stopped == "" || p.Outcome != nil || len(p.Writes) != 1 ||
		p.Writes[0].Method != "POST" || p.Writes[0].Path != "/nodes/pve1/vzdump" || p.Writes[0].Params["storage"] != "pbs1" ||
		p.Writes[0].Params["protected"] != "1" || p.Writes[0].Params["remove"] != "0" {
		t.Errorf("plan %+v (outcome %+v)", p, p.Outcome)
	}
	refused := e.dryRun(t, "vm.backup", "dry-refused", `{"vm":100,"storage":"local-lvm"}`)
	if !refused.Complete || refused.Outcome == nil || refused.Outcome.Reason != ReasonBackupStorageUnavailable || len(refused.Writes) != 0 {
		t.Errorf("refused plan %+v (outcome %+v)", refused, refused.Outcome)
	}
	if n := vzdumps(e, "pve1"); n != 0 {
		t.Errorf("a dry run sent %d vzdumps", n)
	}
	if n := len(e.nb.JournalEntries()); n != 0 {
		t.Errorf("a dry run journaled %d entries", n)
	}
}
