package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// taskStep is the step of vm.snapshot.create that sends the Proxmox task (handlers/vm_snapshot.go).
const taskStep = "create_snapshot"

// track is what the collector saw of one command.
type track struct {
	// firstStep is the time (the replica's clock) of the command's first step event.
	firstStep time.Time
	// started and done are the times of its task step's started and done events.
	started, done time.Time
	// waits counts its waiting steps (one per change of what it waits for).
	waits int
	// resultAt is when its first-hand result arrived here; status is that result's.
	resultAt time.Time
	status   int
	replays  int
}

// collector records the step and result events of every command of a run (core NATS,
// unbounded pending), and how many tasks are running (started minus done).
type collector struct {
	sub *nats.Subscription

	mu      sync.Mutex
	want    int
	tracks  map[string]*track
	results int
	running int
	steps   int
	last    time.Time
	done    chan struct{}
	bad     int // events that could not be read
	// failures is the reason and detail of the first result of each status but 201.
	failures map[int]string
}

// newCollector subscribes to the events of e and waits for want results.
func newCollector(nc *nats.Conn, filter string, want int) (*collector, error) {
	c := &collector{want: want, tracks: make(map[string]*track, want), done: make(chan struct{}), failures: map[int]string{}}
	sub, err := nc.Subscribe(filter, c.event)
	if err != nil {
		return nil, fmt.Errorf("subscribe events: %w", err)
	}
	_ = sub.SetPendingLimits(-1, -1)
	c.sub = sub
	if err := nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("flush: %w", err)
	}
	return c, nil
}

// eventData is the part of a step or result event the collector reads.
type eventData struct {
	Data struct {
		CommandID string    `json:"command_id"`
		Step      string    `json:"step"`
		Status    any       `json:"status"` // a step's word, a result's number
		At        time.Time `json:"at"`
		Replayed  bool      `json:"replayed"`
		Reason    string    `json:"reason"`
		Detail    string    `json:"detail"`
	} `json:"data"`
}

func (c *collector) event(m *nats.Msg) {
	now := time.Now()
	var ev eventData
	if err := json.Unmarshal(m.Data, &ev); err != nil || ev.Data.CommandID == "" {
		c.mu.Lock()
		c.bad++
		c.mu.Unlock()
		return
	}
	d := ev.Data
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.tracks[d.CommandID]
	if t == nil {
		t = &track{}
		c.tracks[d.CommandID] = t
	}
	switch {
	case strings.HasSuffix(m.Subject, ".step"):
		c.steps++
		status, _ := d.Status.(string)
		if t.firstStep.IsZero() || d.At.Before(t.firstStep) {
			t.firstStep = d.At
		}
		switch {
		case status == "waiting":
			t.waits++
		case d.Step == taskStep && status == "started" && t.started.IsZero():
			t.started = d.At
			c.running++
		case d.Step == taskStep && status != "started" && !t.started.IsZero() && t.done.IsZero():
			t.done = d.At
			c.running--
		}
	case strings.HasSuffix(m.Subject, ".result"):
		if d.Replayed {
			t.replays++
			return
		}
		if !t.resultAt.IsZero() {
			return
		}
		status, _ := d.Status.(float64)
		t.resultAt, t.status = now, int(status)
		if _, seen := c.failures[t.status]; !seen && t.status != 201 {
			c.failures[t.status] = d.Reason + ": " + d.Detail
		}
		c.last = now
		c.results++
		if c.results == c.want {
			close(c.done)
		}
	}
}

// progress is a snapshot of the counts: results so far and tasks running now.
func (c *collector) progress() (results, running int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.results, c.running
}

// wait waits for every result, the timeout or the end of ctx, and reports whether all
// arrived.
func (c *collector) wait(ctx context.Context, timeout time.Duration) bool {
	select {
	case <-c.done:
		return true
	case <-ctx.Done():
		return false
	case <-time.After(timeout):
		return false
	}
}

// close unsubscribes.
func (c *collector) close() { _ = c.sub.Unsubscribe() }
