package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/beat"
)

// process handles one delivery from start to its final ack, nak or term, heartbeating
// InProgress the whole time. ctx is the Run context: it is passed to the handler, and
// everything after the handler returned runs without its cancellation.
//
// handled is called once the message's fate is decided and only JetStream round trips remain:
// after the handler returned (also after a panic turned into a Retry), or before a poison
// message is dead-lettered. The caller frees the worker slot there, so the next pull is
// outstanding while this message is acked. process may return without calling it (a message
// without JetStream metadata), so the caller also frees the slot, at most once, on return.
func (c *Consumer) process(ctx context.Context, beats *beat.Slot, delivery jetstream.Msg, handled func()) {
	stop := c.heartbeat(beats, delivery)
	defer stop()
	msg := settling{Msg: delivery, stop: stop}

	meta, err := msg.Metadata()
	if err != nil {
		// Not a JetStream delivery we can account for; leave it to AckWait redelivery.
		c.log.Error("message without JetStream metadata", "subject", msg.Subject(), "err", err)
		return
	}
	at := Attempt{Delivered: meta.NumDelivered, MaxDeliver: c.maxDeliver}
	o := original{
		Subject:    msg.Subject(),
		Header:     msg.Headers(),
		Data:       msg.Data(),
		StreamSeq:  meta.Sequence.Stream,
		Deliveries: meta.NumDelivered,
	}

	if meta.NumDelivered > 1 {
		verb, _ := c.cfg.Subjects.VerbOf(msg.Subject())
		c.observer().Redelivered(verb)
	}

	cmd, err := events.Decode(msg.Subject(), msg.Headers(), msg.Data(), c.cfg.Subjects)
	if err != nil {
		handled()
		c.poison(context.WithoutCancel(ctx), msg, o, at, err)
		return
	}
	hctx, hcmd, done := c.start(ctx, cmd, at)
	d := c.handle(hctx, hcmd, at)
	done(d)
	handled()
	c.apply(context.WithoutCancel(hctx), msg, o, cmd, at, d)
}

// heartbeat sends InProgress for msg every Heartbeat, from the worker's slot of the Run's
// heartbeat group, until the returned stop is called (see [beat.Slot]: the first beat comes
// between 3/4 of Heartbeat and Heartbeat after the delivery; stop waits for a beat in
// progress, and no beat starts after it returned). A message settled before its first beat
// costs no timer. stop releases whatever the slot holds, so it is called only while msg is
// held: process calls it before it returns and the slot's next message is held.
func (c *Consumer) heartbeat(beats *beat.Slot, msg jetstream.Msg) (stop func()) {
	beats.Hold(func() bool {
		if err := msg.InProgress(); err != nil {
			c.log.Warn("in-progress heartbeat failed", "subject", msg.Subject(), "err", err)
		}
		return true
	})
	return beats.Release
}

// settling is a delivery whose heartbeat stops just before it is settled (acked, nak'ed or
// terminated), so no InProgress can follow the final answer and, e.g., undo a nak's delay.
type settling struct {
	jetstream.Msg
	stop func()
}

func (m settling) DoubleAck(ctx context.Context) error { m.stop(); return m.Msg.DoubleAck(ctx) }
func (m settling) Ack() error                          { m.stop(); return m.Msg.Ack() }
func (m settling) Nak() error                          { m.stop(); return m.Msg.Nak() }
func (m settling) NakWithDelay(d time.Duration) error  { m.stop(); return m.Msg.NakWithDelay(d) }
func (m settling) Term() error                         { m.stop(); return m.Msg.Term() }
func (m settling) TermWithReason(r string) error       { m.stop(); return m.Msg.TermWithReason(r) }

// handle calls the handler, turning a panic into a logged Retry so one bad command cannot
// take the process down.
func (c *Consumer) handle(ctx context.Context, cmd events.Command, at Attempt) (d Disposition) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("handler panicked; retrying", "command_id", cmd.ID, "verb", cmd.Verb, "panic", fmt.Sprint(r))
			d = Disposition{Action: Retry}
		}
	}()
	return c.handler.Handle(ctx, cmd, at)
}

// apply carries out a handler's disposition.
func (c *Consumer) apply(ctx context.Context, msg jetstream.Msg, o original, cmd events.Command, at Attempt, d Disposition) {
	// The logger is built only where something is logged: the ack of every command is the
	// hot path.
	logger := func() *slog.Logger {
		return c.log.With("command_id", cmd.ID, "verb", cmd.Verb, "stream_seq", o.StreamSeq, "delivered", at.Delivered)
	}
	switch d.Action {
	case Ack:
		if err := msg.DoubleAck(c.acks.context()); err != nil {
			// The handler already published the result; a redelivery replays it.
			logger().Warn("ack failed; the command will be redelivered", "err", err)
		}
	case Retry:
		log := logger()
		delay := d.Delay
		if delay <= 0 {
			delay = c.cfg.backoff(at.Delivered)
		}
		if at.Last() {
			// No redelivery follows: nak at once so the server gives up now and the
			// max-deliveries dead letter and result are not delayed by a backoff.
			delay = 0
		}
		if err := msg.NakWithDelay(delay); err != nil {
			log.Warn("nak failed; the command will be redelivered after AckWait", "err", err)
			return
		}
		log.Info("command will be retried", "delay", delay, "last", at.Last())
	case DeadLetterAction:
		reason := d.Reason
		if reason == "" {
			reason = ReasonDeadLetter
		}
		c.deadLetterAndTerm(ctx, msg, o, cmd.Verb, reason, "", at)
	default:
		log := logger()
		log.Error("unknown disposition; retrying", "action", int(d.Action))
		if err := msg.NakWithDelay(c.cfg.backoff(at.Delivered)); err != nil {
			log.Warn("nak failed", "err", err)
		}
	}
}

// poison handles a message that cannot be a command: the 400 result where an id is readable,
// the dead-letter copy (reason invalid_command, detail the decoder's reason), and
// TermWithReason. If either publish fails the message is nak'ed
// with backoff, so nothing is lost; both publishes are deduplicated on the retry.
func (c *Consumer) poison(ctx context.Context, msg jetstream.Msg, o original, at Attempt, decodeErr error) {
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
			c.nakAfterFailure(msg, at, log, err)
			return
		}
	}
	c.deadLetterAndTerm(ctx, msg, o, verb, ReasonInvalidCommand, p.Reason, at)
}

// deadLetterAndTerm copies the message to the dead-letter stream and terminates it; if the
// copy cannot be stored, the message is nak'ed with backoff instead.
func (c *Consumer) deadLetterAndTerm(ctx context.Context, msg jetstream.Msg, o original, verb, reason, detail string, at Attempt) {
	dctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if err := c.deadLetter(dctx, o, verb, reason, detail); err != nil {
		c.nakAfterFailure(msg, at, c.log.With("stream_seq", o.StreamSeq), err)
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

// publishResult publishes a result event built by the emitter.
func (c *Consumer) publishResult(ctx context.Context, o events.Origin, r events.Result) error {
	res, m, err := c.em.Result(o, r)
	if err != nil {
		return fmt.Errorf("build result: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return c.pub.PublishEvent(pctx, m, res)
}

// nakAfterFailure naks a message whose dead-lettering could not be completed.
func (c *Consumer) nakAfterFailure(msg jetstream.Msg, at Attempt, log *slog.Logger, cause error) {
	delay := c.cfg.backoff(at.Delivered)
	log.Error("could not dead-letter; will retry", "err", cause, "delay", delay)
	if err := msg.NakWithDelay(delay); err != nil {
		log.Error("nak failed", "err", err)
	}
}
