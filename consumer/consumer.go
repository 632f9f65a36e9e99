package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/config"
)

// ErrAlreadyRunning is returned by [Consumer.Run] when Run is already running on the same
// Consumer.
var ErrAlreadyRunning = errors.New("consumer: already running")

// opTimeout bounds each JetStream operation done for a message after its handler returned
// (publishing a dead letter or result, acking), which is not abandoned on shutdown, and the
// drain of the message iterator.
const opTimeout = 10 * time.Second

// Consumer pulls commands from the durable consumer and hands each to a [Handler], at most
// [Config.Concurrency] at once. Create it with [New]; it runs while [Consumer.Run] runs.
type Consumer struct {
	js  jetstream.JetStream
	cfg Config
	// handler is the given handler behind the panic guard, wrapped in cfg.Middleware.
	handler Handler
	pub     *Publisher
	log     *slog.Logger

	running atomic.Bool
	ready   atomic.Bool
}

// New returns a Consumer for the durable cfg.Durable on the commands stream, handing each
// command to h wrapped in cfg.Middleware, and publishing through pub. It does not contact
// the server: [Provision] creates the streams and consumer, Run uses them. It returns
// an error wrapping config.ErrInvalid when js, h or pub is nil or cfg cannot work.
func New(js jetstream.JetStream, cfg Config, h Handler, pub *Publisher) (*Consumer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if js == nil || h == nil || pub == nil {
		return nil, fmt.Errorf("consumer: %w: jetstream, handler and publisher are required", config.ErrInvalid)
	}
	log := cfg.Logger.With("component", "consumer", "durable", cfg.Durable)
	if cfg.Instance != "" {
		log = log.With("instance", cfg.Instance)
	}
	c := &Consumer{js: js, cfg: cfg, pub: pub, log: log}
	c.handler = HandlerFunc(func(ctx context.Context, cmd events.Command, d events.Delivery) events.Disposition {
		return c.guard(ctx, h, cmd, d)
	})
	for _, mw := range slices.Backward(cfg.Middleware) {
		if mw != nil {
			c.handler = mw(c.handler)
		}
	}
	return c, nil
}

// Ready reports whether Run is pulling commands: true once Run has opened its message
// iterator on the durable consumer while connected, false before, while the iterator fails
// or the server is unreachable, and from the moment draining starts.
func (c *Consumer) Ready() bool { return c.ready.Load() }

// Run pulls and handles commands until ctx is cancelled, then drains: it stops pulling
// (a message that was requested ahead and arrives after cancellation is nak'ed for immediate
// redelivery elsewhere), lets every in-flight Handle finish while heartbeating InProgress so
// nothing is redelivered, applies their dispositions, and returns. Every goroutine Run starts
// has ended when it returns.
//
// Run returns nil on a clean drain, and nil at once when ctx is done before it started. It
// returns an error, without draining anything, when the durable consumer or the commands
// stream cannot be found at start (run [Provision] first), and ErrAlreadyRunning when called
// twice concurrently. Pull errors later are logged and retried with backoff (Ready is false
// meanwhile). A durable that still limits deliveries (created by an older version or by
// hand) is logged as a warning: run Provision.
func (c *Consumer) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer c.running.Store(false)

	stream := c.cfg.Subjects.CommandsStream()
	cons, err := c.js.Consumer(ctx, stream, c.cfg.Durable)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("consumer %s on %s: %w", c.cfg.Durable, stream, err)
	}
	if n := cons.CachedInfo().Config.MaxDeliver; n > 0 {
		c.log.Warn("the durable limits deliveries: a command still waiting after them is no longer delivered; run Provision (proxbus streams apply)",
			"max_deliver", n)
	}
	c.consume(ctx, cons)
	c.log.Info("drained")
	return nil
}

// consume hands the durable's messages to workers, one goroutine per message and at most
// Concurrency at once, until ctx is done; then it drains the iterator and waits for every
// worker to settle its message. A message is taken from the iterator only for a free worker.
func (c *Consumer) consume(ctx context.Context, cons jetstream.Consumer) {
	p := &puller{c: c, cons: cons, backoff: &backoff.ExponentialBackOff{
		InitialInterval:     250 * time.Millisecond,
		RandomizationFactor: backoff.DefaultRandomizationFactor,
		Multiplier:          2,
		MaxInterval:         5 * time.Second,
	}}
	var workers sync.WaitGroup
	busy := make(chan struct{}, c.cfg.Concurrency) // a token per worker
	for {
		select {
		case busy <- struct{}{}:
		case <-ctx.Done():
		}
		msg, ok := p.next(ctx)
		if !ok {
			break
		}
		workers.Go(func() {
			defer func() { <-busy }()
			c.process(ctx, msg)
		})
	}
	c.ready.Store(false)
	p.drain()
	c.log.Info("draining: waiting for in-flight commands")
	workers.Wait()
}

// puller reads the durable through nats.go's message iterator (which renews its pull
// requests, watches the server's heartbeats and pulls again after a reconnect), opening a
// new one after a backoff when it fails. It is used by consume's goroutine only.
type puller struct {
	c       *Consumer
	cons    jetstream.Consumer
	it      jetstream.MessagesContext // nil when none is open
	backoff *backoff.ExponentialBackOff
}

// next returns the next message, or false once ctx is done (a message that arrives then is
// nak'ed). Every FetchWait without a message it checks the connection, so Ready follows it.
// An error the iterator survives (missed heartbeats) marks the consumer not ready for a
// backoff; an iterator that ends, or cannot be opened, is replaced after one.
func (p *puller) next(ctx context.Context) (jetstream.Msg, bool) {
	c := p.c
	for ctx.Err() == nil {
		if p.it == nil {
			if err := p.open(); err != nil {
				p.failed(ctx, err)
				continue
			}
		}
		wait, cancel := context.WithTimeout(ctx, c.cfg.FetchWait)
		msg, err := p.it.Next(jetstream.NextContext(wait))
		cancel()
		switch {
		case err == nil && ctx.Err() != nil:
			c.nakForDrain(msg)
		case err == nil:
			p.backoff.Reset()
			c.ready.Store(true)
			return msg, true
		case ctx.Err() != nil:
		case errors.Is(err, context.DeadlineExceeded): // idle
			c.ready.Store(c.connected())
		case errors.Is(err, jetstream.ErrMsgIteratorClosed):
			p.it.Stop()
			p.it = nil
			p.failed(ctx, err)
		default:
			p.failed(ctx, err)
		}
	}
	return nil, false
}

// open opens a message iterator and marks the consumer ready when connected.
func (p *puller) open() error {
	it, err := p.cons.Messages(
		jetstream.PullMaxMessages(p.c.cfg.FetchBatch),
		jetstream.PullExpiry(p.c.cfg.pullExpiry()),
		jetstream.WithMessagesErrOnMissingHeartbeat(true),
	)
	if err != nil {
		return fmt.Errorf("open message iterator: %w", err)
	}
	p.it = it
	p.c.ready.Store(p.c.connected())
	return nil
}

// failed logs a failed pull, marks the consumer not ready and waits the next backoff or until
// ctx is done.
func (p *puller) failed(ctx context.Context, err error) {
	p.c.ready.Store(false)
	wait := p.backoff.NextBackOff()
	p.c.log.Warn("pull failed", "err", err, "retry_in", wait)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// drain stops the iterator's pulls and naks every message it still delivers, for immediate
// redelivery elsewhere, until it is drained, fails, or opTimeout passed; a message it did not
// see is redelivered after AckWait.
func (p *puller) drain() {
	if p.it == nil {
		return
	}
	defer p.it.Stop()
	p.it.Drain()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for {
		msg, err := p.it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return
		}
		p.c.nakForDrain(msg)
	}
}

// connected reports whether the JetStream connection is up. A JetStream without a connection
// of its own (a test double) counts as connected.
func (c *Consumer) connected() bool {
	nc := c.js.Conn()
	return nc == nil || nc.IsConnected()
}

// nakForDrain returns a message that arrived after draining began to the consumer at once,
// so another replica (or this one after restart) takes it without waiting AckWait.
func (c *Consumer) nakForDrain(msg jetstream.Msg) {
	if err := msg.Nak(); err != nil {
		c.log.Warn("nak during drain failed", "subject", msg.Subject(), "err", err)
	}
}
