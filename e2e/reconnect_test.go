package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/embedded"
	"github.com/proxbus/proxbus/internal/testenv"
)

// Issue 5, reconnects: a NATS restart, a Redis outage, and NetBox and Proxmox outages lose no
// command, write nothing to Proxmox twice, and (for the outages) are visible as `retrying` step
// events while the command waits.

// TestNATSRestartMidLoad restarts the NATS server (same port, same JetStream store) while
// commands are in flight and more are published after it: the replica's consumer resumes,
// every command gets exactly one (non-replayed) result, and each storage is POSTed once.
func TestNATSRestartMidLoad(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rn := startRestartableNATS(t)
	rn.attach(e)
	e.pve.SetLatency(25 * time.Millisecond) // keep commands in flight across the restart
	e.start()

	const n = 24
	cmds := make([]events.Command, n)
	for i := range cmds {
		cmds[i] = e.command(pbs(fmt.Sprintf("pbs-nr-%02d", i)))
	}
	for _, c := range cmds[:n/2] {
		e.publish(c)
	}
	eventually(t, 15*time.Second, "the first Proxmox write before the restart", func() bool {
		return e.pve.Requests("POST", "/storage") > 0
	})
	t.Logf("restarting NATS after %d of %d published commands' Proxmox writes", e.pve.Requests("POST", "/storage"), n/2)
	rn.restart(300 * time.Millisecond)
	for _, c := range cmds[n/2:] {
		e.publish(c)
	}

	for _, c := range cmds {
		if r := e.result(c); r.Status != 201 || r.Result != "created" {
			t.Errorf("%s: result %d %s %s, want 201 created", c.ID, r.Status, r.Result, r.Reason)
		}
	}
	// Exactly one result event per command: when its first publish failed during the restart,
	// the redelivery's replay (same event id) is the one.
	for _, c := range cmds {
		if got := len(e.resultsOf(c)); got != 1 || e.originalResults(c) > 1 {
			t.Errorf("%s: %d result events (%d original), want exactly 1", c.ID, got, e.originalResults(c))
		}
	}
	if got := e.pve.Requests("POST", "/storage"); got != n {
		t.Errorf("POST /storage = %d, want %d (one per command, none twice)", got, n)
	}
	for i := range cmds {
		if _, ok := e.pve.StorageConfig(fmt.Sprintf("pbs-nr-%02d", i)); !ok {
			t.Errorf("storage pbs-nr-%02d was not created", i)
		}
	}
	entries := e.netbox.JournalEntries()
	if len(entries) != n {
		t.Errorf("journal entries = %d, want %d (one per command)", len(entries), n)
	}
	for _, en := range entries {
		if en.Kind != "success" {
			t.Errorf("journal entry %d kind %s, want success (none left in progress)", en.ID, en.Kind)
		}
	}
	if !strings.Contains(e.logs.String(), "nats reconnected") {
		t.Error("the replica never logged a NATS reconnect: the restart did not reach it")
	}
}

// TestRedisOutageWaits stops the store (an embedded Redis restarted on the same address after a
// pause longer than every redelivery backoff together): commands published meanwhile are not
// answered and stay in the work queue, and all complete once the store returns.
func TestRedisOutageWaits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mr, err := embedded.StartRedis()
	if err != nil {
		t.Fatalf("embedded redis: %v", err)
	}
	t.Cleanup(mr.Close)
	addr := mr.Addr()
	e.base.RedisURL = "redis://" + addr
	e.start()

	warm := e.send(e.command(pbs("pbs-ro-warm")))
	if warm.Status != 201 {
		t.Fatalf("before the outage: %+v", warm)
	}
	mr.Close()

	cmds := []events.Command{e.command(pbs("pbs-ro-1")), e.command(pbs("pbs-ro-2")), e.command(pbs("pbs-ro-3"))}
	for _, c := range cmds {
		e.publish(c)
	}
	// Watch the outage for longer than the redeliveries' backoffs together, the ack wait and the
	// Redis client's own dial retries: nothing may be answered or acked meanwhile.
	outageEnd := time.Now().Add(4 * time.Second)
	for time.Now().Before(outageEnd) {
		for _, c := range cmds {
			if res := e.resultsOf(c); len(res) > 0 {
				t.Fatalf("%s was answered while the store was down: %d %s %s (delivery exhausted instead of waiting)", c.ID, res[0].Status, res[0].Result, res[0].Reason)
			}
		}
		if got := e.queuedCommands(); got != uint64(len(cmds)) {
			t.Fatalf("commands in the work queue during the outage = %d, want %d (nothing acked)", got, len(cmds))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := e.pve.Requests("POST", "/storage"); got != 1 {
		t.Fatalf("POST /storage during the outage = %d, want 1 (the warm-up only)", got)
	}

	back := miniredis.NewMiniRedis()
	if err := back.StartAddr(addr); err != nil {
		t.Fatalf("restart redis on %s: %v", addr, err)
	}
	t.Cleanup(back.Close)

	for _, c := range cmds {
		if r := e.result(c); r.Status != 201 || r.Result != "created" || r.Replayed {
			t.Errorf("%s after the outage: %d %s %s replayed=%v, want 201 created", c.ID, r.Status, r.Result, r.Reason, r.Replayed)
		}
	}
	if got := e.pve.Requests("POST", "/storage"); got != 1+len(cmds) {
		t.Errorf("POST /storage = %d, want %d (one per command)", got, 1+len(cmds))
	}
	eventually(t, 5*time.Second, "an empty work queue", func() bool { return e.queuedCommands() == 0 })
}

// TestUpstreamOutagesRetried takes NetBox, then Proxmox, away while a command runs: the
// transient failure is redelivered with backoff, each redelivery announced as a `retrying` step
// event, and once the upstream is back the command completes with one POST and one finalized
// journal entry.
func TestUpstreamOutagesRetried(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// down takes the upstream away (true) or brings it back (false).
		down func(e *env, down bool)
	}{
		{"netbox", func(e *env, down bool) { e.netbox.SetDown(down) }},
		{"proxmox", func(e *env, down bool) { e.pve.SetUnreachable(down) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.start()
			// A first command warms the endpoint cache, so the outage hits the command's own
			// NetBox and Proxmox calls rather than only the gate.
			if r := e.send(e.command(pbs("pbs-up-warm"))); r.Status != 201 {
				t.Fatalf("warm-up: %+v", r)
			}

			tt.down(e, true)
			cmd := e.command(pbs("pbs-up"))
			e.publish(cmd)
			eventually(t, 10*time.Second, "a retrying step event", func() bool {
				return slices.ContainsFunc(e.steps(cmd), func(s events.Step) bool { return s.Status == events.StepRetrying })
			})
			if res := e.resultsOf(cmd); len(res) > 0 {
				t.Fatalf("answered during the outage: %d %s %s", res[0].Status, res[0].Result, res[0].Reason)
			}
			tt.down(e, false)

			r := e.result(cmd)
			if r.Status != 201 || r.Result != "created" || !r.Finalized() {
				t.Fatalf("after the outage: %+v", r)
			}
			steps := e.steps(cmd)
			retrying, seqs := 0, map[int]bool{}
			for _, s := range steps {
				if s.Status == events.StepRetrying {
					retrying++
				}
				if seqs[s.Seq] {
					t.Errorf("step seq %d repeated: %+v", s.Seq, steps)
				}
				seqs[s.Seq] = true
			}
			if retrying == 0 {
				t.Errorf("no retrying step among %+v", steps)
			}
			if got := e.pve.Requests("POST", "/storage"); got != 2 {
				t.Errorf("POST /storage = %d, want 2 (warm-up and the command, once)", got)
			}
			entries := e.netbox.JournalEntries()
			if len(entries) != 2 {
				t.Errorf("journal entries = %d, want 2 (one per command, no orphan)", len(entries))
			}
			for _, en := range entries {
				if en.Kind != "success" {
					t.Errorf("journal entry %d kind %s, want success", en.ID, en.Kind)
				}
			}
		})
	}
}

// originalResults counts the command's result events that are not replays.
func (e *env) originalResults(cmd events.Command) int {
	e.t.Helper()
	n := 0
	for _, res := range e.resultsOf(cmd) {
		if !res.Replayed {
			n++
		}
	}
	return n
}

// resultsOf returns every result event of the command stored so far, in order.
func (e *env) resultsOf(cmd events.Command) []events.Result {
	e.t.Helper()
	var out []events.Result
	for _, raw := range e.streamMessages(e.subjects.EventsStream(), e.subjects.Result(cmd.Ref())) {
		ev, err := events.ParseEvent(raw.Data)
		if err != nil {
			e.t.Fatalf("result not parseable: %v", err)
		}
		var res events.Result
		if err := json.Unmarshal(ev.Data, &res); err != nil {
			e.t.Fatalf("result not JSON: %v", err)
		}
		out = append(out, res)
	}
	return out
}

// queuedCommands is the number of messages in the commands work queue (unacked or undelivered).
func (e *env) queuedCommands() uint64 {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := e.nats.JS.Stream(ctx, e.subjects.CommandsStream())
	if err != nil {
		e.t.Fatalf("commands stream: %v", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		e.t.Fatalf("commands stream info: %v", err)
	}
	return info.State.Msgs
}

// restartableNATS is an embedded JetStream server that can be stopped and started again on the
// same port and store directory, as an operator's restart would.
type restartableNATS struct {
	t    *testing.T
	opts embedded.NATSOptions
	url  string
	nc   *nats.Conn

	mu  sync.Mutex
	srv *server.Server
}

func startRestartableNATS(t *testing.T) *restartableNATS {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	rn := &restartableNATS{t: t, opts: embedded.NATSOptions{Host: "127.0.0.1", Port: port, StoreDir: t.TempDir(), MaxPayload: 4 << 20}}
	rn.start()
	t.Cleanup(rn.stop)
	rn.url = fmt.Sprintf("nats://127.0.0.1:%d", port)
	nc, err := nats.Connect(rn.url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect nats: %v", err)
	}
	t.Cleanup(nc.Close)
	rn.nc = nc
	return rn
}

// attach makes the environment (its replicas and its publishing client) use this server.
func (rn *restartableNATS) attach(e *env) {
	rn.t.Helper()
	js, err := jetstream.New(rn.nc)
	if err != nil {
		rn.t.Fatalf("jetstream: %v", err)
	}
	e.nats = &testenv.NATS{Server: rn.srv, URL: rn.url, Conn: rn.nc, JS: js}
	e.base.NATSURL = rn.url
}

func (rn *restartableNATS) start() {
	rn.t.Helper()
	srv, err := embedded.StartNATS(rn.opts)
	if err != nil {
		rn.t.Fatalf("start nats on port %d: %v", rn.opts.Port, err)
	}
	rn.mu.Lock()
	rn.srv = srv
	rn.mu.Unlock()
}

func (rn *restartableNATS) stop() {
	rn.mu.Lock()
	srv := rn.srv
	rn.srv = nil
	rn.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// restart stops the server, waits pause, and starts it again on the same port and store; it
// returns once the test's client is connected again.
func (rn *restartableNATS) restart(pause time.Duration) {
	rn.t.Helper()
	rn.stop()
	time.Sleep(pause)
	rn.start()
	eventually(rn.t, 10*time.Second, "the test client to reconnect", rn.nc.IsConnected)
}
