package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/events"
)

// ErrResultTimeout is returned when no result event came within the result timeout; the
// command may still be running.
var ErrResultTimeout = errors.New("ingress: no result within the result timeout")

// storeLookupTimeout bounds the stream lookups and the subscription round trip.
const storeLookupTimeout = 5 * time.Second

// publishAndAwait publishes a command and waits for its result event on ref's result subject.
// It subscribes before publishing (and makes sure the server has the subscription), so a
// result published at once, or a stored result replayed (replayed: true), is not missed. When
// nothing arrived in time it looks once in the events stream (a reconnect may have dropped the
// live message) before returning ErrResultTimeout.
func (s *Server) publishAndAwait(ctx context.Context, msg *nats.Msg, ref string) (events.Result, error) {
	subject := s.cfg.Subjects.Result(ref)
	sub, err := s.cfg.Conn.SubscribeSync(subject)
	if err != nil {
		return events.Result{}, fmt.Errorf("%w: subscribe %s: %w", ErrPublish, subject, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	flushCtx, cancel := context.WithTimeout(ctx, storeLookupTimeout)
	err = s.cfg.Conn.FlushWithContext(flushCtx)
	cancel()
	if err != nil {
		return events.Result{}, fmt.Errorf("%w: subscribe %s: %w", ErrPublish, subject, err)
	}
	if _, err := s.publish(ctx, msg); err != nil {
		return events.Result{}, err
	}
	waitCtx, cancelWait := context.WithTimeout(ctx, s.cfg.ResultTimeout)
	defer cancelWait()
	for {
		m, err := sub.NextMsgWithContext(waitCtx)
		if err != nil {
			if ctx.Err() != nil {
				return events.Result{}, ctx.Err()
			}
			if res, ok := s.storedResult(ctx, subject); ok {
				return res, nil
			}
			return events.Result{}, ErrResultTimeout
		}
		if res, ok := parseResult(m.Data); ok {
			return res, nil
		}
	}
}

// storedResult reads the last result event stored for subject, if any.
func (s *Server) storedResult(ctx context.Context, subject string) (events.Result, bool) {
	ctx, cancel := context.WithTimeout(ctx, storeLookupTimeout)
	defer cancel()
	stream, err := s.cfg.JetStream.Stream(ctx, s.cfg.Subjects.EventsStream())
	if err != nil {
		return events.Result{}, false
	}
	raw, err := stream.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		return events.Result{}, false
	}
	return parseResult(raw.Data)
}

// parseResult reads a result event's data.
func parseResult(body []byte) (events.Result, bool) {
	ev, err := events.ParseEvent(body)
	if err != nil {
		return events.Result{}, false
	}
	var res events.Result
	if err := json.Unmarshal(ev.Data, &res); err != nil || res.CommandID == "" {
		return events.Result{}, false
	}
	return res, true
}
