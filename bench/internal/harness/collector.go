package harness

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Collector watches the events subjects and records, per command ref, when its result
// arrived and with which status; it also counts step events. Raw runs, which publish no
// events, report completions with [Collector.Mark]. Safe for concurrent use.
type Collector struct {
	subs     []*nats.Subscription
	timeline *Timeline

	mu        sync.Mutex
	want      int
	results   map[string]time.Time
	statuses  map[int]int
	replayed  int
	steps     int
	shapes    map[string]string
	first     time.Time
	last      time.Time
	done      chan struct{}
	onResult  func(ref string)
	closeOnce sync.Once
}

// NewCollector subscribes (core NATS) to every event of e and waits for want results.
// onResult, when set, is called once per result (on the subscription's goroutine). With a
// timeline it marks every event it sees ("step", "result") and every acknowledgement of a
// command ("ack +ACK", "ack +WPI", …).
func (e *Env) NewCollector(want int, onResult func(ref string)) (*Collector, error) {
	c := &Collector{want: want, results: make(map[string]time.Time, want), statuses: map[int]int{}, shapes: map[string]string{},
		done: make(chan struct{}), onResult: onResult, timeline: e.Timeline}
	if want == 0 {
		close(c.done)
	}
	sub, err := e.NC.Subscribe(e.Subjects.EventsFilter(), c.event)
	if err != nil {
		return nil, fmt.Errorf("subscribe events: %w", err)
	}
	c.subs = append(c.subs, sub)
	_ = sub.SetPendingLimits(-1, -1)
	if c.timeline != nil {
		// The only durable of the Env is the commands consumer: every ack is a command's.
		acks, err := e.NC.Subscribe("$JS.ACK.>", func(m *nats.Msg) {
			kind, _, _ := strings.Cut(string(m.Data), " ")
			c.timeline.Mark("ack " + kind)
		})
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("subscribe acks: %w", err)
		}
		c.subs = append(c.subs, acks)
	}
	if err := e.NC.Flush(); err != nil {
		c.Close()
		return nil, fmt.Errorf("flush: %w", err)
	}
	return c, nil
}

// eventData is the part of a structured CloudEvent the collector reads.
type eventData struct {
	Data struct {
		Status   int  `json:"status"`
		Replayed bool `json:"replayed"`
	} `json:"data"`
}

func (c *Collector) event(m *nats.Msg) {
	switch {
	case strings.HasSuffix(m.Subject, ".step"):
		c.timeline.Mark("step")
		c.mu.Lock()
		c.steps++
		c.recordShape("step", m)
		c.mu.Unlock()
	case strings.HasSuffix(m.Subject, ".result"):
		c.timeline.Mark("result")
		c.mu.Lock()
		c.recordShape("result", m)
		c.mu.Unlock()
		var ev eventData
		_ = json.Unmarshal(m.Data, &ev)
		ref := strings.TrimSuffix(m.Subject[strings.Index(m.Subject, ".evt.")+len(".evt."):], ".result")
		if ev.Data.Replayed {
			c.mu.Lock()
			c.replayed++
			c.mu.Unlock()
		}
		c.Mark(ref, ev.Data.Status)
	}
}

// recordShape keeps the shape of the first event of kind; c.mu is held.
func (c *Collector) recordShape(kind string, m *nats.Msg) {
	if _, ok := c.shapes[kind]; !ok {
		c.shapes[kind] = EventShape(m)
	}
}

// EventShape describes what an event carries, for comparing runners: its header names, its
// attribute names and the member names of its data, each sorted, e.g.
// "headers Content-Type Nats-Msg-Id; attributes data id …; data at command_id …".
func EventShape(m *nats.Msg) string {
	var ev map[string]json.RawMessage
	_ = json.Unmarshal(m.Data, &ev)
	var data map[string]json.RawMessage
	_ = json.Unmarshal(ev["data"], &data)
	names := func(keys []string) string { return strings.Join(slices.Sorted(slices.Values(keys)), " ") }
	return "headers " + names(slices.Collect(maps.Keys(m.Header))) + "; attributes " + names(slices.Collect(maps.Keys(ev))) +
		"; data " + names(slices.Collect(maps.Keys(data)))
}

// Mark records that the command ref finished with status now. A second mark of the same ref
// is ignored (counted in Duplicates via Replayed when the event said so).
func (c *Collector) Mark(ref string, status int) {
	now := time.Now()
	c.mu.Lock()
	if _, seen := c.results[ref]; seen {
		c.mu.Unlock()
		return
	}
	c.results[ref] = now
	c.statuses[status]++
	if c.first.IsZero() {
		c.first = now
	}
	c.last = now
	n := len(c.results)
	c.mu.Unlock()
	if c.onResult != nil {
		c.onResult(ref)
	}
	if n == c.want {
		c.closeOnce.Do(func() { close(c.done) })
	}
}

// Done is closed once want results arrived.
func (c *Collector) Done() <-chan struct{} { return c.done }

// Wait waits for every result or the timeout; it returns an error naming how many arrived.
func (c *Collector) Wait(timeout time.Duration) error {
	select {
	case <-c.done:
		return nil
	case <-time.After(timeout):
		c.mu.Lock()
		defer c.mu.Unlock()
		return fmt.Errorf("harness: %d of %d results after %s", len(c.results), c.want, timeout)
	}
}

// Summary is what a collector saw.
type Summary struct {
	Results  int
	Steps    int
	Replayed int
	Statuses map[int]int
	// Shapes is the [EventShape] of the first step and the first result seen, by kind.
	Shapes map[string]string
	// First and Last are the arrival times of the first and last result.
	First, Last time.Time
}

// Summary returns the counts so far.
func (c *Collector) Summary() Summary {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := make(map[int]int, len(c.statuses))
	for k, v := range c.statuses {
		st[k] = v
	}
	return Summary{Results: len(c.results), Steps: c.steps, Replayed: c.replayed, Statuses: st, Shapes: maps.Clone(c.shapes),
		First: c.first, Last: c.last}
}

// Arrival returns when ref's result arrived.
func (c *Collector) Arrival(ref string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.results[ref]
	return t, ok
}

// Close unsubscribes.
func (c *Collector) Close() {
	for _, sub := range c.subs {
		_ = sub.Unsubscribe()
	}
}
