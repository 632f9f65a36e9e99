package handlers

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
	"github.com/proxbus/proxbus/store"
)

// TestVMRestoreDecode pins vm.restore's data: unique defaults to true and start and force to
// false (spelled out, the same request), and every broken field is named.
func TestVMRestoreDecode(t *testing.T) {
	t.Parallel()
	fp := func(t *testing.T, data string) string {
		t.Helper()
		p, out := VMRestore().prepare(json.RawMessage(data))
		if out != nil {
			t.Fatalf("prepare(%s) = %+v", data, out)
		}
		return p.fingerprint
	}
	const base = `"archive":"` + simpve.DemoBackupWeb + `","vmid":400,"target_node":"pve1"`
	if a, b := fp(t, `{`+base+`}`), fp(t, `{`+base+`,"unique":true,"start":false,"force":false}`); a != b {
		t.Error("the defaults spelled out change the fingerprint")
	}
	if a, b := fp(t, `{`+base+`}`), fp(t, `{`+base+`,"force":true}`); a == b {
		t.Error("force has the fingerprint of the default")
	}
	for data, field := range map[string]string{
		`{"vmid":400,"target_node":"pve1"}`:                                                  "archive",
		`{"archive":"local:iso/debian.iso","vmid":400,"target_node":"pve1"}`:                 "archive",
		`{"archive":"/var/lib/vz/dump/vzdump-qemu-100.vma","vmid":400,"target_node":"pve1"}`: "archive",
		`{"archive":"` + simpve.DemoBackupWeb + `","vmid":99,"target_node":"pve1"}`:          "vmid",
		`{"archive":"` + simpve.DemoBackupWeb + `","vmid":400}`:                              "target_node",
		`{` + base + `,"storage":"1bad"}`:                                                    "storage",
		`{` + base + `,"force":"yes"}`:                                                       "force",
		`{` + base + `,"bandwidth_limit_kib":-1}`:                                            "bandwidth_limit_kib",
	} {
		_, out := VMRestore().prepare(json.RawMessage(data))
		if out == nil || out.Status != 422 || out.Reason != ReasonInvalidBody || !slices.Equal(out.Fields, []string{field}) {
			t.Errorf("prepare(%.80s) = %+v, want 422 invalid_body naming %s", data, out, field)
		}
	}
}

// restoreOut is vm.restore's output.
type restoreOut struct {
	VMID, Node, UPID, Type, VolID string
	SizeBytes                     int64 `json:"size_bytes"`
}

func decodeRestoreOutput(t *testing.T, res events.Result) restoreOut {
	t.Helper()
	var out restoreOut
	if err := json.Unmarshal(res.Output, &out); err != nil {
		t.Fatalf("output %s: %v", res.Output, err)
	}
	return out
}

// restorePosts counts the restore POSTs (either guest type) the simulator read on node.
func restorePosts(e *rtEnv, node string) int {
	return e.pve.Requests("POST", "/nodes/"+node+"/qemu") + e.pve.Requests("POST", "/nodes/"+node+"/lxc")
}

// restoredGuest reads guest vmid back through the endpoint's client.
func restoredGuest(t *testing.T, e *rtEnv, vmid string) (proxmox.Guest, error) {
	t.Helper()
	c, _ := e.p.cfg.Proxmox.Get(1)
	return c.ResolveGuest(context.Background(), vmid)
}

// TestVMRestoreOutcomes pins every outcome of vm.restore through the real pipeline against
// the simulator: a VM's and a container's backup restored into a new vmid → 201 created with
// the restore task, the guest's type, the backup's volid and size, after exactly one POST
// (qemu with archive, lxc with ostemplate and restore=1), the guest there afterwards (running
// with start); force overwrites a stopped VM; and each refusal PVE would make, found by
// reading, with no POST: vm_exists (in use, or force that cannot overwrite it), vm_running,
// backup_not_found (no such backup, or not on the node), target_storage_unavailable (no
// content images or rootdir; a container without storage goes to 'local'), a node not in the
// cluster (422); a failed restore task → 502 task_failed.
func TestVMRestoreOutcomes(t *testing.T) {
	t.Parallel()
	missing := "local:backup/vzdump-qemu-100-2020_01_01-00_00_00.vma.zst"
	tests := []struct {
		name       string
		setup      func(e *rtEnv)
		data       string
		status     int
		reason     string
		fields     []string
		posts      int
		typ        string
		running    bool
		detailLike string
	}{
		{name: "VM into a new vmid, started", data: `{"archive":"` + simpve.DemoBackupWeb + `","vmid":400,"target_node":"pve1","storage":"local-lvm","start":true,"bandwidth_limit_kib":51200}`,
			status: 201, posts: 1, typ: "qemu", running: true},
		{name: "VM onto its own storages", data: `{"archive":"` + simpve.DemoBackupWeb + `","vmid":400,"target_node":"pve1"}`,
			status: 201, posts: 1, typ: "qemu"},
		{name: "container into a new vmid", data: `{"archive":"` + simpve.DemoBackupCT + `","vmid":401,"target_node":"pve1","storage":"local-lvm","unique":false}`,
			status: 201, posts: 1, typ: "lxc"},
		{name: "force over a stopped VM", data: `{"archive":"` + simpve.DemoBackupWeb + `","vmid":103,"target_node":"pve1","force":true}`,
			status: 201, posts: 1, typ: "qemu"},
		{name: "vmid in use", data: `{"archive":"` + simpve.DemoBackupWeb + `","vmid":100,"target_node":"pve1"}`,
			status: 409, reason: ReasonVMExists, fields: []string{"vmid"}, detailLike: "send force: true"},
		{name: "force over a running VM", data: `{"archive":"` + simpve.DemoBackupWeb + `","vmid":100,"target_node":"pve1","force":true}`,
			status: 409, reason: ReasonVMRunning, detailLike: "stop it first"},
		{name: "force over the other guest type", data: `{"archive":"` + simpve.DemoBackupWeb + `","vmid":201,"target_node":"pve1","force":true}`,
			status: 409, reason: ReasonVMExists, fields: []string{"vmid"}, detailLike: "the other type"},
		{name: "force over a guest on another node", data: `{"archive":"` + simpve.DemoBackupWeb + `","vmid":105,"target_node":"pve1","force":true}`,
			status: 409, reason: ReasonVMExists, fields: []string{"vmid"}, detailLike: "only on its own node"},
		{name: "no such backup", data: `{"archive":"` + missing + `","vmid":400,"target_node":"pve1"}`,
			status: 404, reason: ReasonBackupNotFound, fields: []string{"archive"}, detailLike: "lists no backup"},
		{name: "backup not on the target node", data: `{"archive":"` + simpve.DemoBackupWeb + `","vmid":400,"target_node":"pve2"}`,
			status: 404, reason: ReasonBackupNotFound, fields: []string{"archive"}, detailLike: "on node 'pve2'"},
		{name: "storage without images", data: `{"archive":"` + simpve.DemoBackupWeb + `","vmid":400,"target_node":"pve1","storage":"local"}`,
			status: 409, reason: ReasonTargetStorageUnavailable, fields: []string{"storage"}, detailLike: "has no content 'images'"},
		{name: "container without storage", data: `{"archive":"` + simpve.DemoBackupCT + `","vmid":401,"target_node":"pve1"}`,
			status: 409, reason: ReasonTargetStorageUnavailable, fields: []string{"storage"}, detailLike: "onto 'local'"},
		{name: "unknown node", data: `{"archive":"` + simpve.DemoBackupWeb + `","vmid":400,"target_node":"pve9"}`,
			status: 422, reason: ReasonInvalidBody, fields: []string{"target_node"}},
		{name: "the restore fails", setup: func(e *rtEnv) { e.pve.FailTask("pve1", 400, "unable to restore VM 400 - no space left on device") },
			data: `{"archive":"` + simpve.DemoBackupWeb + `","vmid":400,"target_node":"pve1"}`, status: 502, reason: ReasonTaskFailed, posts: 1,
			detailLike: "no space left"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newRTEnv(t)
			if tt.setup != nil {
				tt.setup(e)
			}
			res := e.resultOf(t, "vm.restore", "rs", tt.data)
			if res.Status != tt.status || res.Reason != tt.reason {
				t.Fatalf("result %d %s %q (%s), want %d %q", res.Status, res.Result, res.Reason, res.Detail, tt.status, tt.reason)
			}
			if !strings.Contains(res.Detail, tt.detailLike) || (tt.fields != nil && !slices.Equal(res.Fields, tt.fields)) {
				t.Errorf("detail %q fields %v, want it to say %q and name %v", res.Detail, res.Fields, tt.detailLike, tt.fields)
			}
			if n := restorePosts(e, "pve1") + restorePosts(e, "pve2"); n != tt.posts {
				t.Errorf("restore POSTs = %d, want %d", n, tt.posts)
			}
			if tt.status != 201 {
				return
			}
			out := decodeRestoreOutput(t, res)
			u, err := proxmox.ParseUPID(out.UPID)
			if err != nil || u.Type != proxmox.RestoreTaskType(proxmox.GuestType(tt.typ)) || u.ID != out.VMID || out.Node != "pve1" || out.Type != tt.typ {
				t.Errorf("output %+v (upid %v)", out, err)
			}
			if out.VolID == "" || out.SizeBytes <= 0 || !res.Finalized() {
				t.Errorf("output %+v, finalized %v: want the backup's volid and size, journaled", out, res.Finalized())
			}
			g, err := restoredGuest(t, e, out.VMID)
			if err != nil || string(g.Type) != tt.typ || g.Node != "pve1" || (g.Status == proxmox.StatusRunning) != tt.running {
				t.Errorf("restored guest %+v (%v), want a %s on pve1, running %v", g, err, tt.typ, tt.running)
			}
			var sent []simpve.RequestRecord
			for _, r := range e.pve.RequestLog() {
				if r.Method == "POST" && (r.Route == "/nodes/{node}/qemu" || r.Route == "/nodes/{node}/lxc") {
					sent = append(sent, r)
				}
			}
			p := sent[0].Params
			if tt.typ == "lxc" && (p.Get("ostemplate") != out.VolID || p.Get("restore") != "1" || p.Has("unique")) ||
				tt.typ == "qemu" && (p.Get("archive") != out.VolID || p.Get("unique") != "1") {
				t.Errorf("restore parameters %v", p)
			}
		})
	}
}

// TestVMRestoreProgress: a restore that runs reports running steps of restore_vm with the
// percentage its task log gives.
func TestVMRestoreProgress(t *testing.T) {
	t.Parallel()
	e := newRTEnv(t)
	e.pve.SetTaskDuration(2500 * time.Millisecond)
	res := e.resultOf(t, "vm.restore", "slow", `{"archive":"`+simpve.DemoBackupWeb+`","vmid":400,"target_node":"pve1","storage":"ceph"}`)
	if res.Status != 201 {
		t.Fatalf("result %d %s (%s)", res.Status, res.Reason, res.Detail)
	}
	if !e.pub.hasStep(t, "slow", stepRestoreVM, events.StepRunning) {
		t.Error("no running step of restore_vm while the restore ran")
	}
}

// TestVMRestoreLostAnswer pins the confirmation of a restore whose answer was lost, never by
// a second restore: the restore task found and the guest there → 201 created with that task;
// a task still running is waited for; a failed one is 502 task_failed; none found is 502
// proxmox_write_unconfirmed.
func TestVMRestoreLostAnswer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		setup   func(e *rtEnv)
		status  int
		reason  string
		running bool
	}{
		{name: "restored", setup: func(e *rtEnv) { e.pve.DropAnswerAfterApply("POST", "/nodes/pve1/qemu", 1) }, status: 201},
		{name: "still restoring", setup: func(e *rtEnv) {
			e.pve.SetTaskDuration(600 * time.Millisecond)
			e.pve.DropAnswerAfterApply("POST", "/nodes/pve1/qemu", 1)
		}, status: 201, running: true},
		{name: "restore failed", setup: func(e *rtEnv) {
			e.pve.FailTask("pve1", 400, "unable to restore VM 400 - no space left on device")
			e.pve.DropAnswerAfterApply("POST", "/nodes/pve1/qemu", 1)
		}, status: 502, reason: ReasonTaskFailed},
		{name: "nothing started", setup: func(e *rtEnv) {
			e.pve.FailNext("POST", "/nodes/pve1/qemu", 1, 500, "refused before any task")
			e.pve.DropAnswerAfterApply("POST", "/nodes/pve1/qemu", 1)
		}, status: 502, reason: ReasonProxmoxWriteUnconfirmed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newRTEnv(t)
			e.p.cfg.ConfirmFor = 300 * time.Millisecond
			tt.setup(e)
			res := e.resultOf(t, "vm.restore", "lost", `{"archive":"`+simpve.DemoBackupWeb+`","vmid":400,"target_node":"pve1"}`)
			if res.Status != tt.status || res.Reason != tt.reason || !res.Finalized() {
				t.Fatalf("result %d %s %q (%s), want %d %q", res.Status, res.Result, res.Reason, res.Detail, tt.status, tt.reason)
			}
			if n := restorePosts(e, "pve1"); n != 1 {
				t.Errorf("restore POSTs = %d, want 1 (never a second restore)", n)
			}
			if tt.status != 201 {
				return
			}
			out := decodeRestoreOutput(t, res)
			tasks := e.pve.Tasks()
			if last := tasks[len(tasks)-1]; out.UPID != last.UPID || last.Running || out.VolID != simpve.DemoBackupWeb {
				t.Errorf("output %+v, want the finished restore %q of the backup", out, last.UPID)
			}
			if tt.running && !e.pub.hasStep(t, "lost", "confirm", events.StepRunning) {
				t.Error("no running confirm step while the restore ran")
			}
		})
	}
}

// TestVMRestoreJournal: a restore is journaled as a success with the backup's volid and size
// and the restore task.
func TestVMRestoreJournal(t *testing.T) {
	t.Parallel()
	e := newRTEnv(t)
	res := e.resultOf(t, "vm.restore", "journal", `{"archive":"`+simpve.DemoBackupWeb+`","vmid":400,"target_node":"pve1"}`)
	if res.Status != 201 {
		t.Fatalf("result %d %s %s", res.Status, res.Reason, res.Detail)
	}
	out := decodeRestoreOutput(t, res)
	found := 0
	for _, je := range e.nb.JournalEntries() {
		if !strings.Contains(je.Comments, "- verb: vm.restore") {
			continue
		}
		found++
		for _, want := range []string{"- result: created", "- volid: " + simpve.DemoBackupWeb, "- size_bytes: 1932735283",
			"- vmid: 400", "- target_node: pve1", "- unique: true", "- force: false", "- proxmox_task_upid: " + out.UPID} {
			if !strings.Contains(je.Comments, want) {
				t.Errorf("journal comment lacks %q:\n%s", want, je.Comments)
			}
		}
		if je.Kind != "success" {
			t.Errorf("journal kind %q, want success", je.Kind)
		}
	}
	if found != 1 {
		t.Errorf("vm.restore journal entries = %d, want 1", found)
	}
}

// TestVMRestoreDryRun pins contract §4a for vm.restore: the reads run and the plan is the one
// POST it would send; a restore bound to be refused plans the refusal and no write; nothing
// is sent or journaled.
func TestVMRestoreDryRun(t *testing.T) {
	t.Parallel()
	e := newRTEnv(t)
	run := func(id, data string) Plan { t.Helper(); return e.dryRun(t, "vm.restore", id, data) }
	p := run("dry", `{"archive":"`+simpve.DemoBackupCT+`","vmid":401,"target_node":"pve1","storage":"ceph"}`)
	if len(p.Writes) != 1 || p.Writes[0].Method != "POST" || p.Writes[0].Path != "/nodes/pve1/lxc" ||
		p.Writes[0].Params["ostemplate"] != simpve.DemoBackupCT || p.Writes[0].Params["restore"] != "1" || p.Writes[0].Params["storage"] != "ceph" {
		t.Errorf("plan %+v (outcome %+v)", p, p.Outcome)
	}
	refused := run("dry-refused", `{"archive":"`+simpve.DemoBackupWeb+`","vmid":100,"target_node":"pve1"}`)
	if refused.Outcome == nil || refused.Outcome.Reason != ReasonVMExists || len(refused.Writes) != 0 {
		t.Errorf("refused plan %+v (outcome %+v)", refused, refused.Outcome)
	}
	if n := restorePosts(e, "pve1"); n != 0 {
		t.Errorf("a dry run sent %d restores", n)
	}
	if n := len(e.nb.JournalEntries()); n != 0 {
		t.Errorf("a dry run journaled %d entries", n)
	}
}

// TestVMRestoreApproval pins contract §4b for vm.restore on an endpoint that lists it (a
// force restore overwrites a guest): a restore bound to be refused is refused without asking
// anyone; another waits for approval, publishing its plan, and sends nothing.
func TestVMRestoreApproval(t *testing.T) {
	t.Parallel()
	e := newRTEnv(t)
	c, _ := e.p.cfg.Proxmox.Get(1)
	ep := c.Endpoint()
	ep.Approval.Verbs = []string{"vm.restore"}
	clients, err := proxmox.NewClients([]proxmox.EndpointConfig{ep}, func(string) string { return simpve.DemoSecret },
		proxmox.WithTaskPollInterval(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	e.p.cfg.Proxmox = clients
	handle := func(id, data string) events.Disposition {
		cmd := events.Command{ID: id, Source: "/test/restore", Type: events.TypePrefix + "vm.restore", Verb: "vm.restore",
			EndpointID: 1, HasEndpointID: true, Actor: "alice", Data: json.RawMessage(data)}
		return e.p.Handle(context.Background(), cmd, events.Delivery{Number: 1, Stored: time.Now()})
	}
	if d := handle("in-use", `{"archive":"`+simpve.DemoBackupWeb+`","vmid":100,"target_node":"pve1"}`); d.Action != events.Ack {
		t.Fatalf("a restore bound to be refused: %+v, want answered", d)
	}
	if res := e.pub.result(t, "in-use"); res.Status != 409 || res.Reason != ReasonVMExists {
		t.Errorf("refused without asking: %d %s, want 409 %s", res.Status, res.Reason, ReasonVMExists)
	}
	if d := handle("overwrite", `{"archive":"`+simpve.DemoBackupWeb+`","vmid":103,"target_node":"pve1","force":true}`); d.Action != events.Redeliver {
		t.Fatalf("a force restore: %+v, want it to wait for approval", d)
	}
	if !e.pub.hasWaiting(t, "overwrite") {
		t.Error("no waiting step awaiting approval")
	}
	if n := restorePosts(e, "pve1"); n != 0 {
		t.Errorf("restore POSTs = %d before any approval", n)
	}
}

// hasWaiting reports whether command id published a waiting step awaiting approval.
func (c *collector) hasWaiting(t *testing.T, id string) bool {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.msgs {
		var ev struct {
			Data events.Step `json:"data"`
		}
		if strings.HasSuffix(m.Subject, ".step") && json.Unmarshal(m.Data, &ev) == nil && ev.Data.CommandID == id &&
			ev.Data.Status == events.StepWaiting && ev.Data.Detail == awaitingApproval {
			return true
		}
	}
	return false
}

// TestVMRestoreCancel: a started restore is cancellable (contract §4 "Cancel"): its task is
// stopped and the command answers 410 command_cancelled saying what PVE leaves behind.
func TestVMRestoreCancel(t *testing.T) {
	t.Parallel()
	e := newRTEnv(t)
	_, done := e.startLongTask(t, "vm.restore", "to-cancel", `{"archive":"`+simpve.DemoBackupWeb+`","vmid":400,"target_node":"pve1"}`, stepRestoreVM)
	_, res := cancelUntilAnswered(t, e, store.CommandKey{Source: "/test/vm.restore", ID: "to-cancel"}, done)
	if res.Status != 410 || res.Reason != ReasonCommandCancelled || !res.Finalized() {
		t.Fatalf("result %d %s (%s), want 410 %s", res.Status, res.Reason, res.Detail, ReasonCommandCancelled)
	}
	for _, want := range []string{"restore_vm task UPID:pve1:", "PVE stops the restore"} {
		if !strings.Contains(res.Detail, want) {
			t.Errorf("detail %q does not say %q", res.Detail, want)
		}
	}
	if n := restorePosts(e, "pve1"); n != 1 {
		t.Errorf("restore POSTs = %d, want 1", n)
	}
}
