package metrics

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
)

// Middleware counts the deliveries of commands (a consumer.Middleware): a delivery after a
// command's first as a redelivery of its verb, the delivery in flight while next handles it,
// its duration by verb and the disposition next returned, and a delivery handed back to wait
// as a waiting command (until a later delivery here answers it).
func (m *Metrics) Middleware(next consumer.Handler) consumer.Handler {
	return consumer.HandlerFunc(func(ctx context.Context, cmd events.Command, d events.Delivery) events.Disposition {
		verb := m.verb(cmd.Verb)
		if d.Number > 1 {
			m.redeliveries.WithLabelValues(verb).Inc()
		}
		m.inFlight.Inc()
		start := m.now()
		disp := next.Handle(ctx, cmd, d)
		m.inFlight.Dec()
		m.commandDuration.WithLabelValues(verb, disp.Action.String()).Observe(m.now().Sub(start).Seconds())
		m.waits.handled(cmd, d, disp)
		return disp
	})
}

// DeadLettered counts a dead-letter copy newly stored (consumer.Config.DeadLettered).
func (m *Metrics) DeadLettered(verb, reason string) {
	m.deadLetters.WithLabelValues(m.verb(verb), boundedWord(reason)).Inc()
}

// Published counts a stored event (a consumer.PublishHook) by kind: a result counts its
// command by verb, result and status; steps are timed from started to done, error or
// skipped. A duplicate (replayed) event is counted in events_published_total only; data of
// any other type is ignored.
func (m *Metrics) Published(_ context.Context, data events.Payload, duplicate bool) {
	switch ev := data.(type) {
	case events.Step:
		m.count("step", duplicate, func() { m.step(ev) })
	case events.Result:
		m.count("result", duplicate, func() {
			m.commands.WithLabelValues(m.verb(ev.Verb), boundedWord(ev.Result), strconv.Itoa(ev.Status)).Inc()
			m.steps.forget(ev.CommandSource, ev.CommandID)
		})
	case events.JournalRepaired:
		m.count("repaired", duplicate, nil)
	}
}

// count counts one published event of kind and, unless it is a duplicate, records it.
func (m *Metrics) count(kind string, duplicate bool, record func()) {
	m.events.WithLabelValues(kind, strconv.FormatBool(duplicate)).Inc()
	if !duplicate && record != nil {
		record()
	}
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
