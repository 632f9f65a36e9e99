package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/handlers"
	"github.com/proxbus/proxbus/store"
)

// ErrCommandUnknown is returned by [CommandStatus] when neither the events stream nor the
// store knows the command.
var ErrCommandUnknown = errors.New("no such command in the events stream or the store")

// CommandStatus tells command key's state (contract §4, proxbus status) from its events in the
// events stream (every step and its first-hand result), its record and its approval in the
// store. It returns an error wrapping ErrCommandUnknown when nothing is known of it: a wrong
// id or source, another --subject-prefix or --redis-key-prefix, or a command older than the
// streams' and records' retention.
func CommandStatus(ctx context.Context, js jetstream.JetStream, subjects events.Subjects, st *store.Store, key store.CommandKey) (handlers.CommandStatus, error) {
	steps, result, err := commandEvents(ctx, js, subjects, events.Ref(key.Source, key.ID))
	if err != nil {
		return handlers.CommandStatus{}, err
	}
	rec, err := st.Inspect(ctx, key)
	if err != nil {
		return handlers.CommandStatus{}, err
	}
	var approval *store.Approval
	switch a, err := st.Approval(ctx, key); {
	case err == nil:
		approval = &a
	case !errors.Is(err, store.ErrNotFound):
		return handlers.CommandStatus{}, err
	}
	status, known := handlers.StatusOf(time.Now(), rec, approval, steps, result)
	if !known {
		return status, fmt.Errorf("command %s (source %s): %w", key.ID, key.Source, ErrCommandUnknown)
	}
	return status, nil
}

// commandEvents reads every stored event of the command whose ref is ref, oldest first, and
// returns its steps and its first-hand result (nil when it has none yet).
func commandEvents(ctx context.Context, js jetstream.JetStream, subjects events.Subjects, ref string) ([]events.Step, *events.Result, error) {
	c, err := js.OrderedConsumer(ctx, subjects.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subjects.Follow(ref)}, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("events of %s: %w", ref, err)
	}
	var steps []events.Step
	var result *events.Result
	for {
		batch, err := c.FetchNoWait(100)
		if err != nil {
			return nil, nil, fmt.Errorf("events of %s: %w", ref, err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			var ev struct {
				Data json.RawMessage `json:"data"`
			}
			if json.Unmarshal(m.Data(), &ev) != nil {
				continue
			}
			switch m.Subject() {
			case subjects.Step(ref):
				var s events.Step
				if json.Unmarshal(ev.Data, &s) == nil {
					steps = append(steps, s)
				}
			case subjects.Result(ref):
				var r events.Result
				if json.Unmarshal(ev.Data, &r) == nil && !r.Replayed && result == nil {
					result = &r
				}
			}
		}
		if err := batch.Error(); err != nil {
			return nil, nil, fmt.Errorf("events of %s: %w", ref, err)
		}
		if n == 0 {
			return steps, result, nil
		}
	}
}
