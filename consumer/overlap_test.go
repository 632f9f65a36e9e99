package consumer

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
)

// The tests in this file drive fetchLoop with a fake jetstream.Consumer whose pull requests
// stay open until the test ends them, and fake messages whose DoubleAck the test holds, so
// they can observe what the loop asks for and when, without timing assertions.

// errFakePull is the error a fake pull ends with in tests of failing fetches.
var errFakePull = errors.New("fake pull failed")

// fakePull is one pull request sent to a fakeConsumer. The test delivers messages with
// deliver and ends the pull with end.
type fakePull struct {
	n     int
	msgs  chan jetstream.Msg
	err   error
	once  sync.Once
	ended chan struct{} // closed by end
}

func (p *fakePull) Messages() <-chan jetstream.Msg { return p.msgs }

// Error is read by the loop only after msgs is closed, which orders it after end's write.
func (p *fakePull) Error() error { return p.err }

func (p *fakePull) deliver(t *testing.T, m jetstream.Msg) {
	t.Helper()
	select {
	case p.msgs <- m:
	default:
		t.Fatalf("pull for %d messages is full", p.n)
	}
}

// end ends the pull with err (nil for a clean expiry); later calls do nothing.
func (p *fakePull) end(err error) {
	p.once.Do(func() {
		p.err = err
		close(p.msgs)
		close(p.ended)
	})
}

// fakeConsumer is a jetstream.Consumer whose Fetch returns a fakePull that stays open until
// the test ends it; every pull is also sent on pulls. Only Fetch is implemented.
type fakeConsumer struct {
	jetstream.Consumer
	pulls chan *fakePull

	mu  sync.Mutex
	all []*fakePull
}

// newFakeConsumer returns a fakeConsumer whose pulls channel buffers buffer pulls; with 0,
// Fetch blocks until the test takes the pull with next.
func newFakeConsumer(buffer int) *fakeConsumer {
	return &fakeConsumer{pulls: make(chan *fakePull, buffer)}
}

func (f *fakeConsumer) Fetch(n int, _ ...jetstream.FetchOpt) (jetstream.MessageBatch, error) {
	p := &fakePull{n: n, msgs: make(chan jetstream.Msg, n), ended: make(chan struct{})}
	f.mu.Lock()
	f.all = append(f.all, p)
	f.mu.Unlock()
	f.pulls <- p
	return p, nil
}

// endAll ends every pull sent so far.
func (f *fakeConsumer) endAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.all {
		p.end(nil)
	}
}

// next returns the next pull the loop sent, failing the test if none comes.
func (f *fakeConsumer) next(t *testing.T, what string) *fakePull {
	t.Helper()
	select {
	case p := <-f.pulls:
		return p
	case <-time.After(10 * time.Second):
		t.Fatalf("no pull sent: %s", what)
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
func (m *fakeMsg) Headers() nats.Header               { return m.m.Header }
func (m *fakeMsg) Data() []byte                       { return m.m.Data }
func (m *fakeMsg) InProgress() error                  { return nil }
func (m *fakeMsg) NakWithDelay(d time.Duration) error { return m.Nak() }
func (m *fakeMsg) Nak() error                         { m.nakOnce.Do(func() { close(m.nakked) }); return nil }
func (m *fakeMsg) Term() error                        { return nil }
func (m *fakeMsg) TermWithReason(string) error        { return nil }
func (m *fakeMsg) Ack() error                         { return m.DoubleAck(context.Background()) }
func (m *fakeMsg) DoubleAck(ctx context.Context) error {
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
	cfg.FetchWait = time.Hour // pulls end only when the test ends them
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
		var workers sync.WaitGroup
		c.fetchLoop(ctx, fake, &workers)
		close(l.fetched)
		workers.Wait()
		close(l.drained)
	}()
	t.Cleanup(func() {
		cancel()
		fake.endAll()
		for { // end pulls sent meanwhile too, and unblock a Fetch waiting for next
			select {
			case p := <-fake.pulls:
				p.end(nil)
			case <-l.drained:
				return
			}
		}
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

// TestPullOutstandingForEveryFreeSlot: while one pull is still open, the loop sends further
// pulls until every free worker slot has one (each asking for at most FetchBatch), instead
// of waiting for the first pull to end.
func TestPullOutstandingForEveryFreeSlot(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		concurrency int
		batch       int
		want        []int // sizes of the pulls open at once
	}{
		{"one slot each", 2, 1, []int{1, 1}},
		{"two batches of two", 4, 2, []int{2, 2}},
		{"remainder", 3, 2, []int{2, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := newFakeConsumer(1000)
			startLoop(t, fake, func(c *Config) { c.Concurrency, c.FetchBatch = tt.concurrency, tt.batch }, &recorder{})
			for i, want := range tt.want {
				// No pull has ended: the old loop never sent the second one.
				if p := fake.next(t, "a pull for every free slot"); p.n != want {
					t.Errorf("pull %d asks for %d messages, want %d", i, p.n, want)
				}
			}
		})
	}
}

// TestFreedSlotIsPulledWhileOtherPullsWait: with Concurrency 3 and FetchBatch 2, message A
// blocks its handler and its pull of 2 stays open waiting for a second message; B comes on
// the pull of 1 for the third slot. As soon as B's handler returned, its slot gets a pull
// of its own, and C is handled through it, while A still blocks and A's pull is still open.
func TestFreedSlotIsPulledWhileOtherPullsWait(t *testing.T) {
	t.Parallel()
	fake := newFakeConsumer(1000)
	releaseA := make(chan struct{})
	handled := make(chan string, 10)
	h := HandlerFunc(func(ctx context.Context, cmd events.Command, at Attempt) Disposition {
		handled <- cmd.ID
		if cmd.ID == "A" {
			<-releaseA
		}
		return Disposition{Action: Ack}
	})
	startLoop(t, fake, func(c *Config) { c.Concurrency, c.FetchBatch = 3, 2 }, h)
	t.Cleanup(func() { close(releaseA) })

	p1, p2 := fake.next(t, "first pull"), fake.next(t, "second pull")
	if p1.n != 2 || p2.n != 1 {
		t.Fatalf("pulls ask for %d and %d, want 2 and 1", p1.n, p2.n)
	}
	a := newFakeMsg(testConfig().Subjects, "A", 1, nil)
	p1.deliver(t, a)
	if got := <-handled; got != "A" {
		t.Fatalf("handled %s, want A", got)
	}
	b := newFakeMsg(testConfig().Subjects, "B", 2, nil)
	p2.deliver(t, b)
	p2.end(nil) // a pull ends once it got all it asked for
	if got := <-handled; got != "B" {
		t.Fatalf("handled %s, want B", got)
	}
	wait(t, b.acked, "B acked")
	// p1 still waits for its second message (a real pull does until FetchWait); the slot B
	// freed has a pull of its own all the same.
	p3 := fake.next(t, "a pull for B's freed slot while A blocks")
	if p3.n != 1 {
		t.Errorf("pull for the freed slot asks for %d, want 1", p3.n)
	}
	p3.deliver(t, newFakeMsg(testConfig().Subjects, "C", 3, nil))
	if got := <-handled; got != "C" {
		t.Fatalf("handled %s, want C", got)
	}
	if isClosed(p1.ended) {
		t.Error("A's pull was ended")
	}
	if isClosed(a.acking) {
		t.Error("A was settled while its handler still blocks")
	}
}

// TestSlotFreedBeforeAck: with Concurrency 1, the next pull is sent and its message handled
// while the previous message's DoubleAck is still in flight.
func TestSlotFreedBeforeAck(t *testing.T) {
	t.Parallel()
	fake := newFakeConsumer(1000)
	rec := &recorder{}
	l := startLoop(t, fake, func(c *Config) { c.Concurrency = 1 }, rec)
	gate := make(chan struct{})
	t.Cleanup(func() { close(gate) })

	s := testConfig().Subjects
	a := newFakeMsg(s, "A", 1, gate)
	fake.next(t, "first pull").deliver(t, a)
	wait(t, a.acking, "A's ack started")
	p2 := fake.next(t, "a pull while A's ack is in flight")
	b := newFakeMsg(s, "B", 2, nil)
	p2.deliver(t, b)
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

// TestDrainWaitsForInFlightAck: after cancellation the loop stops pulling and returns once its
// pulls ended, but the drain is complete only when an ack that was in flight returned.
func TestDrainWaitsForInFlightAck(t *testing.T) {
	t.Parallel()
	fake := newFakeConsumer(1000)
	l := startLoop(t, fake, func(c *Config) { c.Concurrency = 1 }, &recorder{})
	gate := make(chan struct{})

	a := newFakeMsg(testConfig().Subjects, "A", 1, gate)
	fake.next(t, "first pull").deliver(t, a)
	wait(t, a.acking, "A's ack started")
	fake.next(t, "pull for the freed slot")

	l.cancel()
	fake.endAll()
	wait(t, l.fetched, "fetch loop returned")
	if l.c.Ready() {
		t.Error("ready after the drain began")
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

// TestMessagesAfterCancelAreNaked: a message that an open pull delivers after cancellation
// is nak'ed for immediate redelivery, never handled, and the consumer is not ready from the
// moment of cancellation, while that pull is still open.
func TestMessagesAfterCancelAreNaked(t *testing.T) {
	t.Parallel()
	fake := newFakeConsumer(1000)
	rec := &recorder{}
	l := startLoop(t, fake, func(c *Config) { c.Concurrency, c.FetchBatch = 2, 1 }, rec)
	p1, p2 := fake.next(t, "first pull"), fake.next(t, "second pull")

	l.cancel()
	eventually(t, 10*time.Second, "not ready after cancellation", func() bool { return !l.c.Ready() })
	late := newFakeMsg(testConfig().Subjects, "late", 1, nil)
	p1.deliver(t, late)
	wait(t, late.nakked, "late message nak'ed")
	p1.end(nil)
	p2.end(nil)
	wait(t, l.drained, "drain complete")
	if n := rec.count(); n != 0 {
		t.Errorf("handled %d messages after cancellation, want 0", n)
	}
	if isClosed(late.acking) {
		t.Error("late message was acked")
	}
}

// TestReadyFollowsPulls: Ready turns true with the first pull, false when a pull fails, and
// true again once the loop pulls again after its backoff.
func TestReadyFollowsPulls(t *testing.T) {
	t.Parallel()
	fake := newFakeConsumer(0) // the pull after the failure waits for the test
	l := startLoop(t, fake, func(c *Config) { c.Concurrency, c.FetchBatch = 2, 1 }, &recorder{})
	p1 := fake.next(t, "first pull")
	fake.next(t, "second pull")
	eventually(t, 10*time.Second, "ready after the first pull", l.c.Ready)

	p1.end(errFakePull)
	eventually(t, 10*time.Second, "not ready after a failed pull", func() bool { return !l.c.Ready() })
	p3 := fake.next(t, "a pull after the backoff")
	if p3.n != 1 {
		t.Errorf("pull after the backoff asks for %d, want 1", p3.n)
	}
	eventually(t, 10*time.Second, "ready again", l.c.Ready)
}

// ackFailing wraps a real consumer so that the first delivery of every message fails its
// DoubleAck without reaching the server, as an ack lost on the way would.
type ackFailing struct {
	jetstream.Consumer
	wg sync.WaitGroup // the relaying goroutines; waited for by the test's cleanup
}

func (a *ackFailing) Fetch(n int, opts ...jetstream.FetchOpt) (jetstream.MessageBatch, error) {
	b, err := a.Consumer.Fetch(n, opts...)
	if err != nil {
		return nil, err
	}
	out := &relayedBatch{src: b, msgs: make(chan jetstream.Msg, n)}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer close(out.msgs)
		for m := range b.Messages() {
			out.msgs <- failFirstAck{m}
		}
	}()
	return out, nil
}

type relayedBatch struct {
	src  jetstream.MessageBatch
	msgs chan jetstream.Msg
}

func (r *relayedBatch) Messages() <-chan jetstream.Msg { return r.msgs }
func (r *relayedBatch) Error() error                   { return r.src.Error() }

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
		var workers sync.WaitGroup
		c.fetchLoop(ctx, wrapped, &workers)
		workers.Wait()
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		wrapped.wg.Wait()
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
	m := &beatMsg{block: true, entered: make(chan struct{}), gate: make(chan struct{})}
	stop := c.heartbeat(m)
	wait(t, m.entered, "third beat")

	stopped := make(chan struct{})
	go func() { // waited for below
		stop()
		close(stopped)
	}()
	if isClosed(stopped) {
		t.Fatal("stop returned while a beat is in flight")
	}
	close(m.gate)
	wait(t, stopped, "stop")
	stop() // a second stop is harmless
	if n := m.count(); n != 3 {
		t.Errorf("%d beats, want 3 (none after stop)", n)
	}
}
