package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
)

// Result fields of the 503 published for a command that exhausted MaxDeliver.
const (
	ReasonDeliveryAttemptsExhausted = "delivery_attempts_exhausted"
	resultFailed                    = "failed"
)

// advisoryQueue is the queue group of the max-deliveries advisory subscription, so each
// advisory is handled by one replica only.
const advisoryQueue = "proxbus-max-deliveries"

// maxDeliveriesAdvisory is the part of the server's
// io.nats.jetstream.advisory.v1.max_deliver event that we use.
type maxDeliveriesAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// MaxDeliveriesSubject is the advisory subject the server publishes to when a message of the
// given consumer exceeds MaxDeliver.
func MaxDeliveriesSubject(stream, consumer string) string {
	return "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + stream + "." + consumer
}

// advisories is the running advisory subscriber.
type advisories struct {
	sub  *nats.Subscription
	done chan struct{}
	wg   sync.WaitGroup
}

// stop unsubscribes and waits for the advisory goroutine, which finishes the advisory it is
// handling first.
func (a *advisories) stop() {
	_ = a.sub.Unsubscribe()
	close(a.done)
	a.wg.Wait()
}

// startAdvisories subscribes to the max-deliveries advisory and starts the goroutine that
// handles it; the same goroutine sweeps the commands stream every SweepInterval for
// exhausted messages whose advisory was missed (see [sweeper]). The returned advisories must
// be stopped.
func (c *Consumer) startAdvisories(ctx context.Context, cons jetstream.Consumer, st streamSet) (*advisories, error) {
	nc := c.js.Conn()
	if nc == nil {
		return nil, fmt.Errorf("%w: jetstream has no connection", ErrInvalidConfig)
	}
	ch := make(chan *nats.Msg, 64)
	subject := MaxDeliveriesSubject(c.cfg.Subjects.CommandsStream(), c.cfg.Durable)
	sub, err := nc.ChanQueueSubscribe(subject, advisoryQueue, ch)
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", subject, err)
	}
	a := &advisories{sub: sub, done: make(chan struct{})}
	// The handling context is not cancelled by Run's ctx: an exhausted command being
	// dead-lettered is finished before Run returns.
	hctx := context.WithoutCancel(ctx)
	sw := &sweeper{c: c, cons: cons, st: st}
	tick := time.NewTicker(c.cfg.SweepInterval)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer tick.Stop()
		sw.sweep(ctx)
		for {
			select {
			case <-tick.C:
				sw.sweep(ctx)
			case m := <-ch:
				var adv maxDeliveriesAdvisory
				if err := json.Unmarshal(m.Data, &adv); err != nil || adv.StreamSeq == 0 {
					c.log.Warn("unreadable max-deliveries advisory", "err", err)
					continue
				}
				if err := c.exhausted(hctx, st, adv.StreamSeq, adv.Deliveries); err != nil {
					c.log.Error("max-deliveries dead letter failed; the next start sweeps it", "stream_seq", adv.StreamSeq, "err", err)
				}
			case <-a.done:
				return
			}
		}
	}()
	return a, nil
}

// exhausted dead-letters the command at stream sequence seq with reason max_deliveries,
// publishes its 503 result unless a result already exists, and deletes it from the commands
// stream. A message that is already gone (another replica handled it) is not an error. Every
// step is idempotent (deduplicated by Nats-Msg-Id), so a repeat after a partial failure is
// safe. It returns the first failing step's error, wrapped.
func (c *Consumer) exhausted(ctx context.Context, st streamSet, seq, deliveries uint64) error {
	ctx, cancel := context.WithTimeout(ctx, 3*opTimeout)
	defer cancel()
	raw, err := st.commands.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get stream seq %d: %w", seq, err)
	}
	if deliveries == 0 {
		deliveries = uint64(c.cfg.MaxDeliver)
	}
	o := original{Subject: raw.Subject, Header: raw.Header, Data: raw.Data, StreamSeq: seq, Deliveries: deliveries}

	verb, _ := c.cfg.Subjects.VerbOf(raw.Subject)
	cmd, decErr := events.Decode(raw.Subject, raw.Header, raw.Data, c.cfg.Subjects)
	if decErr == nil {
		verb = cmd.Verb
	}
	if err := c.deadLetter(ctx, o, verb, ReasonMaxDeliveries, ""); err != nil {
		return err
	}
	if decErr == nil {
		if err := c.publishExhaustedResult(ctx, st, cmd, deliveries); err != nil {
			return err
		}
	}
	if err := st.commands.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("delete stream seq %d: %w", seq, err)
	}
	return nil
}

// publishExhaustedResult publishes the 503 delivery_attempts_exhausted result of cmd unless
// the events stream already holds a result for it.
func (c *Consumer) publishExhaustedResult(ctx context.Context, st streamSet, cmd events.Command, deliveries uint64) error {
	ref := cmd.Ref()
	_, err := st.events.GetLastMsgForSubject(ctx, c.cfg.Subjects.Result(ref))
	switch {
	case err == nil:
		return nil // the handler published a result before giving up
	case !errors.Is(err, jetstream.ErrMsgNotFound):
		return fmt.Errorf("look up result of %s: %w", ref, err)
	}
	r := events.Result{
		CommandID:        cmd.ID,
		CommandSource:    cmd.Source,
		Verb:             cmd.Verb,
		Status:           503,
		Result:           resultFailed,
		Reason:           ReasonDeliveryAttemptsExhausted,
		Detail:           fmt.Sprintf("the command was not completed after %d deliveries", deliveries),
		JournalFinalized: false,
	}
	o := events.OriginOf(cmd)
	if err := c.publishResult(ctx, o, r); err != nil {
		return fmt.Errorf("publish exhausted result of %s: %w", ref, err)
	}
	return nil
}

// sweeper finds commands that exceeded MaxDeliver while no replica listened to the advisory
// (e.g. the only replica restarted while a last delivery was in flight: the server gives up on
// it when AckWait expires, before the new process subscribed).
//
// On a WorkQueue stream an acked or terminated message is removed. So when the durable has
// nothing pending, a message still stored at or below the consumer's delivered stream
// sequence is one the consumer gave up on. A candidate is dead-lettered only when two sweeps
// in a row, SweepInterval apart, found it, so an ack still being applied is never mistaken
// for one. With commands always pending (a busy system) the sweep finds nothing; the
// advisory covers that case.
type sweeper struct {
	c    *Consumer
	cons jetstream.Consumer
	st   streamSet
	prev map[uint64]bool
}

// sweep runs one pass and dead-letters the candidates confirmed by the previous pass.
// Errors are logged; the next pass tries again.
func (w *sweeper) sweep(ctx context.Context) {
	cur, err := w.candidates(ctx)
	if err != nil {
		w.c.log.Warn("exhausted-command sweep failed", "err", err)
		return
	}
	next := map[uint64]bool{}
	for _, seq := range cur {
		if !w.prev[seq] {
			next[seq] = true
			continue
		}
		w.c.log.Warn("dead-lettering a command that exhausted its deliveries without an advisory", "stream_seq", seq)
		if err := w.c.exhausted(context.WithoutCancel(ctx), w.st, seq, 0); err != nil {
			w.c.log.Error("max-deliveries dead letter failed", "stream_seq", seq, "err", err)
			next[seq] = true
		}
	}
	w.prev = next
}

// candidates lists the stream sequences that look exhausted right now.
func (w *sweeper) candidates(ctx context.Context) ([]uint64, error) {
	info, err := w.cons.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("consumer info: %w", err)
	}
	if info.NumAckPending != 0 {
		return nil, nil
	}
	var out []uint64
	last := info.Delivered.Stream
	for seq := uint64(1); seq <= last; {
		raw, err := w.st.commands.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(w.c.cfg.Subjects.CommandsFilter()))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("get from seq %d: %w", seq, err)
		}
		if raw.Sequence > last {
			break
		}
		out = append(out, raw.Sequence)
		seq = raw.Sequence + 1
	}
	return out, nil
}
