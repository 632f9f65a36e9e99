package consumer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
)

// The tests in this file drive consume with a fake jetstream.Consumer whose message
// iterators deliver what the test hands them, and fake messages whose DoubleAck the test
// holds, so they can observe what the consumer takes and when, without timing assertions.

// errFakeIterator is the error a fake iterator fails with in tests of failing pulls.
var errFakeIterator = errors.New("fake iterator failed")

// fakeIter is one message iterator opened on a fakeConsumer. The test delivers messages
// with deliver, errors with fail, and ends a bounded wait with timeOut; Stop and Drain close
// it (Next then returns what is still buffered, then ErrMsgIteratorClosed). Next also ends
// when the run context is done, as the consumer's NextContext makes it.
type fakeIter struct {
	jetstream.MessagesContext
	run      context.Context
	msgs     chan jetstream.Msg
	errs     chan error
	timeouts chan struct{}
	closed   chan struct{}
	once     sync.Once
	taken    atomic.Int32 // messages returned by Next
}

func (it *fakeIter) Next(...jetstream.NextOpt) (jetstream.Msg, error) {
	if isClosed(it.closed) {
		return it.buffered()
	}
	select {
	case m := <-it.msgs:
		it.taken.Add(1)
		return m, nil
	case err := <-it.errs:
		return nil, err
	case <-it.timeouts:
		return nil, context.DeadlineExceeded
	case <-it.run.Done():
		return nil, it.run.Err()
	case <-it.closed:
		return it.buffered()
	}
}

// buffered returns the next buffered message of a closed iterator, or ErrMsgIteratorClosed.
func (it *fakeIter) buffered() (jetstream.Msg, error) {
	select {
	case m := <-it.msgs:
		it.taken.Add(1)
		return m, nil
	default:
		return nil, jetstream.ErrMsgIteratorClosed
	}
}

func (it *fakeIter) Stop()  { it.once.Do(func() { close(it.closed) }) }
func (it *fakeIter) Drain() { it.Stop() }

// deliver hands m to the iterator, as the server delivering on an open pull request does.
func (it *fakeIter) deliver(t *testing.T, m jetstream.Msg) {
	t.Helper()
	select {
	case it.msgs <- m:
	default:
		t.Fatal("fake iterator is full")
	}
}

// fail makes the iterator's next Next return err (the iterator stays open).
func (it *fakeIter) fail(err error) { it.errs <- err }

// timeOut ends one bounded wait of Next, present or next, as FetchWait passing does.
func (it *fakeIter) timeOut() { it.timeouts <- struct{}{} }

// fakeConsumer is a jetstream.Consumer whose Messages returns a fakeIter; every iterator is
// also sent on iters. Only Messages is implemented.
type fakeConsumer struct {
	jetstream.Consumer
	run   context.Context
	iters chan *fakeIter
	mu    sync.Mutex
	all   []*fakeIter
}

func (f *fakeConsumer) Messages(...jetstream.PullMessagesOpt) (jetstream.MessagesContext, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	it := &fakeIter{
		run: f.run, msgs: make(chan jetstream.Msg, 100), errs: make(chan error, 10),
		timeouts: make(chan struct{}, 10), closed: make(chan struct{}),
	}
	f.all = append(f.all, it)
	f.iters <- it
	return it, nil
}

// closeAll stops every iterator opened so far.
func (f *fakeConsumer) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, it := range f.all {
		it.Stop()
	}
}

// next returns the next iterator the consumer opened, failing the test if none comes.
func (f *fakeConsumer) next(t *testing.T, what string) *fakeIter {
	t.Helper()
	select {
	case it := <-f.iters:
		return it
	case <-time.After(10 * time.Second):
		t.Fatalf("no iterator opened: %s", what)
		return nil
	}
}

// fakeMsg is a first delivery of a valid command. DoubleAck blocks until gate is closed
// (when gate is not nil). InProgress counts beats and records any that follows the message's
// settlement.
type fakeMsg struct {
	jetstream.Msg
	m       *nats.Msg
	seq     uint64
	gate    chan struct{}
	acking  chan struct{} // closed when DoubleAck is called
	acked   chan struct{} // closed when DoubleAck returns
	nakked  chan struct{} // closed when Nak or NakWithDelay is called
	nakOnce sync.Once

	beats, lateBeats atomic.Int32
	settled          atomic.Bool
}

func newFakeMsg(s events.Subjects, id string, seq uint64, gate chan struct{}) *fakeMsg {
	return &fakeMsg{
		m: binaryCommand(s, "vm.start", id, `{}`), seq: seq, gate: gate,
		acking: make(chan struct{}), acked: make(chan struct{}), nakked: make(chan struct{}),
	}
}

func (m *fakeMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{
		NumDelivered: 1, Sequence: jetstream.SequencePair{Stream: m.seq, Consumer: m.seq},
		Timestamp: time.Unix(1700000000, 0),
	}, nil
}
func (m *fakeMsg) Subject() string      { return m.m.Subject }
func (m *fakeMsg) Headers() nats.Header { return m.m.Header }
func (m *fakeMsg) Data() []byte         { return m.m.Data }
func (m *fakeMsg) InProgress() error {
	m.beats.Add(1)
	if m.settled.Load() {
		m.lateBeats.Add(1)
	}
	return nil
}
func (m *fakeMsg) NakWithDelay(time.Duration) error { return m.Nak() }
func (m *fakeMsg) Nak() error {
	m.settled.Store(true)
	m.nakOnce.Do(func() { close(m.nakked) })
	return nil
}
func (m *fakeMsg) DoubleAck(ctx context.Context) error {
	m.settled.Store(true)
	close(m.acking)
	if m.gate != nil {
		select {
		case <-m.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	close(m.acked)
	return nil
}

// noJS is a jetstream.JetStream for consumers that run on a fakeConsumer: it has no
// connection, and nothing else of it is called on the paths these tests take.
type noJS struct{ jetstream.JetStream }

func (noJS) Conn() *nats.Conn { return nil }

// loop is consume running on a fakeConsumer as Run runs it.
type loop struct {
	c      *Consumer
	cancel context.CancelFunc
	// drained is closed when consume returned: the iterator is drained and every worker
	// has settled its message.
	drained chan struct{}
}

// startLoop runs a Consumer with h on a new fakeConsumer. The test's cleanup cancels it,
// ends every pull and waits for the drain.
func startLoop(t *testing.T, mutate func(*Config), h Handler) (*loop, *fakeConsumer) {
	t.Helper()
	cfg := testConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := New(noJS{}, cfg, h, NewPublisher(noJS{}, events.NewEmitter(cfg.Subjects, "test")))
	if err != nil {
		t.Fatalf("new consumer: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	fake := &fakeConsumer{run: ctx, iters: make(chan *fakeIter, 100)}
	l := &loop{c: c, cancel: cancel, drained: make(chan struct{})}
	go func() { // waited for by the cleanup below
		c.consume(ctx, fake)
		close(l.drained)
	}()
	t.Cleanup(func() {
		cancel()
		fake.closeAll()
		wait(t, l.drained, "drain complete")
	})
	return l, fake
}

// wait fails the test unless ch is closed within a generous timeout.
func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// isClosed reports whether ch is closed now.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestMessagesTakenOnlyForFreeWorkers: with Concurrency 2 and both handlers blocked, a third
// delivered message stays in the iterator; it is taken, and handled, once a worker is free.
func TestMessagesTakenOnlyForFreeWorkers(t *testing.T) {
	t.Parallel()
	gate := map[string]chan struct{}{"A": make(chan struct{}), "B": make(chan struct{})}
	started := make(chan string, 10)
	h := HandlerFunc(func(_ context.Context, cmd events.Command, _ events.Delivery) events.Disposition {
		started <- cmd.ID
		if g, ok := gate[cmd.ID]; ok {
			<-g
		}
		return events.Disposition{Action: events.Ack}
	})
	_, fake := startLoop(t, func(c *Config) { c.Concurrency = 2 }, h)
	openGates := sync.OnceFunc(func() {
		for _, g := range gate {
			if !isClosed(g) {
				close(g)
			}
		}
	})
	t.Cleanup(openGates) // before the loop's cleanup waits for the drain
	it := fake.next(t, "iterator")
	s := testConfig().Subjects
	msgs := []*fakeMsg{newFakeMsg(s, "A", 1, nil), newFakeMsg(s, "B", 2, nil), newFakeMsg(s, "C", 3, nil)}
	for _, m := range msgs {
		it.deliver(t, m)
	}
	for range 2 {
		<-started
	}
	// Both workers block: C is not taken (it could only wait, unattended, for a worker).
	if n := it.taken.Load(); n != 2 {
		t.Fatalf("%d messages taken while both workers block, want 2", n)
	}
	close(gate["B"])
	wait(t, msgs[1].acked, "B acked")
	if got := <-started; got != "C" {
		t.Fatalf("started %s, want C", got)
	}
	wait(t, msgs[2].acked, "C acked")
	if isClosed(msgs[0].acking) {
		t.Error("A was settled while its handler still blocks")
	}
	close(gate["A"])
	wait(t, msgs[0].acked, "A acked")
}

// TestDrainWaitsForInFlightAck: after cancellation the consumer stops pulling and drains the
// iterator at once, but the drain is complete only when an ack that was in flight returned.
func TestDrainWaitsForInFlightAck(t *testing.T) {
	t.Parallel()
	l, fake := startLoop(t, func(c *Config) { c.Concurrency = 1 }, &recorder{})
	gate := make(chan struct{})

	it := fake.next(t, "iterator")
	a := newFakeMsg(testConfig().Subjects, "A", 1, gate)
	it.deliver(t, a)
	wait(t, a.acking, "A's ack started")

	l.cancel()
	wait(t, it.closed, "iterator drained")
	eventually(t, 10*time.Second, "not ready once draining", func() bool { return !l.c.Ready() })
	if isClosed(l.drained) {
		t.Fatal("drain complete while A's ack is in flight")
	}
	close(gate)
	wait(t, l.drained, "drain complete")
	if !isClosed(a.acked) {
		t.Error("drain complete before A's ack returned")
	}
}

// TestMessagesAfterCancelAreNaked: messages the iterator still holds when the drain begins
// are nak'ed for immediate redelivery, never handled, even while every worker is busy, and
// the consumer is not ready from the moment of cancellation.
func TestMessagesAfterCancelAreNaked(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	rec := &recorder{answer: func(context.Context, events.Command, events.Delivery) events.Disposition {
		<-gate
		return events.Disposition{Action: events.Ack}
	}}
	l, fake := startLoop(t, func(c *Config) { c.Concurrency = 1 }, rec)
	it := fake.next(t, "iterator")
	s := testConfig().Subjects
	busy := newFakeMsg(s, "busy", 1, nil)
	it.deliver(t, busy)
	eventually(t, 10*time.Second, "busy handled", func() bool { return rec.count() == 1 })
	late := newFakeMsg(s, "late", 2, nil)
	it.deliver(t, late) // waits in the iterator: the only worker is busy

	l.cancel()
	eventually(t, 10*time.Second, "not ready after cancellation", func() bool { return !l.c.Ready() })
	wait(t, late.nakked, "late message nak'ed while the worker is still busy")
	if isClosed(l.drained) {
		t.Fatal("drain complete while a handler runs")
	}
	close(gate)
	wait(t, l.drained, "drain complete")
	if n := rec.count(); n != 1 {
		t.Errorf("handled %d messages, want 1 (the late one nak'ed)", n)
	}
	if isClosed(late.acking) {
		t.Error("late message was acked")
	}
}

// TestReadyFollowsPulls: Ready turns true once the iterator is open, false when it reports
// an error (missed heartbeats), and true again with the next message or idle wait; an
// iterator that ends is replaced after a backoff.
func TestReadyFollowsPulls(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	l, fake := startLoop(t, func(c *Config) { c.Concurrency = 2 }, rec)
	it := fake.next(t, "iterator")
	eventually(t, 10*time.Second, "ready once the iterator is open", l.c.Ready)

	it.fail(errFakeIterator)
	eventually(t, 10*time.Second, "not ready after an error", func() bool { return !l.c.Ready() })
	it.deliver(t, newFakeMsg(testConfig().Subjects, "A", 1, nil))
	eventually(t, 10*time.Second, "ready again with a message", l.c.Ready)
	it.fail(errFakeIterator)
	eventually(t, 10*time.Second, "not ready after a second error", func() bool { return !l.c.Ready() })
	it.timeOut()
	eventually(t, 10*time.Second, "ready again while idle (a bounded wait ended)", l.c.Ready)

	it.Stop() // the iterator ends (consumer deleted, connection closed)
	eventually(t, 10*time.Second, "not ready without an iterator", func() bool { return !l.c.Ready() })
	it2 := fake.next(t, "a new iterator after the backoff")
	eventually(t, 10*time.Second, "ready with the new iterator", l.c.Ready)
	it2.deliver(t, newFakeMsg(testConfig().Subjects, "B", 2, nil))
	eventually(t, 10*time.Second, "B handled on the new iterator", func() bool { return rec.count() == 2 })
}

// TestNoHeartbeatAfterSettlement: while a handler runs its message gets InProgress beats;
// none follows the message's ack or nak.
func TestNoHeartbeatAfterSettlement(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		disp events.Disposition
	}{
		{"ack", events.Disposition{Action: events.Ack}},
		{"nak at once", events.Disposition{Action: events.Redeliver}},
		{"nak with delay", events.Disposition{Action: events.Redeliver, Delay: time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newFakeMsg(testConfig().Subjects, "beaten", 1, nil)
			h := HandlerFunc(func(context.Context, events.Command, events.Delivery) events.Disposition {
				for m.beats.Load() < 3 {
					time.Sleep(time.Millisecond)
				}
				return tt.disp
			})
			l, fake := startLoop(t, func(c *Config) { c.Concurrency = 1; c.Heartbeat = time.Millisecond }, h)
			fake.next(t, "iterator").deliver(t, m)
			eventually(t, 10*time.Second, "settled", m.settled.Load)
			l.cancel()
			wait(t, l.drained, "drain complete")
			if n := m.lateBeats.Load(); n != 0 {
				t.Errorf("%d InProgress after the message was settled", n)
			}
		})
	}
}

// blockingBeat is a message whose InProgress blocks until gate is closed.
type blockingBeat struct {
	jetstream.Msg
	entered chan struct{}
	gate    chan struct{}
	once    sync.Once
	beats   atomic.Int32
}

func (m *blockingBeat) Subject() string { return "test" }

func (m *blockingBeat) InProgress() error {
	m.beats.Add(1)
	m.once.Do(func() { close(m.entered) })
	<-m.gate
	return nil
}

// TestHeartbeatStopWaitsForABeat: stop, called while a beat is in flight, returns only after
// that beat ended; no beat runs once it returned, and a second stop is harmless.
func TestHeartbeatStopWaitsForABeat(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Heartbeat = time.Millisecond
	c, err := New(noJS{}, cfg, &recorder{}, NewPublisher(noJS{}, events.NewEmitter(cfg.Subjects, "test")))
	if err != nil {
		t.Fatalf("new consumer: %v", err)
	}
	m := &blockingBeat{entered: make(chan struct{}), gate: make(chan struct{})}
	openGate := sync.OnceFunc(func() { close(m.gate) })
	defer openGate() // first, so that a failing test does not hang on the blocked beat
	msg := c.keepAlive(m)
	wait(t, m.entered, "first beat")

	stopped := make(chan struct{})
	go func() { // waited for below
		msg.stop()
		close(stopped)
	}()
	if isClosed(stopped) {
		t.Fatal("stop returned while a beat is in flight")
	}
	openGate()
	wait(t, stopped, "stop")
	n := m.beats.Load()
	msg.stop()
	if got := m.beats.Load(); got != n {
		t.Errorf("%d beats after stop returned", got-n)
	}
}

// ackFailing wraps a real consumer so that the first delivery of every message fails its
// DoubleAck without reaching the server, as an ack lost on the way would.
type ackFailing struct {
	jetstream.Consumer
}

func (a *ackFailing) Messages(opts ...jetstream.PullMessagesOpt) (jetstream.MessagesContext, error) {
	it, err := a.Consumer.Messages(opts...)
	if err != nil {
		return nil, err
	}
	return failingIter{it}, nil
}

// failingIter hands out every message wrapped in failFirstAck.
type failingIter struct{ jetstream.MessagesContext }

func (it failingIter) Next(opts ...jetstream.NextOpt) (jetstream.Msg, error) {
	m, err := it.MessagesContext.Next(opts...)
	if err != nil {
		return nil, err
	}
	return failFirstAck{m}, nil
}

// errLostAck is the DoubleAck error of a first delivery through ackFailing.
var errLostAck = errors.New("ack lost")

type failFirstAck struct{ jetstream.Msg }

func (m failFirstAck) DoubleAck(ctx context.Context) error {
	meta, err := m.Metadata()
	if err != nil {
		return err
	}
	if meta.NumDelivered == 1 {
		return errLostAck
	}
	return m.Msg.DoubleAck(ctx)
}

// TestAckFailureIsRedelivered: when the ack after a handler's Ack fails, the message is
// redelivered after AckWait and acked on the second delivery, against a real JetStream.
func TestAckFailureIsRedelivered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) {
		c.AckWait = time.Second
		c.Heartbeat = 200 * time.Millisecond
	})
	rec := &recorder{}
	c, err := New(e.js, e.cfg, rec, NewPublisher(e.js, events.NewEmitter(e.s, "test")))
	if err != nil {
		t.Fatalf("new consumer: %v", err)
	}
	cons, err := e.js.Consumer(ctxT(t), e.s.CommandsStream(), e.cfg.WithDefaults().Durable)
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { // waited for by the cleanup below
		defer close(done)
		c.consume(ctx, &ackFailing{Consumer: cons})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	e.publish(t, binaryCommand(e.s, "vm.start", "lost", `{}`))
	eventually(t, 20*time.Second, "acked on redelivery", func() bool {
		return rec.count() == 2 && e.streamMsgs(t, e.s.CommandsStream()) == 0
	})
	if d := rec.seen(); len(d) != 2 || d[0].Number != 1 || d[1].Number != 2 {
		t.Errorf("deliveries = %+v, want numbers 1 and 2", d)
	}
	if info := e.consumerInfo(t); info.NumAckPending != 0 || info.AckFloor.Stream != 1 {
		t.Errorf("ack pending %d, ack floor %d; want 0, 1", info.NumAckPending, info.AckFloor.Stream)
	}
}
