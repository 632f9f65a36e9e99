package console

import (
	"time"

	"testing"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/handlers"
)

// TestIndexFollowsACommand pins how a command's state follows its events: running while its
// steps run, waiting while its newest step waits, then done or failed by its result's
// status; its actor, endpoint, verb and replica come from its events.
func TestIndexFollowsACommand(t *testing.T) {
	t.Parallel()
	ix := newIndex(10)
	applyAll(ix, step(t, "a", 1, "claim", events.StepWaiting, 0))
	c, ok := ix.Get("a")
	if !ok || c.State() != handlers.StateWaiting {
		t.Fatalf("after a waiting step: ok=%v state=%q, want waiting", ok, c.State())
	}
	applyAll(ix, step(t, "a", 2, "start_vm", events.StepStarted, 10))
	if c, _ := ix.Get("a"); c.State() != handlers.StateRunning || c.Current() != "start_vm started" {
		t.Fatalf("after a started step: state=%q current=%q", c.State(), c.Current())
	}
	applyAll(ix, step(t, "a", 3, "start_vm", events.StepDone, 30), result(t, "a", 200, "started", false, 31))
	c, _ = ix.Get("a")
	if c.State() != handlers.StateDone || c.Result == nil || c.Result.Result != "started" {
		t.Fatalf("after the result: state=%q result=%+v", c.State(), c.Result)
	}
	if c.Actor != "alice" || c.EndpointID == nil || *c.EndpointID != 1 || c.Verb != "vm.start" || c.Instance != "r1" {
		t.Errorf("command facts: actor %q endpoint %v verb %q instance %q", c.Actor, c.EndpointID, c.Verb, c.Instance)
	}
	if got := c.Duration(t0.Add(9 * time.Second)); got.Milliseconds() != 31 {
		t.Errorf("duration of a finished command = %v, want 31ms (to its result, not to now)", got)
	}
	applyAll(ix, result(t, "b", 503, "failed", false, 40))
	if c, _ := ix.Get("b"); c.State() != handlers.StateFailed {
		t.Errorf("a 503 result lists as %q, want failed", c.State())
	}
}

// TestIndexKeepsTheFirstHandResult: a replay (a duplicate answered from the record) is
// counted and never replaces the first-hand result; a replay seen first stands in for a
// first-hand result older than the history until that arrives.
func TestIndexKeepsTheFirstHandResult(t *testing.T) {
	t.Parallel()
	ix := newIndex(10)
	applyAll(ix, result(t, "a", 201, "created", false, 0), result(t, "a", 201, "created", true, 5))
	c, _ := ix.Get("a")
	if c.Result.Replayed || c.Replays != 1 {
		t.Errorf("after first-hand then replay: replayed=%v replays=%d", c.Result.Replayed, c.Replays)
	}
	applyAll(ix, result(t, "b", 201, "created", true, 0), result(t, "b", 201, "created", false, 5))
	c, _ = ix.Get("b")
	if c.Result.Replayed {
		t.Error("the first-hand result did not replace the replay seen before it")
	}
}

// TestIndexEvictsTheOldest: the index holds the newest limit commands; older ones are gone
// from lookups and lists, and a journal event of a command older than the history is dropped.
func TestIndexEvictsTheOldest(t *testing.T) {
	t.Parallel()
	ix := newIndex(3)
	for i, id := range []string{"c1", "c2", "c3", "c4", "c5"} {
		applyAll(ix, step(t, id, 1, "claim", events.StepStarted, i))
	}
	if ix.Len() != 3 {
		t.Fatalf("Len = %d, want 3", ix.Len())
	}
	if _, ok := ix.Get("c2"); ok {
		t.Error("c2 is still held beyond the limit")
	}
	rows, total := ix.List(Filter{}, 10)
	if total != 3 || len(rows) != 3 || rows[0].ID != "c5" || rows[2].ID != "c3" {
		t.Errorf("List = %d rows of %d, first %q last %q; want c5 … c3", len(rows), total, rows[0].ID, rows[len(rows)-1].ID)
	}
	applyAll(ix, emit(t, "r1", "c1", "vm.start", t0, events.JournalRepaired{JournalEntryURL: "http://nb/1", RepairedBy: events.RepairedByRepairer}))
	if _, ok := ix.Get("c1"); ok {
		t.Error("a journal event brought back a command older than the history")
	}
}

// TestIndexIgnoresWhatIsNotACommandEvent: an event at or below the newest sequence applied
// (an ordered consumer's redelivery after a reset) and an event of another type change
// nothing.
func TestIndexIgnoresWhatIsNotACommandEvent(t *testing.T) {
	t.Parallel()
	ix := newIndex(10)
	ix.apply(5, step(t, "a", 1, "claim", events.StepStarted, 0))
	v := ix.Version()
	ix.apply(5, step(t, "a", 2, "claim", events.StepDone, 1))
	ix.apply(4, step(t, "a", 2, "claim", events.StepDone, 1))
	other := step(t, "a", 2, "claim", events.StepDone, 1)
	other.Type = "com.example.other"
	ix.apply(6, other)
	if ix.Version() != v {
		t.Errorf("version moved from %d to %d on events that must be ignored", v, ix.Version())
	}
	if c, _ := ix.Get("a"); len(c.Steps) != 1 {
		t.Errorf("steps = %d, want 1", len(c.Steps))
	}
}

// TestIndexOrdersStepsBySeq: steps are kept in seq order whatever order they arrive in.
func TestIndexOrdersStepsBySeq(t *testing.T) {
	t.Parallel()
	ix := newIndex(10)
	applyAll(ix, step(t, "a", 2, "claim", events.StepDone, 2), step(t, "a", 1, "claim", events.StepStarted, 1), step(t, "a", 3, "x", events.StepStarted, 3))
	c, _ := ix.Get("a")
	for i, s := range c.Steps {
		if s.Seq != i+1 {
			t.Fatalf("steps out of order: %+v", c.Steps)
		}
	}
}

// TestFilter pins each field of the list's filter.
func TestFilter(t *testing.T) {
	t.Parallel()
	ep := int64(2)
	c := Command{Ref: "h0123", ID: "job-42", Verb: "vm.stop", Actor: "bob", EndpointID: &ep,
		Result: &events.Result{Status: 409, Result: "refused"}}
	tests := []struct {
		f    Filter
		want bool
	}{
		{Filter{}, true},
		{Filter{Verb: "vm.stop"}, true},
		{Filter{Verb: "vm.start"}, false},
		{Filter{State: string(handlers.StateFailed)}, true},
		{Filter{State: string(handlers.StateDone)}, false},
		{Filter{Actor: "bob"}, true},
		{Filter{Actor: "bo"}, false},
		{Filter{Endpoint: "2"}, true},
		{Filter{Endpoint: "1"}, false},
		{Filter{Query: "b-4"}, true},
		{Filter{Query: "h01"}, true},
		{Filter{Query: "nope"}, false},
		{Filter{Verb: "vm.stop", Actor: "alice"}, false},
	}
	for _, tt := range tests {
		if got := tt.f.Match(&c); got != tt.want {
			t.Errorf("%+v.Match = %v, want %v", tt.f, got, tt.want)
		}
	}
	if (Filter{Endpoint: "1"}).Match(&Command{}) {
		t.Error("an endpoint filter matched a command without an endpoint")
	}
}

// TestReplicasInFlight: a replica's in-flight count is the commands without a result whose
// newest event it published; the list is most recently active first.
func TestReplicasInFlight(t *testing.T) {
	t.Parallel()
	ix := newIndex(10)
	applyAll(ix,
		emit(t, "r1", "a", "vm.start", t0, events.Step{Seq: 1, Step: "claim", Status: events.StepStarted, Attempt: 1, At: t0}),
		emit(t, "r2", "b", "vm.start", t0.Add(time.Second), events.Step{Seq: 1, Step: "claim", Status: events.StepStarted, Attempt: 1, At: t0.Add(time.Second)}),
		emit(t, "r2", "c", "vm.start", t0.Add(2*time.Second), events.Result{Status: 200, Result: "started"}),
	)
	reps := ix.Replicas()
	if len(reps) != 2 || reps[0].Instance != "r2" || reps[0].InFlight != 1 || reps[0].Events != 2 || reps[1].InFlight != 1 {
		t.Errorf("replicas = %+v", reps)
	}
}

// TestChangedSince returns just the commands changed after a version.
func TestChangedSince(t *testing.T) {
	t.Parallel()
	ix := newIndex(10)
	applyAll(ix, step(t, "a", 1, "claim", events.StepStarted, 0), step(t, "b", 1, "claim", events.StepStarted, 1))
	v := ix.Version()
	applyAll(ix, step(t, "a", 2, "claim", events.StepDone, 2))
	got, now := ix.ChangedSince(v, Filter{}, 10)
	if len(got) != 1 || got[0].ID != "a" || now != ix.Version() {
		t.Errorf("ChangedSince = %d commands (%v), version %d", len(got), got, now)
	}
}

// TestRowCache: a finished command's rendered row is kept until the command changes; a
// running command's row is never kept (it shows how long it has run so far).
func TestRowCache(t *testing.T) {
	t.Parallel()
	ix := newIndex(10)
	applyAll(ix, step(t, "run", 1, "start_vm", events.StepStarted, 0))
	c, _ := ix.Get("run")
	ix.keepRow(c, "<tr>running</tr>")
	if c, _ := ix.Get("run"); func() bool { _, ok := c.cachedRow(); return ok }() {
		t.Error("a running command's row was kept")
	}
	applyAll(ix, result(t, "run", 200, "started", false, 5))
	c, _ = ix.Get("run")
	ix.keepRow(c, "<tr>done</tr>")
	if c, _ := ix.Get("run"); func() bool { row, ok := c.cachedRow(); return !ok || row != "<tr>done</tr>" }() {
		t.Error("a finished command's row was not kept")
	}
	applyAll(ix, emit(t, "r1", "run", "vm.start", t0, events.JournalRepaired{JournalEntryURL: "http://nb/1", RepairedBy: events.RepairedByRepairer}))
	if c, _ := ix.Get("run"); func() bool { _, ok := c.cachedRow(); return ok }() {
		t.Error("a row was kept across a change of its command")
	}
}

// TestStateIsTheContractState pins the list's states to contract §4 (the rules of
// handlers.StatusOf): a command answered after it waited for approval is rejected, cancelled
// or expired as its result says, never still "approval waiting".
func TestStateIsTheContractState(t *testing.T) {
	t.Parallel()
	waitApproval := func(id string) events.Received {
		at := t0.Add(time.Millisecond)
		return emit(t, "r1", id, "vm.delete", at, events.Step{Seq: 1, Step: "approval", Status: events.StepWaiting, Detail: "awaiting approval", Attempt: 1, At: at})
	}
	answer := func(id string, status int, word, reason string) events.Received {
		return emit(t, "r1", id, "vm.delete", t0.Add(time.Second), events.Result{Status: status, Result: word, Reason: reason})
	}
	for _, tc := range []struct {
		name        string
		evs         func(id string) []events.Received
		want        handlers.State
		wantCurrent string
	}{
		{"awaiting approval", func(id string) []events.Received { return []events.Received{waitApproval(id)} },
			handlers.StateAwaitingApproval, "approval waiting"},
		{"rejected", func(id string) []events.Received {
			return []events.Received{waitApproval(id), answer(id, 403, "refused", handlers.ReasonApprovalRejected)}
		}, handlers.StateRejected, ""},
		{"cancelled", func(id string) []events.Received {
			return []events.Received{waitApproval(id), answer(id, 410, "gone", handlers.ReasonCommandCancelled)}
		}, handlers.StateCancelled, ""},
		{"expired", func(id string) []events.Received {
			return []events.Received{waitApproval(id), answer(id, 410, "gone", handlers.ReasonCommandExpired)}
		}, handlers.StateExpired, ""},
		{"waiting", func(id string) []events.Received {
			return []events.Received{step(t, id, 1, "lease", events.StepWaiting, 1)}
		}, handlers.StateWaiting, "lease waiting"},
		{"running", func(id string) []events.Received {
			return []events.Received{step(t, id, 1, "start_vm", events.StepStarted, 1)}
		}, handlers.StateRunning, "start_vm started"},
		{"done", func(id string) []events.Received {
			return []events.Received{step(t, id, 1, "start_vm", events.StepStarted, 1), result(t, id, 200, "started", false, 2)}
		}, handlers.StateDone, ""},
		{"failed", func(id string) []events.Received {
			return []events.Received{answer(id, 502, "failed", "proxmox_refused")}
		},
			handlers.StateFailed, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ix := newIndex(10)
			applyAll(ix, tc.evs("x")...)
			c, ok := ix.Get("x")
			if !ok {
				t.Fatal("command not indexed")
			}
			if c.State() != tc.want || c.Current() != tc.wantCurrent {
				t.Errorf("state=%q current=%q, want %q and %q", c.State(), c.Current(), tc.want, tc.wantCurrent)
			}
			if f := (Filter{State: string(tc.want)}); !f.Match(&c) {
				t.Errorf("the status filter %q does not match it", tc.want)
			}
		})
	}
}

// TestTarget pins the target column: the guest and node a result's output names, the command
// a decision names, nothing before a result or when the output names neither.
func TestTarget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		output string
		want   string
	}{
		{`{"vmid":101,"name":"web1","node":"pve1","status":"running"}`, "VM 101 (web1) on node pve1"},
		{`{"vmid":9000}`, "VM 9000"},
		{`{"node":"pve2","rebooted":true}`, "node pve2"},
		{`{"command_id":"del-7","command_source":"/netbox","decision":"rejected"}`, "command del-7"},
		{`{"new_vmid":"330","vmid":"330","target_node":"pve2","new_name":"demo-330"}`, "VM 330 (demo-330) on node pve2"},
		{`{"new_vmid":330,"target_node":"pve2"}`, "VM 330 on node pve2"},
		{`{"storage":"pbs1"}`, "storage pbs1"},
		{`{"volid":"local:backup/x"}`, ""},
		{`[1,2]`, ""},
		{``, ""},
	} {
		c := Command{Result: &events.Result{Status: 200, Output: []byte(tc.output)}}
		if got := c.Target(); got != tc.want {
			t.Errorf("output %s: target %q, want %q", tc.output, got, tc.want)
		}
	}
	if got := (Command{}).Target(); got != "" {
		t.Errorf("without a result or a task: target %q", got)
	}
	for _, tc := range []struct {
		upid, want string
	}{
		{"UPID:pve1:0000A1B2:00C3D4E5:67890ABC:qmstart:101:root@pam!proxbus:", "VM 101 on node pve1"},
		{"UPID:pve3:0000A1B2:00C3D4E5:67890ABC:srvreload:networking:root@pam:", "node pve3"},
		{"not a upid", ""},
	} {
		running := Command{Steps: []events.Step{{Step: "start_vm", Status: events.StepStarted, UPID: tc.upid}, {Step: "start_vm", Status: events.StepRunning}}}
		if got := running.Target(); got != tc.want {
			t.Errorf("a running command with task %s: target %q, want %q", tc.upid, got, tc.want)
		}
		failed := running
		failed.Result = &events.Result{Status: 502, Reason: "proxmox_task_failed"}
		if got := failed.Target(); got != tc.want {
			t.Errorf("a failed command with task %s and no output: target %q, want %q", tc.upid, got, tc.want)
		}
	}
}

// TestProxmoxEvents: Proxmox's own events are kept for the Proxmox page, newest first, and
// never make a command of the index, also when they name one.
func TestProxmoxEvents(t *testing.T) {
	t.Parallel()
	ix := newIndex(10)
	em := events.NewEmitter(events.NewSubjects(""), "r1")
	end := t0.Add(time.Minute)
	for _, p := range []events.PVEPayload{
		events.PVETask{EndpointID: 1, UPID: "UPID:a", Type: "qmstart", VMID: 100, User: "proxbus@pve!t", Status: events.PVETaskRunning, StartedAt: t0, ByProxbus: true, CommandID: "cmd-1"},
		events.PVETask{EndpointID: 1, UPID: "UPID:b", Type: "vzdump", VMID: 101, User: "root@pam", Status: events.PVETaskError, ExitStatus: "job errors", StartedAt: t0, EndedAt: &end},
		events.PVEGuest{EndpointID: 2, VMID: 100, Name: "web-01", Change: "migrated", From: "pve1", To: "pve2", At: end},
	} {
		m, err := em.PVEEvent(p)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := events.ParseEvent(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		ix.apply(1, ev)
	}
	got := ix.PVEEvents()
	if len(got) != 3 || got[0].What != "migrated pve1 → pve2" || got[1].What != "error: job errors" || got[2].Command != "cmd-1" || got[2].Subject != "qmstart 100" {
		t.Errorf("events %+v", got)
	}
	if n := len(ix.order); n != 0 {
		t.Errorf("%d commands indexed from Proxmox's events", n)
	}
}
