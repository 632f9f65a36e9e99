package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
)

// errMalformedEvent is wrapped by every error of [ParseEvent]: the body is not a valid
// structured-mode CloudEvent.
var errMalformedEvent = errors.New("events: malformed event")

// Received is an event read back from the events stream.
type Received struct {
	// ID, Type and Source are the event's CloudEvents attributes.
	ID, Type, Source string
	// Time is in UTC; zero when absent.
	Time time.Time
	// TraceParent is the traceparent extension; "" when absent or not a string.
	TraceParent string
	// Data is the event's JSON data (a Step, Result or JournalRepaired); nil when absent.
	Data json.RawMessage
}

// ParseEvent reads a structured-mode CloudEvent (the form every proxbus event has). It returns
// an error when the body is not a valid CloudEvent 1.0.
func ParseEvent(body []byte) (Received, error) {
	var ev event.Event
	if err := json.Unmarshal(body, &ev); err != nil {
		return Received{}, fmt.Errorf("%w: %w", errMalformedEvent, err)
	}
	if err := ev.Validate(); err != nil {
		return Received{}, fmt.Errorf("%w: %w", errMalformedEvent, err)
	}
	if ev.SpecVersion() != specVersion {
		return Received{}, fmt.Errorf("%w: specversion is not %s", errMalformedEvent, specVersion)
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
