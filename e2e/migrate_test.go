package e2e_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/netbox"
)

// postPVEForm sends one POST with form to the Proxmox simulator as a replica would, with the
// demo token, and checks that it was answered 200: it plays the write of a replica that then
// died.
func (e *env) postPVEForm(path string, form url.Values) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.base.Endpoints[0].URLs[0]+"/api2/json"+path, strings.NewReader(form.Encode()))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "PVEAPIToken="+app.DemoPVETokenID+"="+app.DemoPVESecret)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("POST %s: %v", path, err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		e.t.Fatalf("POST %s: %s", path, res.Status)
	}
}

// wantGuestOn checks where the simulator has guest vmid and its status.
func wantGuestOn(vmid int64, node, status string) func(*testing.T, *env, events.Result) {
	return func(t *testing.T, e *env, _ events.Result) {
		t.Helper()
		if g, ok := e.pve.Guest(vmid); !ok || g.Node != node || g.Status != status {
			t.Errorf("guest %d %s on %s, want %s on %s", vmid, g.Status, g.Node, status, node)
		}
	}
}

// TestMigrate pins contract §9 vm.migrate end to end, in order on one demo cluster: the
// precondition refusals send nothing, a live migration with local disks moves web-01 and
// journals on its NetBox VM, the same command again is already_present, a node not in the
// cluster and an unknown guest are refused.
func TestMigrate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	runGuestCases(t, e, []guestCase{
		{name: "local disks without with_local_disks", verb: "vm.migrate", data: `{"vm":"web-01","target_node":"pve2"}`,
			wantStatus: 409, wantResult: "refused", wantReason: "migration_precondition_failed", check: wantGuestOn(100, "pve1", "running")},
		{name: "passthrough devices", verb: "vm.migrate", data: `{"vm":"db-01","target_node":"pve1","with_local_disks":true}`,
			wantStatus: 409, wantResult: "refused", wantReason: "migration_precondition_failed",
			check: func(t *testing.T, e *env, res events.Result) {
				if !strings.Contains(res.Detail, "hostpci1, usb0") {
					t.Errorf("detail %q does not name the passthrough devices", res.Detail)
				}
			}},
		{name: "live with local disks", verb: "vm.migrate", data: `{"vm":"web-01","target_node":"pve2","with_local_disks":true}`,
			wantStatus: 200, wantResult: "ok", check: func(t *testing.T, e *env, res events.Result) {
				wantGuestOn(100, "pve2", "running")(t, e, res)
				var found bool
				for _, en := range e.netbox.JournalEntries() {
					if en.ObjectType == netbox.ObjectTypeVM && en.ObjectID == 1 && strings.Contains(en.Comments, "- command_id: "+res.CommandID+"\n") {
						found = true
						for _, want := range []string{"- result: ok\n", "- target_node: pve2\n", "- with_local_disks: true\n", "- proxmox_task_upid: UPID:pve1:"} {
							if !strings.Contains(en.Comments, want) {
								t.Errorf("journal comment lacks %q:\n%s", want, en.Comments)
							}
						}
					}
				}
				if !found {
					t.Error("no vm.migrate journal entry on NetBox VM 1 (web-01)")
				}
			}},
		{name: "already there", verb: "vm.migrate", data: `{"vm":100,"target_node":"pve2"}`, wantStatus: 200, wantResult: "already_present"},
		{name: "a node not in the cluster", verb: "vm.migrate", data: `{"vm":100,"target_node":"pve7"}`,
			wantStatus: 422, wantResult: "refused", wantReason: "invalid_body"},
		{name: "an unknown guest", verb: "vm.migrate", data: `{"vm":"nope","target_node":"pve1"}`,
			wantStatus: 404, wantResult: "refused", wantReason: "vm_not_found"},
	})
	if n := e.pve.Requests("POST", "/nodes/pve1/qemu/100/migrate"); n != 1 {
		t.Errorf("migrate POSTs of web-01 = %d, want 1", n)
	}
	if n := e.pve.Requests("POST", "/nodes/pve2/qemu/101/migrate"); n != 0 {
		t.Errorf("migrate POSTs of db-01 = %d, want 0", n)
	}
}

// TestMigrateProgress: a migration that takes a while publishes running steps with the
// progress its task's log gives (the live migration's transferred RAM).
func TestMigrateProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.pve.SetTaskDuration(2500 * time.Millisecond)
	e.start()
	cmd := e.guestCommand("vm.migrate", `{"vm":"app-01","target_node":"pve1"}`)
	if res := e.send(cmd); res.Status != 200 || res.Result != "ok" {
		t.Fatalf("got %d %s %q (%s)", res.Status, res.Result, res.Reason, res.Detail)
	}
	var progress []events.Progress
	for _, st := range e.steps(cmd) {
		if st.Step == "migrate_vm" && st.Status == events.StepRunning && st.Progress != nil {
			progress = append(progress, *st.Progress)
		}
	}
	if len(progress) == 0 {
		t.Fatal("no running step with progress")
	}
	if p := progress[len(progress)-1]; p.Total != 8<<30 || p.Done <= 0 || p.Done > p.Total {
		t.Errorf("progress %+v, want a part of app-01's 8 GiB of RAM", p)
	}
}

// TestLostMigrateAnswerIsConfirmed: Proxmox started the migration but its answer was lost;
// the command confirms by reading where the guest is and never sends a second migrate.
func TestLostMigrateAnswerIsConfirmed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	e.pve.DropAnswerAfterApply("POST", "/nodes/pve3/qemu/102/migrate", 1)
	res := e.send(e.guestCommand("vm.migrate", `{"vm":102,"target_node":"pve1"}`))
	if res.Status != 200 || res.Result != "ok" {
		t.Fatalf("%d %s %s %s", res.Status, res.Result, res.Reason, res.Detail)
	}
	if n := e.pve.Requests("POST", "/nodes/pve3/qemu/102/migrate"); n != 1 {
		t.Errorf("migrate POSTs = %d, want 1", n)
	}
	wantGuestOn(102, "pve1", "running")(t, e, res)
}

// TestMigrateResumedAfterCrash: a replica claimed a vm.migrate, wrote its journal entry and
// died, with or without having sent the migrate. The redelivery confirms by reading: a
// migration still running is waited for and is ok; one never sent answers 502
// proxmox_write_unconfirmed. Neither sends a migrate.
func TestMigrateResumedAfterCrash(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		marked     bool // the dead replica marked its migrate as leaving
		sent       bool
		wantStatus int
		wantReason string
		wantNode   string
		wantPOSTs  int
	}{
		{"killed while its migration runs", true, true, 200, "", "pve1", 1},
		{"killed after marking the migrate, which never arrived", true, false, 502, "proxmox_write_unconfirmed", "pve3", 0},
		{"killed before it sent the migrate", false, false, 200, "", "pve1", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			cmd := e.guestCommand("vm.migrate", `{"vm":102,"target_node":"pve1"}`)
			var marked []string
			if tc.marked {
				marked = []string{"migrate_vm"}
			}
			e.deadReplica(cmd, 200*time.Millisecond, true, marked...)
			if tc.sent {
				e.pve.SetTaskDuration(2 * time.Second)
				e.postPVEForm("/nodes/pve3/qemu/102/migrate", url.Values{"target": {"pve1"}, "online": {"1"}})
			}
			time.Sleep(300 * time.Millisecond) // the dead replica's lease runs out
			e.start()
			res := e.send(cmd)
			if res.Status != tc.wantStatus || res.Reason != tc.wantReason {
				t.Fatalf("got %d %s %q (%s), want %d %q", res.Status, res.Result, res.Reason, res.Detail, tc.wantStatus, tc.wantReason)
			}
			if n := e.pve.Requests("POST", "/nodes/pve3/qemu/102/migrate"); n != tc.wantPOSTs {
				t.Errorf("migrate POSTs = %d, want %d (the dead replica's or, never sent, the resumed command's)", n, tc.wantPOSTs)
			}
			if g, _ := e.pve.Guest(102); g.Node != tc.wantNode {
				t.Errorf("guest 102 on %s, want %s", g.Node, tc.wantNode)
			}
		})
	}
}
