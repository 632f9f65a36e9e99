package e2e_test

import (
	"slices"
	"testing"

	"github.com/proxbus/proxbus/events"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// TestSnapshotOutcomesDecidedByRead pins contract §9's snapshot outcomes that one read of the
// guest's snapshots decides, on the demo cluster: creating an existing name answers 200
// already_present when description and memory state match (containers ignore include_memory)
// and 409 snapshot_conflict naming what differs otherwise; deleting a missing snapshot answers
// 200 already_absent; rolling back to a missing one 404 snapshot_not_found. None of them sends
// a Proxmox write. The cases run in order on one cluster.
func TestSnapshotOutcomesDecidedByRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	tests := []struct {
		name, verb, data string
		wantStatus       int
		wantResult       string
		wantReason       string
		wantFields       []string
		// wantWrites is how many Proxmox writes the command sends (0: decided by the read).
		wantWrites int
	}{
		{"container: same description", "vm.snapshot.create", `{"vm":200,"snapshot":"base","description":"fresh install"}`,
			200, "already_present", "", nil, 0},
		{"container ignores include_memory", "vm.snapshot.create", `{"vm":"ct-pve1","snapshot":"base","description":"fresh install","include_memory":true}`,
			200, "already_present", "", nil, 0},
		{"trailing white space of a description does not count", "vm.snapshot.create", `{"vm":200,"snapshot":"base","description":"fresh install\n"}`,
			200, "already_present", "", nil, 0},
		{"container: other description", "vm.snapshot.create", `{"vm":200,"snapshot":"base","description":"something else"}`,
			409, "refused", "snapshot_conflict", []string{"description"}, 0},
		{"container: no description against one", "vm.snapshot.create", `{"vm":201,"snapshot":"experiment"}`,
			409, "refused", "snapshot_conflict", []string{"description"}, 0},
		{"VM: same description and memory", "vm.snapshot.create", `{"vm":102,"snapshot":"pre-upgrade","description":"before the 2.0 upgrade","include_memory":true}`,
			200, "already_present", "", nil, 0},
		{"VM: without memory against one with RAM", "vm.snapshot.create", `{"vm":"app-01","snapshot":"pre-upgrade","description":"before the 2.0 upgrade"}`,
			409, "refused", "snapshot_conflict", []string{"include_memory"}, 0},
		{"VM: both differ", "vm.snapshot.create", `{"vm":102,"snapshot":"pre-upgrade","description":"x"}`,
			409, "refused", "snapshot_conflict", []string{"description", "include_memory"}, 0},
		{"stopped VM: created without RAM (PVE saves none)", "vm.snapshot.create", `{"vm":101,"snapshot":"cold","include_memory":true}`,
			201, "created", "", nil, 1},
		{"stopped VM: include_memory matches its snapshot without RAM", "vm.snapshot.create", `{"vm":101,"snapshot":"cold","include_memory":true}`,
			200, "already_present", "", nil, 0},
		{"delete a missing snapshot", "vm.snapshot.delete", `{"vm":200,"snapshot":"ghost"}`,
			200, "already_absent", "", nil, 0},
		{"delete a missing VM snapshot by name", "vm.snapshot.delete", `{"vm":"web-01","snapshot":"ghost"}`,
			200, "already_absent", "", nil, 0},
		{"rollback to a missing snapshot", "vm.snapshot.rollback", `{"vm":201,"snapshot":"ghost","start":true}`,
			404, "refused", "snapshot_not_found", []string{"snapshot"}, 0},
		{"rollback of a VM to a missing snapshot", "vm.snapshot.rollback", `{"vm":100,"snapshot":"ghost"}`,
			404, "refused", "snapshot_not_found", []string{"snapshot"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(e.pve.RequestLog())
			tasksBefore := len(e.pve.Tasks())
			cmd := e.guestCommand(tc.verb, tc.data)
			res := e.send(cmd)
			if res.Status != tc.wantStatus || res.Result != tc.wantResult || res.Reason != tc.wantReason {
				t.Fatalf("got %d %s %q (%s), want %d %s %q", res.Status, res.Result, res.Reason, res.Detail, tc.wantStatus, tc.wantResult, tc.wantReason)
			}
			if !slices.Equal(res.Fields, tc.wantFields) {
				t.Errorf("fields %v, want %v", res.Fields, tc.wantFields)
			}
			if tc.wantStatus >= 400 && res.Detail == "" {
				t.Errorf("refusal without a detail")
			}
			var writes []string
			for _, rec := range e.pve.RequestLog()[before:] {
				if rec.Method != "GET" {
					writes = append(writes, rec.Method+" "+rec.Path)
				}
			}
			if len(writes) != tc.wantWrites {
				t.Errorf("Proxmox writes %v, want %d", writes, tc.wantWrites)
			}
			if tc.wantWrites == 0 {
				if n := len(e.pve.Tasks()); n != tasksBefore {
					t.Errorf("tasks %d → %d without a write", tasksBefore, n)
				}
				if tc.wantStatus < 400 && !slices.ContainsFunc(e.steps(cmd), func(s events.Step) bool { return s.Status == events.StepSkipped }) {
					t.Errorf("no skipped step for an outcome decided by the read: %+v", e.steps(cmd))
				}
			}
		})
	}
	// The per-path counters agree: nothing was ever sent to the snapshots the read decided.
	for _, path := range []string{
		"/nodes/pve1/lxc/200/snapshot", "/nodes/pve3/qemu/102/snapshot",
		"/nodes/pve1/lxc/200/snapshot/ghost", "/nodes/pve1/qemu/100/snapshot/ghost",
		"/nodes/pve2/lxc/201/snapshot/ghost/rollback", "/nodes/pve1/qemu/100/snapshot/ghost/rollback",
	} {
		for _, method := range []string{"POST", "DELETE"} {
			if n := e.pve.Requests(method, path); n != 0 {
				t.Errorf("%s %s sent %d times", method, path, n)
			}
		}
	}
	if g, ok := e.pve.Guest(simpve.DemoCT2); ok && g.Status != "stopped" {
		t.Errorf("a refused rollback with start changed the container: %s", g.Status)
	}
}
