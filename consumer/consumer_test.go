package consumer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/testenv"
)

// TestAckOnlyAfterHandleReturnsAck: while Handle blocks the message stays pending (not acked,
// not removed); once it returns Ack the message is acked and removed from the work queue.
func TestAckOnlyAfterHandleReturnsAck(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	entered := make(chan struct{})
	release := make(chan struct{})
	h := &recorder{answer: func(context.Context, events.Command, events.Delivery) events.Disposition {
		close(entered)
		<-release
		return events.Disposition{Action: events.Ack}
	}}
	e.start(t, h)
	e.publish(t, binaryCommand(e.s, "vm.start", "c1", `{"vm":"100"}`))

	<-entered
	info := e.consumerInfo(t)
	if info.NumAckPending != 1 || info.AckFloor.Stream != 0 {
		t.Errorf("while handling: ack pending %d, ack floor %d; want 1, 0", info.NumAckPending, info.AckFloor.Stream)
	}
	if n := e.streamMsgs(t, e.s.CommandsStream()); n != 1 {
		t.Errorf("while handling: %d messages in the work queue, want 1", n)
	}
	close(release)
	eventually(t, 5*time.Second, "ack", func() bool { return e.streamMsgs(t, e.s.CommandsStream()) == 0 })
	if info := e.consumerInfo(t); info.NumAckPending != 0 || info.AckFloor.Stream != 1 {
		t.Errorf("after ack: ack pending %d, ack floor %d; want 0, 1", info.NumAckPending, info.AckFloor.Stream)
	}
	if got := h.ids(); len(got) != 1 || got[0] != "c1" {
		t.Errorf("handled %v, want [c1]", got)
	}
}

// TestHeartbeatKeepsSlowHandlerAlive: a handler that runs 2.5 AckWaits is not redelivered
// while it runs, because InProgress is sent every Heartbeat.
func TestHeartbeatKeepsSlowHandlerAlive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) {
		c.AckWait = time.Second
		c.Heartbeat = 300 * time.Millisecond
	})
	h := &recorder{answer: func(context.Context, events.Command, events.Delivery) events.Disposition {
		time.Sleep(2500 * time.Millisecond)
		return events.Disposition{Action: events.Ack}
	}}
	e.start(t, h)
	e.publish(t, binaryCommand(e.s, "vm.start", "slow", `{}`))
	eventually(t, 10*time.Second, "ack", func() bool { return e.streamMsgs(t, e.s.CommandsStream()) == 0 })
	if d := h.seen(); len(d) != 1 || d[0].Number != 1 {
		t.Errorf("deliveries = %+v, want one first delivery", d)
	}
	if info := e.consumerInfo(t); info.NumRedelivered != 0 {
		t.Errorf("redelivered %d, want 0", info.NumRedelivered)
	}
}

// TestRedeliverSpendsNothing: a command redelivered 20 times by its handler (waiting, with
// or without a delay) is never dead-lettered nor dropped by JetStream: it is handled on its
// 21st delivery and acked. Every delivery carries the same stream sequence and stored time,
// and its number.
func TestRedeliverSpendsNothing(t *testing.T) {
	t.Parallel()
	const redeliveries = 20
	tests := []struct {
		name  string
		delay time.Duration
	}{
		{"nak at once", 0},
		{"with delay", 5 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			h := &recorder{answer: func(_ context.Context, _ events.Command, d events.Delivery) events.Disposition {
				if d.Number <= redeliveries {
					return events.Disposition{Action: events.Redeliver, Delay: tt.delay}
				}
				return events.Disposition{Action: events.Ack}
			}}
			e.start(t, h)
			seq := e.publish(t, binaryCommand(e.s, "vm.stop", "waits", `{}`))
			eventually(t, 20*time.Second, "acked on the last delivery", func() bool {
				return h.count() == redeliveries+1 && e.streamMsgs(t, e.s.CommandsStream()) == 0
			})

			st, err := e.js.Stream(ctxT(t), e.s.CommandsStream())
			if err != nil {
				t.Fatal(err)
			}
			if st.CachedInfo().State.LastSeq != seq {
				t.Fatalf("stream last seq %d, want %d", st.CachedInfo().State.LastSeq, seq)
			}
			seen := h.seen()
			for i, d := range seen {
				if d.Number != uint64(i+1) || d.StreamSeq != seq || !d.Stored.Equal(seen[0].Stored) || d.Stored.IsZero() {
					t.Errorf("delivery %d = %+v, want number %d, stream seq %d, stored %v", i, d, i+1, seq, seen[0].Stored)
				}
			}
			if dl := e.deadLetters(t); len(dl) != 0 {
				t.Errorf("%d dead letters, want 0", len(dl))
			}
		})
	}
}

// TestConcurrencyIsBounded: with Concurrency 3 and a MaxAckPending that lets the server
// deliver all 12 commands to this process at once, never more than 3 Handle calls run at the
// same time, and every command is handled exactly once.
func TestConcurrencyIsBounded(t *testing.T) {
	t.Parallel()
	const n = 12
	e := newEnv(t, func(c *Config) {
		c.Concurrency = 3
		c.MaxAckPending = n
		c.FetchBatch = n
		c.AckWait = 10 * time.Second
	})
	var cur, peak atomic.Int32
	release := make(chan struct{})
	h := &recorder{answer: func(context.Context, events.Command, events.Delivery) events.Disposition {
		now := cur.Add(1)
		for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
		}
		<-release
		cur.Add(-1)
		return events.Disposition{Action: events.Ack}
	}}
	for i := range n {
		e.publish(t, binaryCommand(e.s, "vm.start", fmt.Sprintf("c%d", i), `{}`))
	}
	e.start(t, h)
	releaseAll := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseAll) // before the consumer's cleanup stops it
	// Every command is delivered to this process while the handlers block: those without a
	// worker wait in the iterator.
	eventually(t, 10*time.Second, "all delivered, three handling", func() bool {
		return e.consumerInfo(t).NumAckPending == n && cur.Load() >= 3
	})
	releaseAll()
	eventually(t, 20*time.Second, "all handled", func() bool { return e.streamMsgs(t, e.s.CommandsStream()) == 0 })
	if p := peak.Load(); p != 3 {
		t.Errorf("peak concurrency %d, want 3", p)
	}
	seen := map[string]int{}
	for _, id := range h.ids() {
		seen[id]++
	}
	if len(seen) != n {
		t.Errorf("handled %d distinct commands, want %d", len(seen), n)
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("%s handled %d times", id, k)
		}
	}
}

// TestDrainFinishesInFlightCommands: cancelling Run while two handlers are mid-way lets both
// finish (past AckWait, kept alive by heartbeats) and applies their dispositions; Run returns
// nil; nothing is redelivered.
func TestDrainFinishesInFlightCommands(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		disposition events.Disposition
		wantDLQ     int
	}{
		{"ack", events.Disposition{Action: events.Ack}, 0},
		{"dead letter", events.Disposition{Action: events.DeadLetter, Reason: "attempts_exhausted"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, func(c *Config) {
				c.AckWait = time.Second
				c.Heartbeat = 200 * time.Millisecond
			})
			var started sync.WaitGroup
			started.Add(2)
			var cancelled, finished atomic.Int32
			h := &recorder{answer: func(ctx context.Context, _ events.Command, _ events.Delivery) events.Disposition {
				started.Done()
				<-ctx.Done() // the drain began
				cancelled.Add(1)
				// Irreversible work continues without cancellation, past AckWait.
				time.Sleep(1500 * time.Millisecond)
				finished.Add(1)
				return tt.disposition
			}}
			r := e.start(t, h)
			e.publish(t, binaryCommand(e.s, "vm.start", "d1", `{}`))
			e.publish(t, binaryCommand(e.s, "vm.start", "d2", `{}`))
			started.Wait()

			if err := r.stop(); err != nil {
				t.Fatalf("Run = %v, want nil after a clean drain", err)
			}
			if r.c.Ready() {
				t.Error("Ready after Run returned")
			}
			if got := cancelled.Load(); got != 2 {
				t.Errorf("%d handlers saw the drain, want 2", got)
			}
			if got := finished.Load(); got != 2 {
				t.Errorf("Run returned with %d of 2 handlers finished", got)
			}
			// An ack is confirmed before Run returns; a term is sent, and applied by the
			// server a moment later.
			eventually(t, 10*time.Second, "both commands settled", func() bool {
				return e.streamMsgs(t, e.s.CommandsStream()) == 0
			})
			if n := len(e.deadLetters(t)); n != tt.wantDLQ {
				t.Errorf("%d dead letters, want %d", n, tt.wantDLQ)
			}
			info := e.consumerInfo(t)
			if info.NumAckPending != 0 || info.NumRedelivered != 0 {
				t.Errorf("ack pending %d redelivered %d, want 0 0", info.NumAckPending, info.NumRedelivered)
			}
			if h.count() != 2 {
				t.Errorf("handled %d times, want 2", h.count())
			}
		})
	}
}

// TestTwoConsumersShareTheDurable: two Consumers on the same durable split the commands;
// each command is handled exactly once overall.
func TestTwoConsumersShareTheDurable(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	e := provisioned(t, n.JS, func(c *Config) { c.Concurrency = 2; c.MaxAckPending = 4 })
	var mu sync.Mutex
	by := map[string][]string{}
	mk := func(name string) Handler {
		return HandlerFunc(func(_ context.Context, cmd events.Command, _ events.Delivery) events.Disposition {
			mu.Lock()
			by[name] = append(by[name], cmd.ID)
			mu.Unlock()
			time.Sleep(50 * time.Millisecond)
			return events.Disposition{Action: events.Ack}
		})
	}
	e.start(t, mk("a"))
	// The second replica has its own connection, as a second process would.
	e2 := &env{js: testenvConn(t, n.URL), cfg: e.cfg, s: e.s}
	e2.start(t, mk("b"))
	for i := range 20 {
		e.publish(t, binaryCommand(e.s, "vm.start", fmt.Sprintf("s%d", i), `{}`))
	}
	eventually(t, 20*time.Second, "all handled", func() bool { return e.streamMsgs(t, e.s.CommandsStream()) == 0 })
	mu.Lock()
	defer mu.Unlock()
	if len(by["a"]) == 0 || len(by["b"]) == 0 {
		t.Errorf("work not shared: a=%d b=%d", len(by["a"]), len(by["b"]))
	}
	seen := map[string]int{}
	for _, ids := range by {
		for _, id := range ids {
			seen[id]++
		}
	}
	if len(seen) != 20 {
		t.Errorf("%d distinct commands handled, want 20", len(seen))
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("%s handled %d times", id, c)
		}
	}
}

// TestHandlerPanicIsRedelivered: a panicking handler does not crash the process; its message
// comes back and is acked on the next delivery.
func TestHandlerPanicIsRedelivered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	h := &recorder{answer: func(_ context.Context, _ events.Command, d events.Delivery) events.Disposition {
		if d.Number == 1 {
			panic("boom")
		}
		return events.Disposition{Action: events.Ack}
	}}
	e.start(t, h)
	e.publish(t, binaryCommand(e.s, "vm.start", "p1", `{}`))
	eventually(t, 10*time.Second, "acked on redelivery", func() bool {
		return h.count() == 2 && e.streamMsgs(t, e.s.CommandsStream()) == 0
	})
	if d := h.seen(); d[1].Number != 2 {
		t.Errorf("second delivery number %d, want 2", d[1].Number)
	}
	if dl := e.deadLetters(t); len(dl) != 0 {
		t.Errorf("%d dead letters, want 0", len(dl))
	}
}

// TestRunErrors: Run refuses to start without the durable, and refuses a second Run.
func TestRunErrors(t *testing.T) {
	t.Parallel()
	t.Run("not provisioned", func(t *testing.T) {
		t.Parallel()
		n := testenv.StartNATS(t)
		c, err := New(n.JS, testConfig(), &recorder{}, NewPublisher(n.JS, events.NewEmitter(events.NewSubjects("proxbus"), "t")))
		if err != nil {
			t.Fatal(err)
		}
		err = c.Run(ctxT(t))
		if !errors.Is(err, jetstream.ErrStreamNotFound) && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Errorf("Run = %v, want stream/consumer not found", err)
		}
		if c.Ready() {
			t.Error("Ready after failed Run")
		}
	})
	t.Run("already running", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, nil)
		r := e.start(t, &recorder{})
		if err := r.c.Run(ctxT(t)); !errors.Is(err, ErrAlreadyRunning) {
			t.Errorf("second Run = %v, want ErrAlreadyRunning", err)
		}
	})
}

// testenvConn opens another connection to the same server.
func testenvConn(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := natsConnect(url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return js
}

// TestReadyFollowsTheServer: Ready turns false while the server is away and true again once
// it is back, and the consumer then pulls again: a command published after the restart is
// handled.
func TestReadyFollowsTheServer(t *testing.T) {
	t.Parallel()
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true}
	srv := startServer(t, opts)
	opts.Port = srv.Addr().(*net.TCPAddr).Port
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	e := provisioned(t, js, nil)
	h := &recorder{}
	r := e.start(t, h)

	srv.Shutdown()
	srv.WaitForShutdown()
	eventually(t, 10*time.Second, "not ready while the server is away", func() bool { return !r.c.Ready() })
	startServer(t, opts)
	eventually(t, 20*time.Second, "ready once the server is back", r.c.Ready)
	e.publish(t, binaryCommand(e.s, "vm.start", "after-restart", `{}`))
	eventually(t, 20*time.Second, "command handled after the restart", func() bool { return h.count() == 1 })
}

// startServer starts a JetStream server with opts, shut down when the test ends.
func startServer(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("nats server: %v", err)
	}
	go srv.Start() // stopped and waited for by the cleanup below
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	return srv
}

// TestZeroDispositionRedelivers: a handler that returns the zero Disposition decided nothing;
// the message is redelivered, never acknowledged on its behalf, and nothing is dead-lettered.
func TestZeroDispositionRedelivers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	h := &recorder{answer: func(_ context.Context, _ events.Command, d events.Delivery) events.Disposition {
		if d.Number == 1 {
			return events.Disposition{}
		}
		return events.Disposition{Action: events.Ack}
	}}
	e.start(t, h)
	e.publish(t, binaryCommand(e.s, "vm.stop", "undecided", `{}`))
	eventually(t, 20*time.Second, "delivered again and acked", func() bool {
		return h.count() == 2 && e.streamMsgs(t, e.s.CommandsStream()) == 0
	})
	if dl := e.deadLetters(t); len(dl) != 0 {
		t.Errorf("%d dead letters, want 0", len(dl))
	}
}
