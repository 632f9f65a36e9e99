package e2e_test

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/testenv"
)

// TestScheduledBackupsSurviveServerAndReplicaLoss runs contract §11 end to end on a
// three-server JetStream cluster (streams R3) with two proxbus replicas: schedule.add makes a
// schedule that backs a container up every second; the server leading PROXBUS_COMMANDS (which
// runs the schedule's timer) is shut down and later restarted, and one replica is stopped while
// firings go on. Then, for every firing (a result with source urn:proxbus:schedule:often):
// its id is often.<firing time>, it has exactly one original result (further copies are
// replays), and the vzdumps Proxmox received number the firings that ran (none ran twice);
// firings go on after each loss; schedule.remove stops them.
//
// The servers are stopped in process (a shutdown, not a SIGKILL) and the replica drains; the
// soak's cluster mode is where processes are killed.
func TestScheduledBackupsSurviveServerAndReplicaLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-server JetStream cluster")
	}
	t.Parallel()
	e := newEnv(t)
	cl := testenv.StartCluster(t, 3)
	nc, js := cl.Connect()
	e.nats = &testenv.NATS{URL: cl.URL, Conn: nc, JS: js}
	e.base.NATSURL = cl.URL
	e.base.Consumer.Replicas = 3
	stopC1 := e.replica("c1")
	e.replica("c2")

	add := events.Command{ID: "add-often", Source: "/test/e2e", Verb: "schedule.add", Actor: "tester",
		Data: json.RawMessage(`{"name":"often","every":"1s","verb":"vm.backup","endpoint_id":1,"data":{"vm":201,"storage":"local"}}`)}
	if res := e.send(add); res.Status != 201 {
		t.Fatalf("schedule.add: %d %s %s", res.Status, res.Reason, res.Detail)
	}
	// firings are the firings' results; while the cluster elects a leader they may not be
	// readable (ok false)
	firingsNow := func() (map[string][]events.Result, bool) {
		msgs, err := e.streamMessagesNow(e.subjects.EventsStream(), e.subjects.EventsFilter())
		if err != nil {
			t.Logf("events not readable yet: %v", err)
			return nil, false
		}
		out := map[string][]events.Result{}
		for _, raw := range msgs {
			var res events.Result
			if ev, err := events.ParseEvent(raw.Data); err != nil || !strings.HasSuffix(raw.Subject, ".result") || json.Unmarshal(ev.Data, &res) != nil {
				continue
			}
			if res.CommandSource == events.ScheduleSource("often") {
				out[res.CommandID] = append(out[res.CommandID], res)
			}
		}
		return out, true
	}
	firings := func() map[string][]events.Result {
		t.Helper()
		var out map[string][]events.Result
		eventually(t, 60*time.Second, "the events stream readable", func() bool { var ok bool; out, ok = firingsNow(); return ok })
		return out
	}
	atLeast := func(n int, what string) {
		t.Helper()
		eventually(t, 60*time.Second, what, func() bool { f, ok := firingsNow(); return ok && len(f) >= n })
	}
	atLeast(3, "three firings")

	stream := e.subjects.CommandsStream()
	leader := cl.WaitStreamLeader(stream)
	t.Logf("shutting down %s, leader of %s, after %d firings", cl.ServerName(leader), stream, len(firings()))
	cl.Stop(leader)
	atLeast(len(firings())+3, "three firings after the stream leader's loss")
	cl.Restart(leader)
	cl.WaitStreamCurrent(stream)
	if err := stopC1(); err != nil {
		t.Errorf("replica c1: %v", err)
	}
	atLeast(len(firings())+3, "three firings after a replica stopped")

	if res := e.send(events.Command{ID: "rm-often", Source: "/test/e2e", Verb: "schedule.remove", Actor: "tester",
		Data: json.RawMessage(`{"name":"often"}`)}); res.Status != 200 {
		t.Fatalf("schedule.remove: %d %s %s", res.Status, res.Reason, res.Detail)
	}
	// a firing stored before the removal may still be answered: wait until the queue is empty
	eventually(t, 30*time.Second, "the commands queue to drain", func() bool { return e.queuedCommands() == 0 })

	got := firings()
	ids := make([]string, 0, len(got))
	ran := 0
	for id, res := range got {
		ids = append(ids, id)
		if !strings.HasPrefix(id, "often.") || len(id) != len("often.20060102T150405Z") {
			t.Errorf("firing id %q, want often.<firing time>", id)
		}
		orig := 0
		for _, r := range res {
			if !r.Replayed {
				orig++
				if r.Status == 201 {
					ran++
				}
			}
		}
		if orig != 1 {
			t.Errorf("firing %s: %d original results, want exactly 1 (%+v)", id, orig, res)
		}
	}
	if n := vzdumpPOSTs(e); n != ran {
		t.Errorf("vzdumps = %d, want %d: one per firing that ran", n, ran)
	}
	sort.Strings(ids)
	gaps := 0
	for i := 1; i < len(ids); i++ {
		a, _ := time.Parse(events.FiringTimeLayout, strings.TrimPrefix(ids[i-1], "often."))
		b, _ := time.Parse(events.FiringTimeLayout, strings.TrimPrefix(ids[i], "often."))
		if b.Sub(a) > time.Second {
			gaps++
		}
	}
	t.Logf("%d firings (%d ran, the rest answered otherwise), %d gaps of more than a second between consecutive firings (server loss)", len(ids), ran, gaps)
}
