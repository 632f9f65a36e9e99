package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
)

// ErrAlreadyRunning is returned by [Consumer.Run] when Run is already running on the same
// Consumer.
var ErrAlreadyRunning = errors.New("consumer: already running")

// opTimeout bounds each JetStream operation done on behalf of a message after its handler
// returned (publishing a dead letter or result, acking), which must not be abandoned on
// shutdown.
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
	return &Consumer{js: js, cfg: cfg, handler: h, pub: pub, em: em, log: log}, nil
}

// Ready reports whether Run is fetching commands: true once Run has bound to the durable
// consumer and its last fetch did not fail, false before, while the server is unreachable,
// and from the moment draining starts.
func (c *Consumer) Ready() bool { return c.ready.Load() }

// Run fetches and dispatches commands until ctx is cancelled, then drains: it stops
// fetching (a message that arrives from a pull still open after cancellation is nak'ed for
// immediate redelivery elsewhere), lets every in-flight Handle finish while heartbeating
// InProgress so nothing is redelivered, applies their dispositions, and returns. It also runs
// the max-deliveries advisory subscriber (one replica handles each advisory) and, every
// SweepInterval, a sweep for commands whose advisory was missed. Every goroutine Run starts has ended when it
// returns.
//
// Run returns nil on a clean drain, and nil at once when ctx is done before it started. It
// returns an error, without draining anything, when the durable consumer or the streams
// cannot be found at start (run [Provision] first) or the advisory subscription fails, and
// ErrAlreadyRunning when called twice concurrently.
// Transient fetch errors later are logged and retried with backoff (Ready is false meanwhile).
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

	var workers sync.WaitGroup
	c.fetchLoop(ctx, cons, &workers)
	c.ready.Store(false)
	c.log.Info("draining: waiting for in-flight commands")
	workers.Wait()
	adv.stop()
	c.log.Info("drained")
	return nil
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

// fetchLoop keeps a pull request outstanding for every free worker while ctx is live. It
// waits for a free worker slot, reserves it and any other free ones (up to FetchBatch), sends
// one pull for that many messages, hands the pull to a goroutine ([Consumer.deliver]) and at
// once goes back to waiting for the next free slot, so one pull waiting FetchWait for
// messages never delays the next. A pull never asks for more messages than it reserved
// slots, so no delivered message waits unattended. A worker frees its slot as soon as its
// handler returned, before the message is acked (the server's MaxAckPending still bounds the
// unacknowledged messages), so on a busy stream the next message is already requested while
// the previous ack is in flight: one round trip per message instead of two.
//
// A failed pull marks the consumer not ready and delays the next pull by a backoff. When ctx
// is done fetchLoop stops pulling, marks the consumer not ready and returns once every pull
// request it sent has ended (at most FetchWait later) and every message delivered has a
// worker or was nak'ed; workers may still be running.
func (c *Consumer) fetchLoop(ctx context.Context, cons jetstream.Consumer, workers *sync.WaitGroup) {
	slots := make(chan struct{}, c.cfg.Concurrency)
	release := func(n int) {
		for range n {
			<-slots
		}
	}
	// ended receives each pull's outcome once it ended. The loop reads it whenever it waits
	// for a slot; deliver gives up sending once ctx is done, when the loop no longer reads.
	ended := make(chan error, c.cfg.Concurrency)
	var pulls sync.WaitGroup
	defer pulls.Wait()
	defer c.ready.Store(false) // runs before pulls.Wait: not ready from the drain on
	failures := 0
	for {
		if ctx.Err() != nil { // select below picks at random when a slot is free too
			return
		}
		// Wait for one free worker (or a pull's outcome), then take up to FetchBatch.
		select {
		case err := <-ended:
			c.pullsEnded(ctx, pending(ended, err), &failures)
			continue
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		n := 1
	fill:
		for n < c.cfg.FetchBatch {
			select {
			case slots <- struct{}{}:
				n++
			default:
				break fill
			}
		}
		// A failed pull reports before it frees its slots: account for it (and back off)
		// before pulling again with them.
		if c.pullsEnded(ctx, pending(ended), &failures) {
			release(n)
			continue
		}

		// The pull is not tied to ctx: cancelling a pending pull request client-side would
		// leave the server delivering into a closed inbox, and those messages would wait
		// AckWait for redelivery. It ends by itself after FetchWait.
		batch, err := cons.Fetch(n, jetstream.FetchMaxWait(c.cfg.FetchWait))
		if err != nil {
			release(n)
			c.pullsEnded(ctx, []error{err}, &failures)
			continue
		}
		c.ready.Store(ctx.Err() == nil)
		pulls.Add(1)
		go func() {
			defer pulls.Done()
			c.deliver(ctx, batch, n, release, workers, ended)
		}()
	}
}

// deliver serves one pull that reserved n worker slots: it starts a worker per message (or,
// once ctx is done, naks the message for immediate redelivery and frees its slot), then
// reports the pull's outcome on ended (its error, or nil; nil too for an error after ctx is
// done) and only then frees the slots no message used. Each worker frees its slot once its
// handler returned and is counted in workers until its message is settled.
func (c *Consumer) deliver(ctx context.Context, batch jetstream.MessageBatch, n int, release func(int), workers *sync.WaitGroup, ended chan<- error) {
	got := 0
	for msg := range batch.Messages() {
		got++
		if ctx.Err() != nil {
			c.nakForDrain(msg)
			release(1)
			continue
		}
		workers.Add(1)
		go func() {
			defer workers.Done()
			free := sync.OnceFunc(func() { release(1) })
			defer free()
			c.process(ctx, msg, free)
		}()
	}
	err := batch.Error()
	if ctx.Err() != nil {
		err = nil
	}
	select {
	case ended <- err:
	case <-ctx.Done(): // fetchLoop no longer reads outcomes
	}
	release(n - got)
}

// pending returns the outcomes in first followed by every outcome already waiting on ended.
func pending(ended <-chan error, first ...error) []error {
	for {
		select {
		case err := <-ended:
			first = append(first, err)
		default:
			return first
		}
	}
}

// pullsEnded accounts for the outcomes of ended pulls and reports whether any failed. A
// failure counts towards the backoff, marks the consumer not ready and waits the backoff
// (see fetchFailed); a success resets the count unless a failure is among the outcomes.
func (c *Consumer) pullsEnded(ctx context.Context, outcomes []error, failures *int) (failed bool) {
	var last error
	for _, err := range outcomes {
		switch {
		case err != nil:
			*failures++
			last = err
		case last == nil:
			*failures = 0
		}
	}
	if last == nil {
		return false
	}
	c.fetchFailed(ctx, last, *failures)
	return true
}

// fetchFailed logs a failed pull, marks the consumer not ready and waits a backoff (up to
// 5s) or until ctx is done.
func (c *Consumer) fetchFailed(ctx context.Context, err error, failures int) {
	c.ready.Store(false)
	wait := min(time.Duration(failures)*250*time.Millisecond, 5*time.Second)
	c.log.Warn("fetch failed", "err", err, "failures", failures, "retry_in", wait)
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
