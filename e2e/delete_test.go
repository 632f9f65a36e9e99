package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
)

// deletes counts the DELETEs of a guest (not of its snapshots) the simulator read.
func (e *env) deletes(path string) int { return e.pve.Requests("DELETE", path) }

// rawPVE sends one request to the Proxmox simulator as a replica would, with the demo token,
// and checks that it was answered 200: it plays a write of a replica that then died.
func (e *env) rawPVE(method, path string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, e.base.Endpoints[0].URLs[0]+"/api2/json"+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "PVEAPIToken="+app.DemoPVETokenID+"="+app.DemoPVESecret)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		e.t.Fatalf("%s %s: %s", method, path, res.Status)
	}
}

// TestVMDelete pins contract §9 vm.delete, in order on one demo cluster: running and
// protected guests refused without a write, stop_first's hard stop and the delete as two
// steps and tasks, purge and destroy-unreferenced-disks as Proxmox parameters, a repeat by
// vmid (already_absent) and by name (vm_not_found), containers, and the journal on the
// guest's NetBox VM, which outlives the Proxmox guest.
func TestVMDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	noWritesTo := func(path string) func(*testing.T, *env, events.Result) {
		return func(t *testing.T, e *env, _ events.Result) {
			t.Helper()
			for _, rec := range e.pve.RequestLog() {
				if rec.Method != "GET" && strings.HasPrefix(rec.Path, path) {
					t.Errorf("a write to the refused guest: %s %s", rec.Method, rec.Path)
				}
			}
		}
	}
	runGuestCases(t, e, []guestCase{
		{"a running VM", "vm.delete", `{"vm":100}`, 409, "refused", "vm_running", func(t *testing.T, e *env, res events.Result) {
			noWritesTo("/nodes/pve1/qemu/100")(t, e, res)
			wantGuestStatus(100, "running")(t, e, res)
			if !strings.Contains(res.Detail, "stop_first") {
				t.Errorf("detail %q does not say how to go on", res.Detail)
			}
		}},
		{"start the protected VM", "vm.start", `{"vm":"db-01"}`, 200, "ok", "", nil},
		{"a protected VM, even with stop_first", "vm.delete", `{"vm":"db-01","stop_first":true}`, 409, "refused", "vm_protected", func(t *testing.T, e *env, res events.Result) {
			for _, rec := range e.pve.RequestLog() {
				if rec.Method == "DELETE" || rec.Path == "/nodes/pve2/qemu/101/status/stop" {
					t.Errorf("a write to the protected guest: %s %s", rec.Method, rec.Path)
				}
			}
			wantGuestStatus(101, "running")(t, e, res)
		}},
		{"stop first, then delete", "vm.delete", `{"vm":"web-01","stop_first":true}`, 200, "ok", "", func(t *testing.T, e *env, res events.Result) {
			if _, exists := e.pve.Guest(100); exists {
				t.Error("guest 100 still exists")
			}
			var types []string
			for _, task := range e.pve.Tasks() {
				if task.VMID == 100 {
					types = append(types, task.Type)
				}
			}
			if strings.Join(types, ",") != "qmstop,qmdestroy" {
				t.Errorf("tasks of 100: %v, want qmstop then qmdestroy", types)
			}
			var out struct {
				VMID, Node string
				UPIDs      []string
			}
			if err := json.Unmarshal(res.Output, &out); err != nil || out.VMID != "100" || out.Node != "pve1" || len(out.UPIDs) != 2 {
				t.Errorf("output %s", res.Output)
			}
			for _, rec := range e.pve.RequestLog() {
				if rec.Method == "DELETE" && (rec.Params.Get("purge") != "1" || rec.Params.Get("destroy-unreferenced-disks") != "1") {
					t.Errorf("DELETE %s params %v, want purge=1 and destroy-unreferenced-disks=1", rec.Path, rec.Params)
				}
			}
		}},
		{"the same vmid again", "vm.delete", `{"vm":100}`, 200, "already_absent", "", func(t *testing.T, e *env, _ events.Result) {
			if n := e.deletes("/nodes/pve1/qemu/100"); n != 1 {
				t.Errorf("DELETEs of 100 = %d, want 1", n)
			}
		}},
		{"the name again", "vm.delete", `{"vm":"web-01"}`, 404, "refused", "vm_not_found", nil},
		{"a stopped container, keeping its jobs and other disks", "vm.delete", `{"vm":201,"purge":false,"destroy_unreferenced_disks":false}`, 200, "ok", "",
			func(t *testing.T, e *env, _ events.Result) {
				if _, exists := e.pve.Guest(201); exists {
					t.Error("container 201 still exists")
				}
				for _, rec := range e.pve.RequestLog() {
					if rec.Method == "DELETE" && rec.Path == "/nodes/pve2/lxc/201" &&
						(rec.Params.Get("purge") != "0" || rec.Params.Get("destroy-unreferenced-disks") != "0" || rec.Params.Has("force")) {
						t.Errorf("DELETE params %v, want purge=0, destroy-unreferenced-disks=0, no force", rec.Params)
					}
				}
			}},
		{"a running container", "vm.delete", `{"vm":"ct-pve1"}`, 409, "refused", "vm_running", noWritesTo("/nodes/pve1/lxc/200")},
		{"an ambiguous name", "vm.delete", `{"vm":"dup"}`, 409, "refused", "vm_ambiguous", nil},
		{"a bad purge", "vm.delete", `{"vm":103,"purge":"yes"}`, 422, "refused", "invalid_body", nil},
	})
	var onVM []string
	for _, je := range e.netbox.JournalEntries() {
		if je.ObjectType == "virtualization.virtualmachine" && je.ObjectID == 1 && strings.Contains(je.Comments, "- verb: vm.delete") {
			onVM = append(onVM, je.Comments)
			if strings.Contains(je.Comments, "result: in_progress") {
				t.Errorf("journal entry left in progress: %q", je.Comments)
			}
		}
	}
	if len(onVM) != 3 {
		t.Errorf("vm.delete journal entries on NetBox VM 1: %d, want 3 (refused, ok, already_absent)", len(onVM))
	}
}

// TestLostDeleteAnswerIsConfirmed: Proxmox destroyed the guest but the DELETE's answer was
// lost; the verb confirms by reading that the guest is gone and never sends a second DELETE.
func TestLostDeleteAnswerIsConfirmed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	e.pve.DropAnswerAfterApply("DELETE", "/nodes/pve1/qemu/100", 1)
	res := e.send(e.guestCommand("vm.delete", `{"vm":"web-01","stop_first":true}`))
	if res.Status != 200 || res.Result != "ok" || !res.Finalized() {
		t.Fatalf("%d %s %s %s", res.Status, res.Result, res.Reason, res.Detail)
	}
	if n := e.deletes("/nodes/pve1/qemu/100"); n != 1 {
		t.Errorf("DELETEs = %d, want 1", n)
	}
	if _, exists := e.pve.Guest(100); exists {
		t.Error("guest 100 still exists")
	}
}

// TestResumedDeleteIsConfirmed: a replica sent vm.delete's writes (the stop_first stop, then
// the DELETE) and died; the redelivery confirms by reading, waiting while the destroy task
// still runs, finalizes the dead replica's entry on the NetBox VM and never sends a DELETE.
// A replica that died after the stop but before the DELETE cannot be told from one whose
// DELETE failed: the guest stays, and the command answers proxmox_write_unconfirmed.
func TestResumedDeleteIsConfirmed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		taskDur    time.Duration // of the dead replica's tasks
		sendDelete bool
		markDelete bool // the dead replica marked its DELETE as leaving
		waitGone   bool // the destroy task ended before the redelivery
		confirmFor time.Duration
		wantStatus int
		wantReason string
		wantGone   bool
	}{
		{"killed while the destroy task runs", 1500 * time.Millisecond, true, true, false, 30 * time.Second, 200, "", true},
		{"killed after the destroy task ended", 10 * time.Millisecond, true, true, true, 30 * time.Second, 200, "", true},
		{"killed after marking the DELETE, which never arrived", 10 * time.Millisecond, false, true, false, 500 * time.Millisecond, 502, "proxmox_write_unconfirmed", false},
		{"killed after its stop, before the DELETE", 10 * time.Millisecond, false, false, false, 500 * time.Millisecond, 200, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			cmd := e.guestCommand("vm.delete", `{"vm":100,"stop_first":true}`)
			e.pve.SetTaskDuration(tc.taskDur)
			marked := []string{"stop_vm"}
			if tc.markDelete {
				marked = append(marked, "delete_vm")
			}
			e.deadReplica(cmd, 200*time.Millisecond, true, marked...)
			e.rawPVE("POST", "/nodes/pve1/qemu/100/status/stop")
			eventually(t, 10*time.Second, "the dead replica's stop ends", func() bool {
				g, _ := e.pve.Guest(100)
				return g.Status == "stopped" && !g.Busy
			})
			if tc.sendDelete {
				e.rawPVE("DELETE", "/nodes/pve1/qemu/100?purge=1&destroy-unreferenced-disks=1")
			}
			if tc.waitGone {
				eventually(t, 10*time.Second, "the dead replica's destroy ends", func() bool {
					_, exists := e.pve.Guest(100)
					return !exists
				})
			}
			time.Sleep(300 * time.Millisecond) // the dead replica's lease runs out
			tasksBefore := len(e.pve.Tasks())
			deletesBefore := e.deletes("/nodes/pve1/qemu/100")
			e.start(func(c *app.Config) { c.Pipeline.ConfirmFor = tc.confirmFor })
			res := e.send(cmd)
			if res.Status != tc.wantStatus || res.Reason != tc.wantReason || !res.Finalized() {
				t.Fatalf("got %d %s %q (%s; finalized %v), want %d %q", res.Status, res.Result, res.Reason, res.Detail, res.Finalized(), tc.wantStatus, tc.wantReason)
			}
			resumedSends := 0 // a DELETE never marked is the resumed command's to send, once
			if !tc.markDelete {
				resumedSends = 1
			}
			if n := len(e.pve.Tasks()); n != tasksBefore+resumedSends {
				t.Errorf("tasks %d → %d, want %d more: the resumed command wrote again", tasksBefore, n, resumedSends)
			}
			if n := e.deletes("/nodes/pve1/qemu/100"); n != deletesBefore+resumedSends {
				t.Errorf("DELETEs %d → %d, want %d more", deletesBefore, n, resumedSends)
			}
			if _, exists := e.pve.Guest(100); exists == tc.wantGone {
				t.Errorf("guest 100 exists = %v, want %v", exists, !tc.wantGone)
			}
			entries := e.netbox.JournalEntries()
			if len(entries) != 1 || entries[0].ObjectType != "virtualization.virtualmachine" || entries[0].ObjectID != 1 ||
				strings.Contains(entries[0].Comments, "result: in_progress") {
				t.Errorf("journal %+v, want the dead replica's entry on NetBox VM 1, finalized", entries)
			}
		})
	}
}
