package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/handlers"
	"github.com/proxbus/proxbus/store"
)

// pveWrites returns the writes (every request but GET) the simulator read from index from on,
// as "METHOD path".
func (e *env) pveWrites(from int) ([]string, int) {
	log := e.pve.RequestLog()
	var out []string
	for _, r := range log[min(from, len(log)):] {
		if r.Method != http.MethodGet {
			out = append(out, r.Method+" "+r.Path)
		}
	}
	return out, len(log)
}

// TestDryRunPredictsTheRealRun pins contract §4a for every write verb, one after another on one
// demo cluster: the dry run answers 200 planned, writes nothing anywhere (no Proxmox write, no
// journal entry, no record in Redis), and predicts the real run that follows on the same state:
// its outcome and its writes, in order; where a plan stops (a later write needs an earlier
// one's answer), its writes begin the real run's.
func TestDryRunPredictsTheRealRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	template := `{"source":{"template_vmid":9000},"new_vmid":420,"new_name":"dry-420","target_node":"pve1",` +
		`"cloud_init":{"user":"ops","password":"` + canary + `","ipconfig0":"ip=dhcp"}}`
	cases := []struct {
		verb, data string
		complete   bool
	}{
		{"storage.pbs.create", pbs("pbs-dry"), true},
		{"storage.pbs.create", pbs("pbs-dry"), true}, // already_present: no write
		{"vm.start", `{"vm":101}`, true},
		{"vm.start", `{"vm":100}`, true},
		{"vm.suspend", `{"vm":"web-01"}`, true},
		{"vm.resume", `{"vm":"web-01"}`, true},
		{"vm.reboot", `{"vm":103}`, true},
		{"vm.stop", `{"vm":202,"force":true}`, true},
		{"vm.snapshot.create", `{"vm":200,"snapshot":"dry"}`, true},
		{"vm.snapshot.rollback", `{"vm":200,"snapshot":"dry"}`, true},
		{"vm.snapshot.delete", `{"vm":200,"snapshot":"dry"}`, true},
		{"vm.snapshot.rollback", `{"vm":200,"snapshot":"gone"}`, true},
		{"vm.backup", `{"vm":"web-01","storage":"pbs-dry"}`, false},
		{"vm.migrate", `{"vm":"web-01","target_node":"pve2"}`, true},
		{"vm.provision", template, false},
		{"node.reboot", `{"node":"pve3"}`, true},
		{"vm.delete", `{"vm":"db-01"}`, true},
		{"vm.delete", `{"vm":420,"stop_first":true}`, true},
	}
	for i, tc := range cases {
		t.Run(fmt.Sprintf("%02d %s", i, tc.verb), func(t *testing.T) {
			_, at := e.pveWrites(0)
			entries := len(e.netbox.JournalEntries())
			dry := e.guestCommand(tc.verb, tc.data)
			dry.DryRun = true
			res := e.send(dry)
			var out handlers.PlanOutput
			if res.Status != 200 || res.Result != handlers.ResultPlanned || json.Unmarshal(res.Output, &out) != nil {
				t.Fatalf("dry run: %d %s %s (%s) %s", res.Status, res.Result, res.Reason, res.Detail, res.Output)
			}
			if strings.Contains(string(res.Output), canary) {
				t.Errorf("the plan shows the secret: %s", res.Output)
			}
			if w, _ := e.pveWrites(at); len(w) != 0 {
				t.Errorf("the dry run wrote to Proxmox: %v", w)
			}
			if n := len(e.netbox.JournalEntries()); n != entries {
				t.Errorf("the dry run journaled (%d entries, were %d)", n, entries)
			}
			if state, _, err := e.store.Record(context.Background(), store.CommandKey{Source: dry.Source, ID: dry.ID}); err != nil || state != store.Absent {
				t.Errorf("the dry run left a record in Redis: %v %v", state, err)
			}
			plan := out.Plan
			if plan.Complete != tc.complete {
				t.Fatalf("plan %+v: complete %v, want %v", plan, plan.Complete, tc.complete)
			}

			real := e.send(e.guestCommand(tc.verb, tc.data))
			writes, _ := e.pveWrites(at)
			var planned []string
			for _, w := range plan.Writes {
				planned = append(planned, w.Method+" "+w.Path)
			}
			if tc.complete {
				if plan.Outcome == nil || plan.Outcome.Status != real.Status || plan.Outcome.Result != real.Result || plan.Outcome.Reason != real.Reason {
					t.Errorf("planned outcome %+v, the real run: %d %s %s (%s)", plan.Outcome, real.Status, real.Result, real.Reason, real.Detail)
				}
				if !slices.Equal(planned, writes) {
					t.Errorf("planned writes %v, the real run sent %v", planned, writes)
				}
				return
			}
			if plan.Stopped == "" || len(planned) == 0 || len(planned) > len(writes) || !slices.Equal(planned, writes[:len(planned)]) {
				t.Errorf("stopped plan %+v (writes %v), want a reason and the first of the real run's writes %v", plan, planned, writes)
			}
			if real.Status >= 300 {
				t.Errorf("the real run: %d %s %s (%s)", real.Status, real.Result, real.Reason, real.Detail)
			}
		})
	}
}
