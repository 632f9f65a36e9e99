package console

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
)

// feedRetry is how long the feed waits before it opens the events stream again after a
// failure (the stream not there yet, NATS away).
const feedRetry = 2 * time.Second

// feed reads the events stream into ix with an ordered consumer, starting historyEvents
// messages before its end, until ctx ends. An ordered consumer recreates itself after a
// server restart or a missed message; when even that fails, the stream is opened again.
func feed(ctx context.Context, js jetstream.JetStream, s events.Subjects, historyEvents int, ix *index, report func(error)) {
	for ctx.Err() == nil {
		err := feedOnce(ctx, js, s, historyEvents, ix)
		if ctx.Err() != nil {
			return
		}
		report(err)
		select {
		case <-ctx.Done():
		case <-time.After(feedRetry):
		}
	}
}

// feedOnce opens an ordered consumer at the history's start (or after the newest event
// already applied) and applies every message until ctx ends or the consumer fails.
func feedOnce(ctx context.Context, js jetstream.JetStream, s events.Subjects, historyEvents int, ix *index) error {
	st, err := js.Stream(ctx, s.EventsStream())
	if err != nil {
		return fmt.Errorf("events stream %s: %w", s.EventsStream(), err)
	}
	state := st.CachedInfo().State
	start := state.FirstSeq
	if state.LastSeq >= uint64(historyEvents) {
		start = max(start, state.LastSeq-uint64(historyEvents)+1)
	}
	ix.mu.RLock()
	start = max(start, ix.lastSeq+1)
	ix.mu.RUnlock()
	cons, err := js.OrderedConsumer(ctx, s.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{s.EventsFilter()},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    max(start, 1),
	})
	if err != nil {
		return fmt.Errorf("events stream %s: ordered consumer: %w", s.EventsStream(), err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("events stream %s: %w", s.EventsStream(), err)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer it.Stop()
	for {
		msg, err := it.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) && ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("events stream %s: %w", s.EventsStream(), err)
		}
		var seq uint64
		if meta, err := msg.Metadata(); err == nil {
			seq = meta.Sequence.Stream
		}
		if ev, err := events.ParseEvent(msg.Data()); err == nil {
			ix.apply(seq, ev)
		}
	}
}
