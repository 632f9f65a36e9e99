package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	h := &recorder{answer: func(ctx context.Context, cmd events.Command, at Attempt) Disposition {
		close(entered)
		<-release
		return Disposition{Action: Ack}
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

// TestHeartbeatKeepsSlowHandlerAlive: a handler that runs 2.5 AckWaits is not redelivered,
// because InProgress is sent every Heartbeat.
func TestHeartbeatKeepsSlowHandlerAlive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) {
		c.AckWait = time.Second
		c.Heartbeat = 300 * time.Millisecond
	})
	h := &recorder{answer: func(ctx context.Context, cmd events.Command, at Attempt) Disposition {
		time.Sleep(2500 * time.Millisecond)
		return Disposition{Action: Ack}
	}}
	e.start(t, h)
	e.publish(t, binaryCommand(e.s, "vm.start", "slow", `{}`))
	eventually(t, 10*time.Second, "ack", func() bool { return e.streamMsgs(t, e.s.CommandsStream()) == 0 })
	at := h.attempts()
	if len(at) != 1 || at[0].Delivered != 1 {
		t.Errorf("attempts = %+v, want one first delivery", at)
	}
	if info := e.consumerInfo(t); info.NumRedelivered != 0 {
		t.Errorf("redelivered %d, want 0", info.NumRedelivered)
	}
}

// TestRetryRedeliversWithIncreasingAttempt: Retry naks with the given delay (or the backoff
// schedule); the command comes back with Delivered incremented, until it is acked.
func TestRetryRedeliversWithIncreasingAttempt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		delay time.Duration
	}{
		{"explicit delay", 30 * time.Millisecond},
		{"backoff schedule", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			h := &recorder{answer: func(ctx context.Context, cmd events.Command, at Attempt) Disposition {
				if at.Delivered < 3 {
					return Disposition{Action: Retry, Delay: tt.delay}
				}
				return Disposition{Action: Ack}
			}}
			e.start(t, h)
			e.publish(t, binaryCommand(e.s, "vm.stop", "r1", `{}`))
			eventually(t, 10*time.Second, "third delivery acked", func() bool {
				return h.count() == 3 && e.streamMsgs(t, e.s.CommandsStream()) == 0
			})
			for i, at := range h.attempts() {
				if at.Delivered != uint64(i+1) || at.MaxDeliver != 5 {
					t.Errorf("attempt %d = %+v, want Delivered %d MaxDeliver 5", i, at, i+1)
				}
			}
			if dl := e.deadLetters(t); len(dl) != 0 {
				t.Errorf("dead letters = %d, want 0", len(dl))
			}
		})
	}
}

// TestConcurrencyIsBounded: with Concurrency 3 and 10 slow commands, never more than 3
// Handle calls run at once, and all 10 are handled exactly once.
func TestConcurrencyIsBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.Concurrency = 3 })
	var cur, peak atomic.Int32
	h := &recorder{answer: func(ctx context.Context, cmd events.Command, at Attempt) Disposition {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
		cur.Add(-1)
		return Disposition{Action: Ack}
	}}
	for i := range 10 {
		e.publish(t, binaryCommand(e.s, "vm.start", fmt.Sprintf("c%d", i), `{}`))
	}
	e.start(t, h)
	eventually(t, 20*time.Second, "all handled", func() bool { return e.streamMsgs(t, e.s.CommandsStream()) == 0 })
	if p := peak.Load(); p > 3 || p < 1 {
		t.Errorf("peak concurrency %d, want 1..3", p)
	}
	seen := map[string]int{}
	for _, id := range h.ids() {
		seen[id]++
	}
	if len(seen) != 10 {
		t.Errorf("handled %d distinct commands, want 10", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s handled %d times", id, n)
		}
	}
}

// TestDrainFinishesInFlightCommands: cancelling Run while two handlers are mid-way lets both
// finish (past AckWait, kept alive by heartbeats) and be acked; Run returns nil; nothing is
// redelivered.
func TestDrainFinishesInFlightCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) {
		c.AckWait = time.Second
		c.Heartbeat = 200 * time.Millisecond
	})
	var started sync.WaitGroup
	started.Add(2)
	var cancelled atomic.Int32
	h := &recorder{answer: func(ctx context.Context, cmd events.Command, at Attempt) Disposition {
		started.Done()
		<-ctx.Done() // the drain began
		cancelled.Add(1)
		// Irreversible work continues without cancellation.
		work := context.WithoutCancel(ctx)
		select {
		case <-time.After(300 * time.Millisecond):
		case <-work.Done():
		}
		return Disposition{Action: Ack}
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
	if n := e.streamMsgs(t, e.s.CommandsStream()); n != 0 {
		t.Errorf("%d commands left after drain, want 0 (both acked)", n)
	}
	info := e.consumerInfo(t)
	if info.NumAckPending != 0 || info.NumRedelivered != 0 {
		t.Errorf("ack pending %d redelivered %d, want 0 0", info.NumAckPending, info.NumRedelivered)
	}
	if h.count() != 2 {
		t.Errorf("handled %d times, want 2", h.count())
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
		return HandlerFunc(func(ctx context.Context, cmd events.Command, at Attempt) Disposition {
			mu.Lock()
			by[name] = append(by[name], cmd.ID)
			mu.Unlock()
			time.Sleep(50 * time.Millisecond)
			return Disposition{Action: Ack}
		})
	}
	e.start(t, mk("a"))
	// The second replica has its own connection, as a second process would.
	nc2 := testenvConn(t, n.URL)
	e2 := &env{js: nc2, cfg: e.cfg, s: e.s}
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

// TestHandlerPanicIsRetried: a panicking handler does not crash the process; the command is
// retried and acked on the next delivery.
func TestHandlerPanicIsRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	h := &recorder{answer: func(ctx context.Context, cmd events.Command, at Attempt) Disposition {
		if at.Delivered == 1 {
			panic("boom")
		}
		return Disposition{Action: Ack}
	}}
	e.start(t, h)
	e.publish(t, binaryCommand(e.s, "vm.start", "p1", `{}`))
	eventually(t, 10*time.Second, "acked on retry", func() bool {
		return h.count() == 2 && e.streamMsgs(t, e.s.CommandsStream()) == 0
	})
}

// TestRunErrors: Run refuses to start without the durable, and refuses a second Run.
func TestRunErrors(t *testing.T) {
	t.Parallel()
	t.Run("not provisioned", func(t *testing.T) {
		t.Parallel()
		n := testenv.StartNATS(t)
		c, err := New(n.JS, testConfig(), &recorder{}, NewPublisher(n.JS), events.NewEmitter(events.NewSubjects("proxbus"), "t"))
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
