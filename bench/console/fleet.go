package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
)

// verbs are the verbs of the synthetic commands, each with the steps a replica publishes
// between the claim and the result (4–6 events a command in all) and its success status.
var verbs = []struct {
	name   string
	steps  []string // each published started, then done
	status int
	result string
}{
	{"vm.start", []string{"start_vm"}, 200, "started"},
	{"vm.stop", []string{"stop_vm"}, 200, "stopped"},
	{"vm.provision", []string{"clone_template", "configure"}, 201, "created"},
	{"vm.snapshot.create", []string{"create_snapshot"}, 201, "created"},
	{"storage.pbs.create", nil, 201, "created"},
	{"vm.migrate", []string{"migrate_vm"}, 200, "migrated"},
}

// verbNames are the names of verbs, for the console's verb filter.
func verbNames() []string {
	out := make([]string, len(verbs))
	for i, v := range verbs {
		out[i] = v.name
	}
	return out
}

var actors = []string{"alice", "bob", "netbox-automation", "ci-pipeline"}

// inFlightEvery makes one command in this many of the history stop before its result (still
// running when the console starts).
const inFlightEvery = 50

// plan is one synthetic command: its origin, the replica publishing it, and its events in
// order (the result last unless it is still in flight).
type plan struct {
	origin   events.Origin
	instance int
	events   []events.Payload
}

// newPlan builds the i-th command of a run named prefix. Its steps are "claim" and the verb's
// steps, each started then done, all attempt 1, then the result; every inFlightEvery-th
// command of the history has no result yet.
func newPlan(prefix string, i int, history bool) plan {
	rng := rand.New(rand.NewPCG(uint64(i), uint64(len(prefix))))
	v := verbs[rng.IntN(len(verbs))]
	endpoint := int64(1 + rng.IntN(3))
	p := plan{
		origin: events.Origin{
			ID: fmt.Sprintf("%s-%05d", prefix, i), Source: "urn:bench:producer", Verb: v.name,
			Actor: actors[rng.IntN(len(actors))], EndpointID: &endpoint,
		},
		instance: rng.IntN(len(emitterNames)),
	}
	seq := 0
	step := func(name string, st events.StepStatus) {
		seq++
		p.events = append(p.events, events.Step{Seq: seq, Step: name, Status: st, Attempt: 1})
	}
	step("claim", events.StepStarted)
	step("claim", events.StepDone)
	for _, s := range v.steps {
		step(s, events.StepStarted)
		step(s, events.StepDone)
	}
	if history && i%inFlightEvery == inFlightEvery-1 {
		p.events = p.events[:len(p.events)-1] // still in its last step
		return p
	}
	p.events = append(p.events, events.Result{Status: v.status, Result: v.result})
	return p
}

// emitterNames are the replica instances publishing the events.
var emitterNames = []string{"bench-1", "bench-2", "bench-3"}

// fleet publishes the events of synthetic commands as replicas would.
type fleet struct {
	js       jetstream.JetStream
	emitters []events.Emitter
	failed   atomic.Int64 // async publishes the server refused
}

func newFleet(nc *nats.Conn, s events.Subjects) (*fleet, error) {
	f := &fleet{}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096),
		jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { f.failed.Add(1) }))
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	f.js = js
	for _, name := range emitterNames {
		f.emitters = append(f.emitters, events.NewEmitter(s, name))
	}
	return f, nil
}

// publish publishes event k of p, its event time at (zero: now).
func (f *fleet) publish(p plan, k int, at time.Time) error {
	e := f.emitters[p.instance]
	if !at.IsZero() {
		e.Now = func() time.Time { return at }
	}
	ev := p.events[k]
	if st, ok := ev.(events.Step); ok && !at.IsZero() {
		st.At = at
		ev = st
	}
	_, msg, err := e.Event(p.origin, ev)
	if err != nil {
		return fmt.Errorf("event %d of %s: %w", k, p.origin.ID, err)
	}
	if _, err := f.js.PublishMsgAsync(msg); err != nil {
		return fmt.Errorf("publish event %d of %s: %w", k, p.origin.ID, err)
	}
	return nil
}

// wait waits until every async publish has been acknowledged.
func (f *fleet) wait(ctx context.Context) error {
	select {
	case <-f.js.PublishAsyncComplete():
	case <-ctx.Done():
		return fmt.Errorf("waiting for publish acks: %w", ctx.Err())
	}
	if n := f.failed.Load(); n > 0 {
		return fmt.Errorf("%d events were not stored", n)
	}
	return nil
}

// history publishes n commands whose events happened before now, about a tenth of a second
// apart (the newest last), and returns the number of events.
func (f *fleet) history(ctx context.Context, n int) (evs int, err error) {
	start := time.Now().Add(-time.Duration(n) * 100 * time.Millisecond)
	for i := range n {
		p := newPlan("hist", i, true)
		at := start.Add(time.Duration(i) * 100 * time.Millisecond)
		for k := range p.events {
			if err := f.publish(p, k, at.Add(time.Duration(k)*150*time.Millisecond)); err != nil {
				return evs, err
			}
			evs++
		}
	}
	return evs, f.wait(ctx)
}

// firsts records when the first event of each live command was published, by ref.
type firsts struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (fs *firsts) set(ref string, t time.Time) {
	fs.mu.Lock()
	fs.at[ref] = t
	fs.mu.Unlock()
}

func (fs *firsts) get(ref string) (time.Time, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	t, ok := fs.at[ref]
	return t, ok
}

// live publishes new commands at rate a second for d, each command's events 50–300 ms
// apart as a replica working on it would, recording when each first event was published. It
// returns once every command has published all its events and every publish is acknowledged,
// with the number of commands and events.
func (f *fleet) live(ctx context.Context, prefix string, rate float64, d time.Duration, fs *firsts) (cmds, evs int, err error) {
	var (
		wg       sync.WaitGroup
		total    atomic.Int64
		firstErr atomic.Pointer[error]
	)
	interval := time.Duration(float64(time.Second) / rate)
	begin := time.Now()
	for i := 0; ; i++ {
		due := begin.Add(time.Duration(i) * interval)
		if due.Sub(begin) >= d || ctx.Err() != nil {
			break
		}
		if wait := time.Until(due); wait > 0 {
			time.Sleep(wait)
		}
		p := newPlan(prefix, i, false)
		cmds++
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for k := range p.events {
				if k > 0 {
					time.Sleep(time.Duration(50+rng.IntN(250)) * time.Millisecond)
				} else {
					fs.set(events.Ref(p.origin.Source, p.origin.ID), time.Now())
				}
				if err := f.publish(p, k, time.Time{}); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				total.Add(1)
			}
		})
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		return cmds, int(total.Load()), *e
	}
	return cmds, int(total.Load()), f.wait(ctx)
}
