package consumer

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/beat"
)

// The tests in this file drive fetchLoop with a fake jetstream.Consumer whose message
// iterators deliver what the test hands them, and fake messages whose DoubleAck the test
// holds, so they can observe what the loop takes and when, without timing assertions.

// errFakeIterator is the error a fake iterator fails with in tests of failing pulls.
var errFakeIterator = errors.New("fake iterator failed")

// fakeIter is one message iterator opened on a fakeConsumer. The test delivers messages
// with deliver, errors with fail, and ends a bounded wait with timeOut; Stop and Drain close
// it (Next then returns what is still buffered, then ErrMsgIteratorClosed).
type fakeIter struct {
	jetstream.MessagesContext
	msgs     chan jetstream.Msg
	errs     chan error
	timeouts chan struct{}
	closed   chan struct{}
	once     sync.Once

	mu     sync.Mutex
	taken  int                 // messages returned by Next
	onTake func(jetstream.Msg) // when set, called by Next with each message it returns
}

func (it *fakeIter) Next(opts ...jetstream.NextOpt) (jetstream.Msg, error) {
	// The consumer passes no option but NextMaxWait: with it, Next can end with
	// nats.ErrTimeout, as an idle healthy iterator's does, when the test calls timeOut.
	var timeout <-chan struct{}
	if len(opts) > 0 {
		timeout = it.timeouts
	}
	select {
	case m := <-it.msgs:
		return it.take(m), nil
	case err := <-it.errs:
		return nil, err
	case <-timeout:
		return nil, nats.ErrTimeout
	case <-it.closed:
		select {
		case m := <-it.msgs:
			return it.take(m), nil
		default:
			return nil, jetstream.ErrMsgIteratorClosed
		}
	}
}

func (it *fakeIter) take(m jetstream.Msg) jetstream.Msg {
	it.mu.Lock()
	defer it.mu.Unlock()
	it.taken++
	if it.onTake != nil {
		it.onTake(m)
	}
	return m
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

// timeOut ends one bounded wait of Next, present or next, with nats.ErrTimeout.
func (it *fakeIter) timeOut() { it.timeouts <- struct{}{} }

// takenCount returns how many messages Next returned so far.
func (it *fakeIter) takenCount() int {
	it.mu.Lock()
	defer it.mu.Unlock()
	return it.taken
}

// fakeConsumer is a jetstream.Consumer whose Messages returns a fakeIter; every iterator is
// also sent on iters. Only Messages is implemented.
type fakeConsumer struct {
	jetstream.Consumer
	iters chan *fakeIter
	// failOpen, when set, is returned by the next Messages call (once).
	mu       sync.Mutex
	failOpen error
	all      []*fakeIter
}

func newFakeConsumer() *fakeConsumer {
	return &fakeConsumer{iters: make(chan *fakeIter, 100)}
}

func (f *fakeConsumer) Messages(...jetstream.PullMessagesOpt) (jetstream.MessagesContext, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failOpen; err != nil {
		f.failOpen = nil
		return nil, err
	}
	it := &fakeIter{
		msgs: make(chan jetstream.Msg, 100), errs: make(chan error, 10),
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

// next returns the next iterator the loop opened, failing the test if none comes.
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
// (when gate is not nil) and then returns ackErr.
type fakeMsg struct {
	jetstream.Msg
	m       *nats.Msg
	seq     uint64
	gate    chan struct{}
	ackErr  error
	acking  chan struct{} // closed when DoubleAck is called
	onAck   func()        // when set, called as DoubleAck begins
	acked   chan struct{} // closed when DoubleAck returns
	nakked  chan struct{} // closed when Nak is called
	ackOnce sync.Once
	nakOnce sync.Once
}

func newFakeMsg(s events.Subjects, id string, seq uint64, gate chan struct{}) *fakeMsg {
	return &fakeMsg{
		m: binaryCommand(s, "vm.start", id, `{}`), seq: seq, gate: gate,
		acking: make(chan struct{}), acked: make(chan struct{}), nakked: make(chan struct{}),
	}
}

func (m *fakeMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{NumDelivered: 1, Sequence: jetstream.SequencePair{Stream: m.seq, Consumer: m.seq}}, nil
}
func (m *fakeMsg) Subject() string                    { return m.m.Subject }
func (m *fakeMsg) id() string                         { return m.m.Header.Get("ce-id") }
func (m *fakeMsg) Headers() nats.Header               { return m.m.Header }
func (m *fakeMsg) Data() []byte                       { return m.m.Data }
func (m *fakeMsg) InProgress() error                  { return nil }
func (m *fakeMsg) NakWithDelay(d time.Duration) error { return m.Nak() }
func (m *fakeMsg) Nak() error                         { m.nakOnce.Do(func() { close(m.nakked) }); return nil }
func (m *fakeMsg) Term() error                        { return nil }
func (m *fakeMsg) TermWithReason(string) error        { return nil }
func (m *fakeMsg) Ack() error                         { return m.DoubleAck(context.Background()) }
func (m *fakeMsg) DoubleAck(ctx context.Context) error {
	if m.onAck != nil {
		m.onAck()
	}
	close(m.acking)
	if m.gate != nil {
		select {
		case <-m.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	m.ackOnce.Do(func() { close(m.acked) })
	return m.ackErr
}

// noJS is a jetstream.JetStream for consumers whose fetch loop runs on a fakeConsumer: it is
// never called on the paths these tests take.
type noJS struct{ jetstream.JetStream }

// loop is fetchLoop running on a fakeConsumer as Run runs it.
type loop struct {
	c      *Consumer
	cancel context.CancelFunc
	// fetched is closed when fetchLoop returned, drained when the workers were waited for too.
	fetched, drained chan struct{}
}

// startLoop runs a Consumer with h on fake (its fetch loop, then the wait for its workers,
// as Run does). The test's cleanup cancels it, ends every pull and waits for the drain.
func startLoop(t *testing.T, fake *fakeConsumer, mutate func(*Config), h Handler) *loop {
	t.Helper()
	cfg := testConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := New(noJS{}, cfg, h, NewPublisher(noJS{}), events.NewEmitter(cfg.Subjects, "test"))
	if err != nil {
		t.Fatalf("new consumer: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &loop{c: c, cancel: cancel, fetched: make(chan struct{}), drained: make(chan struct{})}
	go func() { // waited for by the cleanup below
		c.consume(ctx, fake, func() { close(l.fetched) })
		close(l.drained)
	}()
	t.Cleanup(func() {
		cancel()
		wait(t, l.drained, "drain complete")
		fake.closeAll()
	})
	return l
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
// delivered message stays in the iterator; it is taken, and handled, once a handler returned.
func TestMessagesTakenOnlyForFreeWorkers(t *testing.T) {
	t.Parallel()
	fake := newFakeConsumer()
	gate := map[string]chan struct{}{"A": make(chan struct{}), "B": make(chan struct{})}
	started := make(chan string, 10)
	h := HandlerFunc(func(ctx context.Context, cmd events.Command, at Attempt) Disposition {
		started <- cmd.ID
		if g, ok := gate[cmd.ID]; ok {
			<-g
		}
		return Disposition{Action: Ack}
	})
	startLoop(t, fake, func(c *Config) { c.Concurrency = 2 }, h)
	it := fake.next(t, "iterator")
	s := testConfig().Subjects
	msgs := []*fakeMsg{newFakeMsg(s, "A", 1, nil), newFakeMsg(s, "B", 2, nil), newFakeMsg(s, "C", 3, nil)}
	for _, m := range msgs {
		it.deliver(t, m)
	}
	for range 2 {
		<-started
	}
	// Both workers block: the loop waits for a free one before it takes C. (Were it to take
	// C now, C could only wait, unattended, for a worker.)
	if n := it.takenCount(); n != 2 {
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

// TestSlotFreedBeforeAck: with Concurrency 1, the next message is taken and handled while
// the previous message's DoubleAck is still in flight.
func TestSlotFreedBeforeAck(t *testing.T) {
	t.Parallel()
	fake := newFakeConsumer()
	rec := &recorder{}
	l := startLoop(t, fake, func(c *Config) { c.Concurrency = 1 }, rec)
	gate := make(chan struct{})
	t.Cleanup(func() { close(gate) })

	s := testConfig().Subjects
	it := fake.next(t, "iterator")
	a := newFakeMsg(s, "A", 1, gate)
	it.deliver(t, a)
	wait(t, a.acking, "A's ack started")
	b := newFakeMsg(s, "B", 2, nil)
	it.deliver(t, b)
	wait(t, b.acked, "B handled and acked")
	if isClosed(a.acked) {
		t.Fatal("A's ack returned before the gate opened")
	}
	if got := rec.ids(); len(got) != 2 || got[0] != "A" || got[1] != "B" {
		t.Errorf("handled %v, want [A B]", got)
	}
	if !l.c.Ready() {
		t.Error("not ready while pulling")
	}
}

// TestDrainWaitsForInFlightAck: after cancellation the loop stops taking messages and returns
// once the iterator is drained, but the drain is complete only when an ack that was in
// flight returned.
func TestDrainWaitsForInFlightAck(t *testing.T) {
	t.Parallel()
	fake := newFakeConsumer()
	l := startLoop(t, fake, func(c *Config) { c.Concurrency = 1 }, &recorder{})
	gate := make(chan struct{})

	it := fake.next(t, "iterator")
	a := newFakeMsg(testConfig().Subjects, "A", 1, gate)
	it.deliver(t, a)
	wait(t, a.acking, "A's ack started")

	l.cancel()
	wait(t, l.fetched, "fetch loop returned")
	if l.c.Ready() {
		t.Error("ready after the drain began")
	}
	if !isClosed(it.closed) {
		t.Error("iterator not drained")
	}
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
	fake := newFakeConsumer()
	gate := make(chan struct{})
	rec := &recorder{}
	h := HandlerFunc(func(ctx context.Context, cmd events.Command, at Attempt) Disposition {
		rec.Handle(ctx, cmd, at)
		<-gate
		return Disposition{Action: Ack}
	})
	l := startLoop(t, fake, func(c *Config) { c.Concurrency = 1 }, h)
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
	wait(t, l.fetched, "fetch loop returned")
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
// an error (missed heartbeats), and true again with the next message; an iterator that ends
// is replaced after a backoff.
func TestReadyFollowsPulls(t *testing.T) {
	t.Parallel()
	fake := newFakeConsumer()
	rec := &recorder{}
	l := startLoop(t, fake, func(c *Config) { c.Concurrency = 2 }, rec)
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

// TestAckFailureIsRedelivered: when the ack after a handler's Ack fails (the worker slot was
// already free by then), the message is redelivered after AckWait and acked on the second
// delivery, against a real JetStream.
func TestAckFailureIsRedelivered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) {
		c.AckWait = time.Second
		c.Heartbeat = 200 * time.Millisecond
	})
	rec := &recorder{}
	c, err := New(e.js, e.cfg, rec, NewPublisher(e.js), events.NewEmitter(e.s, "test"))
	if err != nil {
		t.Fatalf("new consumer: %v", err)
	}
	cons, err := e.js.Consumer(ctxT(t), e.s.CommandsStream(), e.cfg.WithDefaults().Durable)
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	c.maxDeliver = e.cfg.WithDefaults().MaxDeliver
	wrapped := &ackFailing{Consumer: cons}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { // waited for by the cleanup below
		defer close(done)
		c.consume(ctx, wrapped, nil)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	e.publish(t, binaryCommand(e.s, "vm.start", "lost", `{}`))
	eventually(t, 20*time.Second, "acked on redelivery", func() bool {
		return rec.count() == 2 && e.streamMsgs(t, e.s.CommandsStream()) == 0
	})
	at := rec.attempts()
	if len(at) != 2 || at[0].Delivered != 1 || at[1].Delivered != 2 {
		t.Errorf("attempts = %+v, want deliveries 1 and 2", at)
	}
	if info := e.consumerInfo(t); info.NumAckPending != 0 || info.AckFloor.Stream != 1 {
		t.Errorf("ack pending %d, ack floor %d; want 0, 1", info.NumAckPending, info.AckFloor.Stream)
	}
}

// beatMsg counts InProgress calls; with block set, the third call closes entered and
// blocks until gate is closed.
type beatMsg struct {
	jetstream.Msg
	mu      sync.Mutex
	beats   int
	block   bool
	entered chan struct{}
	gate    chan struct{}
}

func (m *beatMsg) Subject() string { return "test" }

func (m *beatMsg) InProgress() error {
	m.mu.Lock()
	m.beats++
	block := m.block && m.beats == 3
	m.mu.Unlock()
	if block {
		close(m.entered)
		<-m.gate
	}
	return nil
}

func (m *beatMsg) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.beats
}

// TestHeartbeatRepeatsAndStopWaitsForABeat: heartbeats repeat every Heartbeat; stop, called
// while a beat is in flight, returns only after that beat ended, and no beat follows it.
func TestHeartbeatRepeatsAndStopWaitsForABeat(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Heartbeat = time.Millisecond
	c, err := New(noJS{}, cfg, &recorder{}, NewPublisher(noJS{}), events.NewEmitter(cfg.Subjects, "test"))
	if err != nil {
		t.Fatalf("new consumer: %v", err)
	}
	beats := beat.NewGroup(cfg.Heartbeat)
	ctx, cancel := context.WithCancel(context.Background())
	var beating sync.WaitGroup
	beating.Go(func() { beats.Run(ctx) })
	t.Cleanup(func() { cancel(); beating.Wait() })
	slot := beats.Slot()
	defer slot.Close()
	m := &beatMsg{block: true, entered: make(chan struct{}), gate: make(chan struct{})}
	openGate := sync.OnceFunc(func() { close(m.gate) })
	defer openGate() // first, so that a failing test does not hang on the blocked beat
	stop := c.heartbeat(slot, m)
	wait(t, m.entered, "third beat")

	stopped := make(chan struct{})
	go func() { // waited for below
		stop()
		close(stopped)
	}()
	if isClosed(stopped) {
		t.Fatal("stop returned while a beat is in flight")
	}
	openGate()
	wait(t, stopped, "stop")
	stop() // a second stop is harmless
	if n := m.count(); n != 3 {
		t.Errorf("%d beats, want 3 (none after stop)", n)
	}
}

// TestWorkersReused: commands handled one after another run on the same few goroutines, not
// on a new goroutine each (a new goroutine grows its stack again for every command). With
// Concurrency 1 at most three workers exist: one handling, one finishing an ack, one reading.
func TestWorkersReused(t *testing.T) {
	t.Parallel()
	fake := newFakeConsumer()
	var (
		mu      sync.Mutex
		workers = map[string]int{}
	)
	h := HandlerFunc(func(context.Context, events.Command, Attempt) Disposition {
		mu.Lock()
		defer mu.Unlock()
		workers[goroutineID(t)]++
		return Disposition{Action: Ack}
	})
	startLoop(t, fake, func(c *Config) { c.Concurrency = 1 }, h)
	it := fake.next(t, "iterator")
	const n = 20
	for i := range n {
		m := newFakeMsg(testConfig().Subjects, fmt.Sprintf("cmd-%d", i), uint64(i+1), nil)
		it.deliver(t, m)
		wait(t, m.acked, "command acked")
	}
	mu.Lock()
	defer mu.Unlock()
	handled := 0
	for _, k := range workers {
		handled += k
	}
	if handled != n || len(workers) > 3 {
		t.Errorf("%d commands handled on %d goroutines %v, want %d on at most 3", handled, len(workers), workers, n)
	}
}

// goroutineID returns the id of the calling goroutine, from its stack trace's header
// ("goroutine 42 [running]:").
func goroutineID(t *testing.T) string {
	t.Helper()
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, ok := strings.Cut(strings.TrimPrefix(string(buf), "goroutine "), " ")
	if !ok {
		t.Fatalf("unexpected stack header %q", buf)
	}
	return id
}

// TestHandlerRunsWhereMessageWasRead: the worker that reads a message from the iterator
// handles it itself (the reading passes to another worker), so no hand-off between goroutines
// lies between a message's arrival and its handler.
func TestHandlerRunsWhereMessageWasRead(t *testing.T) {
	t.Parallel()
	fake := newFakeConsumer()
	var (
		mu      sync.Mutex
		readBy  = map[string]string{} // command id -> goroutine that read it
		handled = map[string]string{} // command id -> goroutine that handled it
	)
	h := HandlerFunc(func(_ context.Context, cmd events.Command, _ Attempt) Disposition {
		mu.Lock()
		defer mu.Unlock()
		handled[cmd.ID] = goroutineID(t)
		return Disposition{Action: Ack}
	})
	startLoop(t, fake, func(c *Config) { c.Concurrency = 4 }, h)
	it := fake.next(t, "iterator")
	it.mu.Lock()
	it.onTake = func(m jetstream.Msg) {
		mu.Lock()
		defer mu.Unlock()
		readBy[m.(*fakeMsg).id()] = goroutineID(t)
	}
	it.mu.Unlock()
	var msgs []*fakeMsg
	for i := range 12 {
		m := newFakeMsg(testConfig().Subjects, fmt.Sprintf("cmd-%d", i), uint64(i+1), nil)
		msgs = append(msgs, m)
		it.deliver(t, m)
	}
	for _, m := range msgs {
		wait(t, m.acked, "command acked")
	}
	mu.Lock()
	defer mu.Unlock()
	for id, g := range handled {
		if readBy[id] != g {
			t.Errorf("%s read on goroutine %s, handled on %s", id, readBy[id], g)
		}
	}
	if len(handled) != len(msgs) {
		t.Errorf("%d commands handled, want %d", len(handled), len(msgs))
	}
}
