package metrics

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/consumer"
	"github.com/proxbus/proxbus/internal/jsonstr"
)

var (
	_ consumer.Observer    = (*Metrics)(nil)
	_ consumer.PublishHook = (*Metrics)(nil)
)

// Start counts the delivery in flight and, once the handler returned, observes its duration
// by verb and disposition (consumer.Observer).
func (m *Metrics) Start(_ context.Context, cmd events.Command, _ events.Delivery) consumer.Observation {
	m.inFlight.Inc()
	start := m.now()
	verb := m.verb(cmd.Verb)
	return consumer.Observation{Done: func(d events.Disposition) {
		m.inFlight.Dec()
		m.commandDuration.WithLabelValues(verb, d.Action.String()).Observe(m.now().Sub(start).Seconds())
	}}
}

// Redelivered counts a redelivery (consumer.Observer).
func (m *Metrics) Redelivered(verb string) { m.redeliveries.WithLabelValues(m.verb(verb)).Inc() }

// DeadLettered counts a dead letter (consumer.Observer).
func (m *Metrics) DeadLettered(verb, reason string) {
	m.deadLetters.WithLabelValues(m.verb(verb), boundedWord(reason)).Inc()
}

// Published counts a stored event (consumer.PublishHook): a result event counts its command
// by verb, result and status; step events time each step from started to done, error or
// skipped. A duplicate (replayed) event is counted in events_published_total only. The event
// is read from the publication's typed Event when the publisher passed one, else decoded from
// the message; anything that is not a proxbus event is ignored, and a message on a subject
// that cannot carry a step, result or journal event is ignored before its body is read.
func (m *Metrics) Published(_ context.Context, p consumer.Publication) {
	switch ev := p.Event.(type) {
	case events.Step:
		m.count("step", p.Duplicate, func() { m.step(ev) })
	case events.Result:
		m.count("result", p.Duplicate, func() { m.result(ev.Verb, ev.Result, ev.Status, ev.CommandSource, ev.CommandID) })
	case events.JournalRepaired:
		m.count("repaired", p.Duplicate, nil)
	default:
		m.decoded(p.Msg, p.Duplicate)
	}
}

// count counts one published event of kind and, unless it is a duplicate, records it.
func (m *Metrics) count(kind string, duplicate bool, record func()) {
	m.events.WithLabelValues(kind, strconv.FormatBool(duplicate)).Inc()
	if !duplicate && record != nil {
		record()
	}
}

// result counts a command's result and forgets its running steps.
func (m *Metrics) result(verb, result string, status int, source, id string) {
	m.commands.WithLabelValues(m.verb(verb), boundedWord(result), strconv.Itoa(status)).Inc()
	m.steps.forget(source, id)
}

// decoded counts an event published without its typed value, reading it from msg.
func (m *Metrics) decoded(msg *nats.Msg, duplicate bool) {
	if msg == nil || !countedSubject(msg.Subject) || msg.Header.Get(events.HeaderContentType) != events.ContentTypeCE {
		return
	}
	var ev publishedEvent
	// A body that is not JSON leaves ev empty. A type error in a field leaves the other fields
	// read; it only matters in the data, which is then not used.
	dataErr := json.Unmarshal(msg.Data, &ev)
	if !strings.HasPrefix(ev.Type, events.TypePrefix) {
		return
	}
	kind := ev.Type[strings.LastIndex(ev.Type, ".")+1:]
	d := &ev.Data
	switch kind {
	case "repaired":
		m.count(kind, duplicate, nil)
	case "result":
		m.count(kind, duplicate, func() {
			if status, ok := resultStatus(d.Status); ok && dataErr == nil {
				m.result(d.Verb, d.Result, status, d.CommandSource, d.CommandID)
			}
		})
	case "step":
		m.count(kind, duplicate, func() {
			if status, ok := stepStatus(d.Status); ok && dataErr == nil {
				m.step(events.Step{CommandID: d.CommandID, CommandSource: d.CommandSource, Verb: d.Verb,
					Step: d.Step, Status: status, At: d.At})
			}
		})
	}
}

// publishedEvent is what Published reads of an event: its type and the fields of a step's or
// a result's data that the metrics use.
type publishedEvent struct {
	Type string `json:"type"`
	Data struct {
		CommandID     string `json:"command_id"`
		CommandSource string `json:"command_source"`
		Verb          string `json:"verb"`
		// Status is a number in a result (an HTTP status) and a string in a step.
		Status json.RawMessage `json:"status"`
		Result string          `json:"result"`
		Step   string          `json:"step"`
		At     time.Time       `json:"at"`
	} `json:"data"`
}

// countedSubject reports whether subject can carry a step, result or journal event: its last
// token is that of [events.Subjects.Step], [events.Subjects.Result] or
// [events.Subjects.Journal].
func countedSubject(subject string) bool {
	switch subject[strings.LastIndexByte(subject, '.')+1:] {
	case "step", "result", "journal":
		return true
	}
	return false
}

// resultStatus reads a result's status as json.Unmarshal into an int does: absent or null is
// 0, anything but an integer literal fails.
func resultStatus(raw json.RawMessage) (int, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, true
	}
	n, err := strconv.Atoi(string(raw))
	return n, err == nil
}

// stepStatus reads a step's status as json.Unmarshal into a string does: absent or null is
// "", anything but a string fails.
func stepStatus(raw json.RawMessage) (events.StepStatus, bool) {
	if len(raw) == 0 {
		return "", true
	}
	s, ok := jsonstr.Decode(raw)
	return events.StepStatus(s), ok
}

// step records a started step or observes the duration of a finished one.
func (m *Metrics) step(st events.Step) {
	at := st.At
	if at.IsZero() {
		at = m.now()
	}
	switch st.Status {
	case events.StepStarted:
		m.steps.start(st.CommandSource, st.CommandID, st.Step, at)
	case events.StepDone, events.StepError, events.StepSkipped:
		if began, ok := m.steps.finish(st.CommandSource, st.CommandID, st.Step); ok {
			m.stepDuration.WithLabelValues(m.verb(st.Verb), boundedWord(st.Step), string(st.Status)).
				Observe(max(at.Sub(began), 0).Seconds())
		}
	}
}

// boundedWord keeps a label value from proxbus's own vocabulary (lower-case words with
// _ . -), replacing anything else, or anything long, by "other".
func boundedWord(s string) string {
	if s == "" || len(s) > 64 {
		return "other"
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' && r != '.' && r != '-' {
			return "other"
		}
	}
	return s
}

// stepTracker remembers when each running step started, per command, up to a bound.
type stepTracker struct {
	mu    sync.Mutex
	max   int
	n     int
	byCmd map[string]map[string]time.Time
}

func newStepTracker(maxSteps int) *stepTracker {
	return &stepTracker{max: maxSteps, byCmd: map[string]map[string]time.Time{}}
}

func cmdKey(source, id string) string { return source + "\x00" + id }

func (t *stepTracker) start(source, id, step string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := cmdKey(source, id)
	steps := t.byCmd[k]
	if _, ok := steps[step]; ok {
		steps[step] = at
		return
	}
	if t.n >= t.max {
		t.evictBefore(at.Add(-time.Hour))
		if t.n >= t.max {
			return
		}
	}
	if steps == nil {
		steps = map[string]time.Time{}
		t.byCmd[k] = steps
	}
	steps[step] = at
	t.n++
}

func (t *stepTracker) finish(source, id, step string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := cmdKey(source, id)
	began, ok := t.byCmd[k][step]
	if !ok {
		return time.Time{}, false
	}
	delete(t.byCmd[k], step)
	t.n--
	if len(t.byCmd[k]) == 0 {
		delete(t.byCmd, k)
	}
	return began, true
}

// forget drops every step of a command that has its result.
func (t *stepTracker) forget(source, id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := cmdKey(source, id)
	t.n -= len(t.byCmd[k])
	delete(t.byCmd, k)
}

// evictBefore drops steps started before cutoff (commands that never finished here).
func (t *stepTracker) evictBefore(cutoff time.Time) {
	for k, steps := range t.byCmd {
		for s, at := range steps {
			if at.Before(cutoff) {
				delete(steps, s)
				t.n--
			}
		}
		if len(steps) == 0 {
			delete(t.byCmd, k)
		}
	}
}

// size returns the number of tracked steps.
func (t *stepTracker) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}
