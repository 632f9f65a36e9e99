package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/deadletter"
	"github.com/proxbus/proxbus/internal/schedule"
)

// Delays of the redeliveries the consumer decides on itself.
const (
	// panicDelay is how long the message of a handler that panicked (or returned an unknown
	// action) rests before it is delivered again.
	panicDelay = time.Second
	// deadLetterRetryDelay is how long a message whose dead-lettering could not be completed
	// rests before it is delivered again.
	deadLetterRetryDelay = 5 * time.Second
)

// process handles one delivery from start to its final ack, nak or term, heartbeating
// InProgress until it is settled. ctx is the Run context: it is passed to the handler, and
// everything after the handler returned runs without its cancellation.
func (c *Consumer) process(ctx context.Context, delivery jetstream.Msg) {
	msg := c.keepAlive(delivery)
	defer msg.stop()

	meta, err := msg.Metadata()
	if err != nil {
		// Not a JetStream delivery we can account for; leave it to AckWait redelivery.
		c.log.Error("message without JetStream metadata", "subject", msg.Subject(), "err", err)
		return
	}
	d := events.Delivery{Number: meta.NumDelivered, Stored: meta.Timestamp, StreamSeq: meta.Sequence.Stream}
	o := deadletter.Original{
		Subject:    msg.Subject(),
		Header:     msg.Headers(),
		Data:       msg.Data(),
		StreamSeq:  d.StreamSeq,
		Deliveries: d.Number,
	}
	cmd, err := events.Decode(msg.Subject(), msg.Headers(), msg.Data(), c.cfg.Subjects)
	if err != nil {
		c.poison(context.WithoutCancel(ctx), msg, o, err)
		return
	}
	if cmd.Firing != nil { // a scheduled command's id, time and expires come from its firing time
		cmd = cmd.Fired(schedule.FiringTime(*cmd.Firing, d.Stored))
	}
	disp := c.handler.Handle(ctx, cmd, d)
	c.apply(context.WithoutCancel(ctx), msg, o, cmd, disp)
}

// settling is a delivery kept alive with InProgress every Heartbeat by a goroutine of its
// own. The heartbeat stops just before the message is settled (acked, nak'ed or terminated),
// so no InProgress can follow the final answer and, e.g., undo a nak's delay.
type settling struct {
	jetstream.Msg
	// stop ends the heartbeat and returns once its goroutine has ended; it may be called
	// more than once.
	stop func()
}

// keepAlive starts msg's heartbeat: the first InProgress is sent Heartbeat after the call.
// The caller must call stop on the returned message.
func (c *Consumer) keepAlive(msg jetstream.Msg) settling {
	done := make(chan struct{})
	var beating sync.WaitGroup
	beating.Go(func() {
		t := time.NewTicker(c.cfg.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if err := msg.InProgress(); err != nil {
					c.log.Warn("in-progress heartbeat failed", "subject", msg.Subject(), "err", err)
				}
			case <-done:
				return
			}
		}
	})
	return settling{Msg: msg, stop: sync.OnceFunc(func() {
		close(done)
		beating.Wait()
	})}
}

func (m settling) DoubleAck(ctx context.Context) error { m.stop(); return m.Msg.DoubleAck(ctx) }
func (m settling) Ack() error                          { m.stop(); return m.Msg.Ack() }
func (m settling) Nak() error                          { m.stop(); return m.Msg.Nak() }
func (m settling) NakWithDelay(d time.Duration) error  { m.stop(); return m.Msg.NakWithDelay(d) }
func (m settling) Term() error                         { m.stop(); return m.Msg.Term() }
func (m settling) TermWithReason(r string) error       { m.stop(); return m.Msg.TermWithReason(r) }

// guard calls h, turning a panic into a logged Redeliver so one bad command cannot take the
// process down.
func (c *Consumer) guard(ctx context.Context, h Handler, cmd events.Command, d events.Delivery) (disp events.Disposition) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("handler panicked; the command will be redelivered",
				"command_id", cmd.ID, "verb", cmd.Verb, "delivery", d.Number, "panic", fmt.Sprint(r))
			disp = events.Disposition{Action: events.Redeliver, Delay: panicDelay}
		}
	}()
	return h.Handle(ctx, cmd, d)
}

// apply carries out a handler's disposition.
func (c *Consumer) apply(ctx context.Context, msg settling, o deadletter.Original, cmd events.Command, disp events.Disposition) {
	log := c.log.With("command_id", cmd.ID, "verb", cmd.Verb, "stream_seq", o.StreamSeq, "delivery", o.Deliveries)
	switch disp.Action {
	case events.Ack:
		actx, cancel := context.WithTimeout(ctx, opTimeout)
		defer cancel()
		if err := msg.DoubleAck(actx); err != nil {
			// The handler already published the result; a redelivery replays it.
			log.Warn("ack failed; the command will be redelivered", "err", err)
		}
	case events.Redeliver:
		c.redeliver(msg, max(disp.Delay, 0), log)
	case events.DeadLetter:
		reason := disp.Reason
		if reason == "" {
			reason = deadletter.ReasonDeadLetter
		}
		c.deadLetterAndTerm(ctx, msg, o, cmd.Verb, reason, "")
	default:
		log.Error("unknown disposition; the command will be redelivered", "action", int(disp.Action))
		c.redeliver(msg, panicDelay, log)
	}
}

// redeliver naks msg so it is delivered again after delay (at once when 0).
func (c *Consumer) redeliver(msg settling, delay time.Duration, log *slog.Logger) {
	var err error
	if delay == 0 {
		err = msg.Nak()
	} else {
		err = msg.NakWithDelay(delay)
	}
	if err != nil {
		log.Warn("nak failed; the command will be redelivered after AckWait", "err", err)
		return
	}
	log.Debug("command will be redelivered", "delay", delay)
}

// poison handles a message that cannot be a command: the 400 result where an id is readable,
// the dead-letter copy (reason invalid_command, detail the decoder's reason), and
// TermWithReason. If either publish fails the message is nak'ed with a delay, so nothing is
// lost; both publishes are deduplicated on the next delivery.
func (c *Consumer) poison(ctx context.Context, msg settling, o deadletter.Original, decodeErr error) {
	var p *events.PoisonError
	if !errors.As(decodeErr, &p) {
		p = &events.PoisonError{Reason: "undecodable", Err: decodeErr}
	}
	verb := p.Verb
	if verb == "" {
		if v, ok := c.cfg.Subjects.VerbOf(o.Subject); ok {
			verb = v
		}
	}
	log := c.log.With("reason", p.Reason, "subject", o.Subject, "stream_seq", o.StreamSeq)
	log.Warn("poison message", "err", decodeErr)

	if r, origin, ok := events.InvalidCommandResult(p); ok {
		if err := c.publishResult(ctx, origin, r); err != nil {
			c.nakAfterFailure(msg, log, err)
			return
		}
	}
	c.deadLetterAndTerm(ctx, msg, o, verb, deadletter.ReasonInvalidCommand, p.Reason)
}

// deadLetterAndTerm copies the message to the dead-letter stream and terminates it; if the
// copy cannot be stored, the message is nak'ed with a delay instead.
func (c *Consumer) deadLetterAndTerm(ctx context.Context, msg settling, o deadletter.Original, verb, reason, detail string) {
	dctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if err := c.deadLetter(dctx, o, verb, reason, detail); err != nil {
		c.nakAfterFailure(msg, c.log.With("stream_seq", o.StreamSeq), err)
		return
	}
	term := reason
	if detail != "" {
		term += ": " + detail
	}
	if err := msg.TermWithReason(term); err != nil {
		c.log.Warn("term failed; the dead letter is deduplicated on redelivery", "stream_seq", o.StreamSeq, "err", err)
	}
}

// publishResult publishes the result event of the command o names.
func (c *Consumer) publishResult(ctx context.Context, o events.Origin, r events.Result) error {
	pctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return c.pub.Publish(pctx, o, r)
}

// nakAfterFailure naks a message whose dead-lettering could not be completed.
func (c *Consumer) nakAfterFailure(msg settling, log *slog.Logger, cause error) {
	log.Error("could not dead-letter; will retry", "err", cause, "delay", deadLetterRetryDelay)
	if err := msg.NakWithDelay(deadLetterRetryDelay); err != nil {
		log.Error("nak failed", "err", err)
	}
}
