package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
)

// ErrNoResult is returned by [Send] when the stream ended or ctx expired before a result came.
var ErrNoResult = errors.New("no result received")

// Follow delivers every event of one command (steps, result, journal), from the first one the
// events stream holds, until fn returns false or ctx ends.
func Follow(ctx context.Context, js jetstream.JetStream, subjects events.Subjects, ref string, fn func(subject string, ev events.Received) bool) error {
	return tail(ctx, js, subjects, subjects.Follow(ref), jetstream.DeliverAllPolicy, fn)
}

// Tail delivers the events matching filter (default all events), starting with new ones
// unless all is set, until fn returns false or ctx ends.
func Tail(ctx context.Context, js jetstream.JetStream, subjects events.Subjects, filter string, all bool, fn func(subject string, ev events.Received) bool) error {
	if filter == "" {
		filter = subjects.EventsFilter()
	}
	policy := jetstream.DeliverNewPolicy
	if all {
		policy = jetstream.DeliverAllPolicy
	}
	return tail(ctx, js, subjects, filter, policy, fn)
}

func tail(ctx context.Context, js jetstream.JetStream, subjects events.Subjects, filter string, policy jetstream.DeliverPolicy, fn func(string, events.Received) bool) error {
	c, err := js.OrderedConsumer(ctx, subjects.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter}, DeliverPolicy: policy,
	})
	if err != nil {
		return fmt.Errorf("follow events: %w", err)
	}
	msgs, err := c.Messages()
	if err != nil {
		return fmt.Errorf("follow events: %w", err)
	}
	defer msgs.Stop()
	stop := context.AfterFunc(ctx, msgs.Stop)
	defer stop()
	for {
		m, err := msgs.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("follow events: %w", err)
		}
		ev, err := events.ParseEvent(m.Data())
		if err != nil {
			continue
		}
		if !fn(m.Subject(), ev) {
			return nil
		}
	}
}

// Send publishes a command in binary mode and, unless noWait, follows its events until the
// result arrives, passing each step to onStep. A publish no stream leader answers (a leader
// election on a clustered broker) is retried with the same Nats-Msg-Id, for up to about 20 s. Events are read from the start of the stream, so
// nothing published before the follow began is missed. It returns the result (zero with noWait).
func Send(ctx context.Context, js jetstream.JetStream, subjects events.Subjects, cmd events.Command, noWait bool, onStep func(events.Step)) (events.Result, error) {
	msg, err := events.EncodeBinary(subjects, cmd)
	if err != nil {
		return events.Result{}, err
	}
	if err := publishCommand(ctx, js, msg); err != nil {
		return events.Result{}, fmt.Errorf("publish: %w", err)
	}
	if noWait {
		return events.Result{}, nil
	}
	var res events.Result
	found := false
	err = Follow(ctx, js, subjects, cmd.Ref(), func(subject string, ev events.Received) bool {
		switch {
		case strings.HasSuffix(subject, ".step"):
			var st events.Step
			if json.Unmarshal(ev.Data, &st) == nil && onStep != nil {
				onStep(st)
			}
		case strings.HasSuffix(subject, ".result"):
			found = json.Unmarshal(ev.Data, &res) == nil
			return !found
		}
		return true
	})
	if found {
		return res, nil
	}
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		err = ErrNoResult
	}
	return events.Result{}, err
}

// Publish retry policy of [Send]: a publish that no stream leader answered (a JetStream
// leader election on a clustered broker, or a stream not created yet) is retried with the same
// message, so the same Nats-Msg-Id, which the stream dedupes should an earlier attempt have
// been stored after all.
const (
	publishAttempts       = 4
	publishAttemptTimeout = 5 * time.Second
	publishNoRespondWait  = 250 * time.Millisecond
	publishNoRespondTries = 8
)

// publishCommand publishes msg with the retry policy above, until it is acknowledged, fails
// for a reason a retry cannot cure, or ctx ends.
func publishCommand(ctx context.Context, js jetstream.JetStream, msg *nats.Msg) error {
	var err error
	for attempt := 1; attempt <= publishAttempts; attempt++ {
		actx, cancel := context.WithTimeout(ctx, publishAttemptTimeout)
		_, err = js.PublishMsg(actx, msg, jetstream.WithRetryWait(publishNoRespondWait), jetstream.WithRetryAttempts(publishNoRespondTries))
		cancel()
		if err == nil || ctx.Err() != nil || !retryablePublish(err) {
			break
		}
	}
	return err
}

// retryablePublish reports whether a publish failed only for want of an answer.
func retryablePublish(err error) bool {
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)
}

// Connect opens a NATS connection and its JetStream context for the CLI's client commands.
func Connect(url string) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(url, nats.Name("proxbus-cli"))
	if err != nil {
		return nil, nil, fmt.Errorf("nats: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	return nc, js, nil
}
