package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/beat"
)

// ErrAlreadyRunning is returned by [Consumer.Run] when Run is already running on the same
// Consumer.
var ErrAlreadyRunning = errors.New("consumer: already running")

// opTimeout bounds each JetStream operation done on behalf of a message after its handler
// returned (publishing a dead letter or result, acking), which must not be abandoned on
// shutdown. An ack gets between opTimeout/2 and opTimeout (see ackDeadline).
const opTimeout = 10 * time.Second

// Consumer pulls commands from the durable consumer and dispatches them to a Handler with a
// bounded worker pool. Create it with [New]; it runs while [Consumer.Run] runs.
type Consumer struct {
	js      jetstream.JetStream
	cfg     Config
	handler Handler
	pub     *Publisher
	em      events.Emitter
	log     *slog.Logger

	running atomic.Bool
	ready   atomic.Bool
	// maxDeliver is the durable's MaxDeliver as the server has it, read by Run before any
	// worker starts (0 = unlimited).
	maxDeliver int
	// acks gives every DoubleAck its deadline (opTimeout at most).
	acks ackDeadline
}

// New returns a Consumer for the durable cfg.Durable on the commands stream. It does not
// contact the server: [Provision] creates the streams and consumer, Run uses them. It returns
// ErrInvalidConfig (wrapped) when js, h or pub is nil or cfg cannot work.
func New(js jetstream.JetStream, cfg Config, h Handler, pub *Publisher, em events.Emitter) (*Consumer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if js == nil || h == nil || pub == nil {
		return nil, fmt.Errorf("%w: jetstream, handler and publisher are required", ErrInvalidConfig)
	}
	log := cfg.Logger.With("component", "consumer", "durable", cfg.Durable)
	if cfg.Instance != "" {
		log = log.With("instance", cfg.Instance)
	}
	return &Consumer{js: js, cfg: cfg, handler: h, pub: pub, em: em, log: log, acks: ackDeadline{timeout: opTimeout}}, nil
}

// Ready reports whether Run is pulling commands: true once Run has opened its pull
// subscription on the durable consumer and the subscription last reported no error, false
// before, while the server is unreachable (missed heartbeats), and from the moment draining
// starts.
func (c *Consumer) Ready() bool { return c.ready.Load() }

// Run pulls and dispatches commands until ctx is cancelled, then drains: it stops pulling
// (a message that was requested ahead and arrives after cancellation is nak'ed for immediate
// redelivery elsewhere), lets every in-flight Handle finish while heartbeating
// InProgress so nothing is redelivered, applies their dispositions, and returns. It also runs
// the max-deliveries advisory subscriber (one replica handles each advisory) and, every
// SweepInterval, a sweep for commands whose advisory was missed. Every goroutine Run starts has ended when it
// returns.
//
// Run returns nil on a clean drain, and nil at once when ctx is done before it started. It
// returns an error, without draining anything, when the durable consumer or the streams
// cannot be found at start (run [Provision] first) or the advisory subscription fails, and
// ErrAlreadyRunning when called twice concurrently.
// Transient pull errors later are logged and retried with backoff (Ready is false meanwhile).
func (c *Consumer) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer c.running.Store(false)

	s := c.cfg.Subjects
	cons, err := c.js.Consumer(ctx, s.CommandsStream(), c.cfg.Durable)
	if err != nil {
		return c.startFailed(ctx, fmt.Errorf("consumer %s on %s: %w", c.cfg.Durable, s.CommandsStream(), err))
	}
	c.maxDeliver = max(cons.CachedInfo().Config.MaxDeliver, 0)
	streams, err := c.openStreams(ctx)
	if err != nil {
		return c.startFailed(ctx, err)
	}
	adv, err := c.startAdvisories(ctx, cons, streams)
	if err != nil {
		return c.startFailed(ctx, err)
	}

	c.consume(ctx, cons, nil)
	adv.stop()
	c.log.Info("drained")
	return nil
}

// consume dispatches the durable's messages to workers until ctx is done (fetchLoop), then
// waits for every worker to settle its message. The messages in flight are heartbeated until
// they are settled, also while draining. fetched, when not nil, is called once fetching has
// ended, before the wait.
func (c *Consumer) consume(ctx context.Context, cons jetstream.Consumer, fetched func()) {
	beats := beat.NewGroup(c.cfg.Heartbeat)
	beatCtx, stopBeats := context.WithCancel(context.WithoutCancel(ctx))
	var beating sync.WaitGroup
	beating.Go(func() { beats.Run(beatCtx) })
	defer func() {
		stopBeats()
		beating.Wait()
	}()

	var workers sync.WaitGroup
	c.fetchLoop(ctx, cons, beats, &workers)
	if fetched != nil {
		fetched()
	}
	c.log.Info("draining: waiting for in-flight commands")
	workers.Wait()
	c.acks.release()
}

// startFailed is Run's result when it could not start: nil when ctx was already done (there
// is nothing to drain), else err.
func (c *Consumer) startFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// streamSet holds the handles of the commands and events streams.
type streamSet struct {
	commands jetstream.Stream
	events   jetstream.Stream
}

func (c *Consumer) openStreams(ctx context.Context) (streamSet, error) {
	s := c.cfg.Subjects
	cmd, err := c.js.Stream(ctx, s.CommandsStream())
	if err != nil {
		return streamSet{}, fmt.Errorf("stream %s: %w", s.CommandsStream(), err)
	}
	evt, err := c.js.Stream(ctx, s.EventsStream())
	if err != nil {
		return streamSet{}, fmt.Errorf("stream %s: %w", s.EventsStream(), err)
	}
	return streamSet{commands: cmd, events: evt}, nil
}

// fetchLoop keeps FetchBatch messages requested ahead of the workers, on one long-lived pull
// subscription (nats.go's message iterator, which renews its pull requests, watches the
// server's heartbeats and pulls again after a reconnect), and hands each message to a worker
// as soon as one is free. The next message is requested before the previous one is acked, so
// the ack that frees a place under MaxAckPending finds a pull waiting and the server sends the
// next message at once: one round trip per message.
//
// A message is taken from the iterator only for a free worker, and workers free their slot
// as soon as their handler returned. With MaxAckPending at most Concurrency (the default) a
// delivered message therefore always finds a free worker: every busy worker holds an
// unacknowledged message. With MaxAckPending above Concurrency (replicas sharing the durable)
// up to FetchBatch messages may wait in the iterator for a worker of this replica, without
// heartbeats; see [Config.FetchBatch].
//
// The workers take turns at reading the iterator (leader and followers): the worker that
// reads a message hands the reading to an idle worker (or a new one) and handles the message
// itself, so a message reaches its handler without a hand-off between goroutines, and a
// worker's stack, grown by the commands it handled, serves the next ones. Workers handling or
// acking a message number at most 2×Concurrency.
//
// A failed iterator marks the consumer not ready and is replaced after a backoff. When ctx is
// done fetchLoop stops pulling, marks the consumer not ready, naks every message the iterator
// still delivers (immediate redelivery elsewhere) and returns; workers may still be running.
func (c *Consumer) fetchLoop(ctx context.Context, cons jetstream.Consumer, beats *beat.Group, workers *sync.WaitGroup) {
	defer c.ready.Store(false)
	l := &leadership{
		c: c, ctx: ctx, wg: workers, beats: beats,
		fetch: &fetcher{c: c, ctx: ctx, cons: cons, slots: make(chan struct{}, c.cfg.Concurrency)},
		turn:  make(chan struct{}), done: make(chan struct{}),
	}
	workers.Add(1)
	go l.work()
	<-l.done
}

// leadership is the consumer's workers taking turns at reading the iterator. The worker whose
// turn it is is the only one using fetch.
type leadership struct {
	c     *Consumer
	ctx   context.Context
	wg    *sync.WaitGroup
	fetch *fetcher
	// beats heartbeats the messages being handled: each worker has a slot in it.
	beats *beat.Group
	// turn passes the reading to an idle worker.
	turn chan struct{}
	// done is closed by the reader when fetching has ended; workers then return.
	done chan struct{}
}

// work reads a message, hands the reading on, handles the message and waits for its next
// turn, until fetching has ended.
func (l *leadership) work() {
	defer l.wg.Done()
	beats := l.beats.Slot()
	defer beats.Close()
	for {
		j, ok := l.fetch.next()
		if !ok {
			close(l.done)
			return
		}
		select {
		case l.turn <- struct{}{}:
		default:
			l.wg.Add(1)
			go l.work()
		}
		l.c.processReleasing(l.ctx, beats, j)
		select {
		case <-l.turn:
		case <-l.done:
			return
		}
	}
}

// job is one message for a worker and the release of the worker slot it was taken for.
type job struct {
	msg     jetstream.Msg
	release func()
}

// processReleasing processes j's message, heartbeating from beats, and releases its worker
// slot once the handler returned, or on return at the latest.
func (c *Consumer) processReleasing(ctx context.Context, beats *beat.Slot, j job) {
	released := false
	handled := func() { // process calls it on this goroutine
		if !released {
			released = true
			j.release()
		}
	}
	defer handled()
	c.process(ctx, beats, j.msg, handled)
}

// fetcher reads the durable through a message iterator, opening a new one when it fails. It
// is used by one goroutine at a time.
type fetcher struct {
	c     *Consumer
	ctx   context.Context
	cons  jetstream.Consumer
	slots chan struct{}

	it        jetstream.MessagesContext // nil when none is open
	stopDrain func() bool               // stops the drain of it on ctx's cancellation
	failures  int                       // failed pulls in a row
}

// next returns the next message for a free worker, with the release of the slot it holds. It
// returns false once ctx is done and the iterator is drained (every message it delivered went
// to a worker or was nak'ed). An iterator that ends, or cannot be opened, is replaced after a
// backoff; an error the iterator survives (missed heartbeats while the server is away) marks
// the consumer not ready and waits a backoff; the next message or idle wait marks it ready
// again.
func (f *fetcher) next() (job, bool) {
	c, ctx := f.c, f.ctx
	for {
		if f.it == nil {
			if ctx.Err() != nil {
				return job{}, false
			}
			if err := f.open(); err != nil {
				f.failures++
				c.fetchFailed(ctx, err, f.failures)
				continue
			}
		}
		// Wait for a free worker; once draining, take what the iterator still holds without
		// one, to nak it.
		held := false
		if ctx.Err() == nil {
			select {
			case f.slots <- struct{}{}:
				held = true
			case <-ctx.Done():
			}
		}
		release := func() {
			if held {
				<-f.slots
			}
		}
		msg, err := f.it.Next(jetstream.NextMaxWait(c.cfg.FetchWait))
		switch {
		case err == nil:
		case errors.Is(err, nats.ErrTimeout): // idle and healthy
			release()
			f.failures = 0
			c.ready.Store(ctx.Err() == nil)
			continue
		case errors.Is(err, jetstream.ErrMsgIteratorClosed):
			release()
			f.close()
			if ctx.Err() != nil {
				return job{}, false
			}
			f.failures++
			c.fetchFailed(ctx, err, f.failures)
			continue
		default:
			release()
			if ctx.Err() != nil {
				continue // the drain ends the iterator
			}
			f.failures++
			c.fetchFailed(ctx, err, f.failures)
			continue
		}
		f.failures = 0
		c.ready.Store(ctx.Err() == nil)
		if ctx.Err() != nil {
			c.nakForDrain(msg)
			release()
			continue
		}
		return job{msg: msg, release: release}, true
	}
}

// open opens a message iterator, drained when ctx is cancelled, and marks the consumer ready.
func (f *fetcher) open() error {
	it, err := f.cons.Messages(
		jetstream.PullMaxMessages(f.c.cfg.FetchBatch),
		jetstream.PullExpiry(f.c.cfg.pullExpiry()),
		jetstream.WithMessagesErrOnMissingHeartbeat(true),
	)
	if err != nil {
		return err
	}
	f.it = it
	f.stopDrain = context.AfterFunc(f.ctx, it.Drain)
	f.c.ready.Store(true)
	return nil
}

// close stops the open iterator.
func (f *fetcher) close() {
	f.stopDrain()
	f.it.Stop()
	f.it = nil
}

// fetchFailed logs a failed pull, marks the consumer not ready and waits a backoff (up to
// 5s) or until ctx is done.
func (c *Consumer) fetchFailed(ctx context.Context, err error, failures int) {
	c.ready.Store(false)
	wait := min(time.Duration(failures)*250*time.Millisecond, 5*time.Second)
	c.log.Warn("pull failed", "err", err, "failures", failures, "retry_in", wait)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// nakForDrain returns a message that arrived after draining began to the consumer at once,
// so another replica (or this one after restart) takes it without waiting AckWait.
func (c *Consumer) nakForDrain(msg jetstream.Msg) {
	if err := msg.Nak(); err != nil {
		c.log.Warn("nak during drain failed", "subject", msg.Subject(), "err", err)
	}
}
