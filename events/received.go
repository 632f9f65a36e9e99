package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
)

// ErrMalformedEvent matches (errors.Is) ParseEvent's errors: the body is not a valid
// structured-mode CloudEvent.
var ErrMalformedEvent = errors.New("events: malformed event")

// Received is an event read back from the events stream.
type Received struct {
	ID, Type, Source string
	// Time is in UTC; zero when absent.
	Time        time.Time
	TraceParent string
	// Data is the event's JSON data (a Step, Result or JournalRepaired); nil when absent.
	Data json.RawMessage
}

// ParseEvent reads a structured-mode CloudEvent (the form every proxbus event has). It returns
// an error wrapping ErrMalformedEvent when the body is not a valid CloudEvent 1.0.
func ParseEvent(body []byte) (Received, error) {
	var ev event.Event
	if err := json.Unmarshal(body, &ev); err != nil {
		return Received{}, fmt.Errorf("%w: %w", ErrMalformedEvent, err)
	}
	if err := ev.Validate(); err != nil {
		return Received{}, fmt.Errorf("%w: %w", ErrMalformedEvent, err)
	}
	if ev.SpecVersion() != SpecVersion {
		return Received{}, fmt.Errorf("%w: specversion is not %s", ErrMalformedEvent, SpecVersion)
	}
	r := Received{ID: ev.ID(), Type: ev.Type(), Source: ev.Source(), Data: nonNullJSON(ev.Data())}
	if t := ev.Time(); !t.IsZero() {
		r.Time = t.UTC()
	}
	if tp, ok := ev.Extensions()[AttrTraceParent].(string); ok {
		r.TraceParent = tp
	}
	return r, nil
}
