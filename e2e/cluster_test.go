package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
	"github.com/proxbus/proxbus/internal/testenv"
)

// Issue 7, clustered broker: proxbus on a three-server JetStream cluster with R3 streams keeps
// processing through the loss of one server (the commands stream's leader), with no lost
// command and no duplicate effect.

// clusterCommand is one command of the cluster test and what it must come to.
type clusterCommand struct {
	cmd        events.Command
	wantStatus int
	wantResult string
	// effectPath is the path of the one POST the command makes to Proxmox; for a storage,
	// the POST /storage whose storage parameter is effectStorage.
	effectPath    string
	effectStorage string
}

// TestClusterSurvivesServerLoss runs two proxbus replicas against a three-server JetStream
// cluster (streams R3) and publishes 200 commands at a steady pace: storage.pbs.create with
// distinct storages, vm.start on distinct stopped VMs and vm.stop on distinct running VMs. The
// server leading PROXBUS_COMMANDS is shut down in the middle of it; publishing goes on,
// retrying a failed publish with the same Nats-Msg-Id (JetStream dedupes it).
//
// Then, for every command:
//   - its result events (PROXBUS_EVENTS, `<ref>.result`) number at least one and every copy
//     carries the expected status and result;
//   - at most one of them is an original (`replayed:false`): any further copy is a replay of the
//     stored record (`replayed:true`), which the dedupe window normally absorbs (same event id);
//     a command may have a replay only, when the original's publish was lost with the server;
//   - its Proxmox write happened exactly once (POST /storage once per storage, one POST of the
//     power action per VM, one Proxmox task per VM), and the guest or storage is in the end state;
//   - one journal entry, finalized.
//
// These are checked once the killed server is back and current on every stream and the durable
// consumer holds no command undelivered or unacknowledged (within ten AckWaits): an
// acknowledgement lost with the server leaves its command pending (the delivery is at least
// once) until AckWait brings it back to a replica, which answers it again as a replay and
// acknowledges it.
func TestClusterSurvivesServerLoss(t *testing.T) {
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
	e.pve.SetLatency(5 * time.Millisecond) // keep commands in flight when the server goes away

	const (
		nStorages = 120
		nStarts   = 40
		nStops    = 40
		total     = nStorages + nStarts + nStops
	)
	var cmds []clusterCommand
	for i := range nStorages {
		storage := fmt.Sprintf("pbs-cl-%03d", i)
		cmds = append(cmds, clusterCommand{cmd: e.command(pbs(storage)), wantStatus: 201, wantResult: "created",
			effectPath: "/storage", effectStorage: storage})
	}
	for i := range nStarts {
		vmid := int64(6000 + i)
		e.pve.AddGuest(simpve.GuestSpec{VMID: vmid, Node: "pve1", Name: fmt.Sprintf("cl-start-%d", i), Status: "stopped"})
		cmds = append(cmds, clusterCommand{cmd: e.guestCommand("vm.start", fmt.Sprintf(`{"vm":%d}`, vmid)), wantStatus: 200, wantResult: "ok",
			effectPath: fmt.Sprintf("/nodes/pve1/qemu/%d/status/start", vmid)})
	}
	for i := range nStops {
		vmid := int64(6100 + i)
		e.pve.AddGuest(simpve.GuestSpec{VMID: vmid, Node: "pve2", Name: fmt.Sprintf("cl-stop-%d", i), Status: "running"})
		cmds = append(cmds, clusterCommand{cmd: e.guestCommand("vm.stop", fmt.Sprintf(`{"vm":%d}`, vmid)), wantStatus: 200, wantResult: "ok",
			effectPath: fmt.Sprintf("/nodes/pve2/qemu/%d/status/shutdown", vmid)})
	}
	// Interleave the three kinds so each is in flight when the server goes away.
	queues := [][]clusterCommand{cmds[:nStorages], cmds[nStorages : nStorages+nStarts], cmds[nStorages+nStarts:]}
	order := make([]clusterCommand, 0, total)
	for len(order) < total {
		for q := range queues {
			if len(queues[q]) > 0 {
				order = append(order, queues[q][0])
				queues[q] = queues[q][1:]
			}
		}
	}

	e.replica("c1")
	e.replica("c2")
	stream := e.subjects.CommandsStream()
	for _, name := range []string{stream, e.subjects.EventsStream()} {
		replicas, err := streamReplicas(e, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		if replicas != 3 {
			t.Fatalf("stream %s has %d replicas, want 3", name, replicas)
		}
	}

	killed := -1
	for i, c := range order {
		if i == total/2 {
			killed = cl.WaitStreamLeader(stream)
			t.Logf("shutting down %s, leader of %s, after %d of %d commands were published and %d results given",
				cl.ServerName(killed), stream, i, total, len(e.allResults()))
			cl.Stop(killed)
		}
		publishRetrying(t, e, c.cmd)
		time.Sleep(5 * time.Millisecond) // a steady pace, not a burst
	}

	for _, c := range order {
		_ = e.result(c.cmd) // every command is answered
	}

	// The lost server comes back and catches up with what was written without it. The durable
	// must then hold no command undelivered or unacknowledged: an ack lost with the server
	// brings its command back after AckWait, to be answered again as a replay and acked.
	cl.Restart(killed)
	for _, name := range []string{stream, e.subjects.EventsStream(), e.subjects.DLQStream()} {
		cl.WaitStreamCurrent(name)
	}
	since := time.Now()
	pending, unacked, err := durableBacklog(e)
	for drain := since.Add(10 * e.base.Consumer.AckWait); (err != nil || pending+uint64(unacked) != 0) && time.Now().Before(drain); {
		time.Sleep(50 * time.Millisecond)
		pending, unacked, err = durableBacklog(e)
	}
	if err != nil || pending != 0 || unacked != 0 {
		t.Errorf("after %s the durable still has %d commands undelivered and %d unacknowledged (%v), want none; %s",
			time.Since(since).Round(time.Millisecond), pending, unacked, err, queueState(e))
	} else if n := e.queuedCommands(); n != 0 {
		// Every command is acknowledged; removing an acked message from a clustered work queue
		// is the server's own proposal, which a leader lost at the wrong moment can leave undone.
		t.Logf("%d acknowledged commands are still stored in the work queue: %s", n, queueState(e))
	}

	posts := map[string]int{} // path?storage → POSTs that reached Proxmox
	for _, r := range e.pve.RequestLog() {
		if r.Method == "POST" {
			posts[r.Path+"?"+r.Params.Get("storage")]++
		}
	}
	results := e.allResults() // one pass over the events stream
	originals, replays := 0, 0
	for _, c := range order {
		res := results[e.subjects.Result(c.cmd.Ref())]
		if len(res) == 0 {
			t.Errorf("%s %s: no result event", c.cmd.Verb, c.cmd.ID)
		}
		orig := 0
		for _, r := range res {
			if r.Status != c.wantStatus || r.Result != c.wantResult {
				t.Errorf("%s %s: result %d %s %s, want %d %s", c.cmd.Verb, c.cmd.ID, r.Status, r.Result, r.Reason, c.wantStatus, c.wantResult)
			}
			if r.Replayed {
				replays++
			} else {
				orig++
			}
		}
		originals += orig
		if orig > 1 {
			t.Errorf("%s %s: %d original results, want at most 1 (further copies must be replays)", c.cmd.Verb, c.cmd.ID, orig)
		}
		if n := posts[c.effectPath+"?"+c.effectStorage]; n != 1 {
			t.Errorf("%s %s: POST %s %s = %d, want exactly 1", c.cmd.Verb, c.cmd.ID, c.effectPath, c.effectStorage, n)
		}
	}
	t.Logf("%d commands: %d original results, %d replays; replicas reconnected %d times", total, originals, replays,
		strings.Count(e.logs.String(), "nats reconnected"))

	if got := e.pve.Requests("POST", "/storage"); got != nStorages {
		t.Errorf("POST /storage = %d, want %d (one per distinct storage)", got, nStorages)
	}
	for i := range nStorages {
		if _, ok := e.pve.StorageConfig(fmt.Sprintf("pbs-cl-%03d", i)); !ok {
			t.Errorf("storage pbs-cl-%03d was not created", i)
		}
	}
	tasks := map[int64]int{}
	for _, tk := range e.pve.Tasks() {
		tasks[tk.VMID]++
	}
	for vmid, want := range guestEndStates(nStarts, nStops) {
		g, ok := e.pve.Guest(vmid)
		if !ok || g.Status != want {
			t.Errorf("guest %d: status %q (found %v), want %s", vmid, g.Status, ok, want)
		}
		if tasks[vmid] != 1 {
			t.Errorf("guest %d: %d Proxmox tasks, want exactly 1", vmid, tasks[vmid])
		}
	}
	entries := e.netbox.JournalEntries()
	if len(entries) != total {
		t.Errorf("journal entries = %d, want %d (one per command)", len(entries), total)
	}
	for _, en := range entries {
		if en.Kind != "success" && en.Kind != "info" {
			t.Errorf("journal entry %d kind %s, want a finalized success or info", en.ID, en.Kind)
		}
	}
}

// durableInfo asks the cluster where the durable consumer of the commands stream stands.
func durableInfo(e *env) (*jetstream.ConsumerInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cons, err := e.nats.JS.Consumer(ctx, e.subjects.CommandsStream(), consumer.DefaultDurable)
	if err != nil {
		return nil, fmt.Errorf("durable: %w", err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("durable info: %w", err)
	}
	return info, nil
}

// durableBacklog returns how many commands the durable consumer has not delivered yet and how
// many it delivered without an acknowledgement, or why it could not be asked.
func durableBacklog(e *env) (pending uint64, unacked int, err error) {
	info, err := durableInfo(e)
	if err != nil {
		return 0, 0, err
	}
	return info.NumPending, info.NumAckPending, nil
}

// queueState describes what is left in the commands stream and where the durable consumer
// stands, for a failure message.
func queueState(e *env) string {
	e.t.Helper()
	var b strings.Builder
	for _, m := range e.streamMessages(e.subjects.CommandsStream(), "") {
		fmt.Fprintf(&b, "left: seq %d %s (Nats-Msg-Id %s); ", m.Sequence, m.Subject, m.Header.Get(nats.MsgIdHdr))
	}
	info, err := durableInfo(e)
	if err != nil {
		return b.String() + err.Error()
	}
	fmt.Fprintf(&b, "consumer: delivered %d, ack floor %d, ack pending %d, pending %d, redelivered %d",
		info.Delivered.Stream, info.AckFloor.Stream, info.NumAckPending, info.NumPending, info.NumRedelivered)
	return b.String()
}

// guestEndStates is the status every VM of the cluster test must end in.
func guestEndStates(nStarts, nStops int) map[int64]string {
	out := map[int64]string{}
	for i := range nStarts {
		out[int64(6000+i)] = "running"
	}
	for i := range nStops {
		out[int64(6100+i)] = "stopped"
	}
	return out
}

// allResults reads every result event of the events stream once, by subject, in order.
func (e *env) allResults() map[string][]events.Result {
	e.t.Helper()
	out := map[string][]events.Result{}
	for _, raw := range e.streamMessages(e.subjects.EventsStream(), e.subjects.EventsFilter()) {
		if !strings.HasSuffix(raw.Subject, ".result") {
			continue
		}
		ev, err := events.ParseEvent(raw.Data)
		if err != nil {
			e.t.Fatalf("result not parseable: %v", err)
		}
		var res events.Result
		if err := json.Unmarshal(ev.Data, &res); err != nil {
			e.t.Fatalf("result not JSON: %v", err)
		}
		out[raw.Subject] = append(out[raw.Subject], res)
	}
	return out
}

// streamReplicas returns the replica count of stream, as the cluster reports it.
func streamReplicas(e *env, name string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := e.nats.JS.Stream(ctx, name)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.Config.Replicas, nil
}

// publishRetrying publishes cmd in binary mode until JetStream acknowledges it. A publish can
// fail while a stream leader is being elected; it is retried with the same message (so the
// same Nats-Msg-Id), which JetStream dedupes when an earlier attempt was stored after all.
func publishRetrying(t *testing.T, e *env, cmd events.Command) {
	t.Helper()
	msg, err := events.EncodeBinary(e.subjects, cmd)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := e.nats.JS.PublishMsg(ctx, msg)
		cancel()
		if err == nil {
			if attempt > 1 {
				t.Logf("%s published on attempt %d", cmd.ID, attempt)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("publish %s: still failing after %d attempts: %v", cmd.ID, attempt, err)
		}
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrNoResponders) {
			t.Logf("publish %s attempt %d: %v", cmd.ID, attempt, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
