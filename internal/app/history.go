package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
)

// History reads a command's past events from the events stream, for the pipeline's later
// deliveries ([handlers.History]): the newest step (so step sequence numbers continue) and
// whether a result is stored (so an unconfirmed first result is published first-hand again).
type History struct {
	js       jetstream.JetStream
	subjects events.Subjects

	mu     sync.Mutex
	stream jetstream.Stream // opened on first use
}

// NewHistory returns a History over the events stream that subjects names.
func NewHistory(js jetstream.JetStream, subjects events.Subjects) *History {
	return &History{js: js, subjects: subjects}
}

// LastStep returns the newest step event of the command whose event ref is ref.
func (h *History) LastStep(ctx context.Context, ref string) (events.Step, bool, error) {
	raw, ok, err := h.last(ctx, h.subjects.Step(ref))
	if err != nil || !ok {
		return events.Step{}, false, err
	}
	var ev struct {
		Data events.Step `json:"data"`
	}
	if err := json.Unmarshal(raw.Data, &ev); err != nil {
		return events.Step{}, false, fmt.Errorf("history: step event of %s unreadable: %w", ref, err)
	}
	return ev.Data, true, nil
}

// HasResult reports whether the events stream holds a result event of the command whose event
// ref is ref.
func (h *History) HasResult(ctx context.Context, ref string) (bool, error) {
	_, ok, err := h.last(ctx, h.subjects.Result(ref))
	return ok, err
}

func (h *History) last(ctx context.Context, subject string) (*jetstream.RawStreamMsg, bool, error) {
	st, err := h.open(ctx)
	if err != nil {
		return nil, false, err
	}
	raw, err := st.GetLastMsgForSubject(ctx, subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("history: last message on %s: %w", subject, err)
	}
	return raw, true, nil
}

func (h *History) open(ctx context.Context) (jetstream.Stream, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stream != nil {
		return h.stream, nil
	}
	st, err := h.js.Stream(ctx, h.subjects.EventsStream())
	if err != nil {
		return nil, fmt.Errorf("history: stream %s: %w", h.subjects.EventsStream(), err)
	}
	h.stream = st
	return st, nil
}
