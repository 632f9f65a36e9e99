package consumer

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/events"
)

// obsRecorder is an Observer that records every call.
type obsRecorder struct {
	mu          sync.Mutex
	started     []string // command ids
	done        []events.Action
	redelivered []string
	dead        [][2]string
	ctxKey      any
	traceParent string
}

func (o *obsRecorder) Start(ctx context.Context, cmd events.Command, _ events.Delivery) Observation {
	o.mu.Lock()
	o.started = append(o.started, cmd.ID)
	o.mu.Unlock()
	obs := Observation{TraceParent: o.traceParent, Done: func(d events.Disposition) {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.done = append(o.done, d.Action)
	}}
	if o.ctxKey != nil {
		obs.Context = context.WithValue(ctx, o.ctxKey, "observed")
	}
	return obs
}

func (o *obsRecorder) Redelivered(verb string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.redelivered = append(o.redelivered, verb)
}

func (o *obsRecorder) DeadLettered(verb, reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.dead = append(o.dead, [2]string{verb, reason})
}

func (o *obsRecorder) snapshot() obsRecorder {
	o.mu.Lock()
	defer o.mu.Unlock()
	return obsRecorder{
		started: slices.Clone(o.started), done: slices.Clone(o.done),
		redelivered: slices.Clone(o.redelivered), dead: slices.Clone(o.dead),
	}
}

// TestObserverSeesRedeliveriesAndDeadLetters: a command redelivered once, then
// dead-lettered by its handler, is started twice, finished with each disposition, redelivered
// once and dead-lettered once under its verb and reason.
func TestObserverSeesRedeliveriesAndDeadLetters(t *testing.T) {
	t.Parallel()
	obs := &obsRecorder{}
	e := newEnv(t, func(c *Config) { c.Observer = obs })
	h := &recorder{answer: func(_ context.Context, _ events.Command, d events.Delivery) events.Disposition {
		if d.Number == 1 {
			return events.Disposition{Action: events.Redeliver}
		}
		return events.Disposition{Action: events.DeadLetter, Reason: "unknown_verb"}
	}}
	e.start(t, h)
	e.publish(t, binaryCommand(e.s, "vm.start", "obs-1", `{}`))
	eventually(t, 10*time.Second, "dead letter observed", func() bool { return len(obs.snapshot().dead) == 1 })

	got := obs.snapshot()
	if !slices.Equal(got.started, []string{"obs-1", "obs-1"}) {
		t.Errorf("started %v", got.started)
	}
	if !slices.Equal(got.done, []events.Action{events.Redeliver, events.DeadLetter}) {
		t.Errorf("done %v", got.done)
	}
	if !slices.Equal(got.redelivered, []string{"vm.start"}) {
		t.Errorf("redelivered %v", got.redelivered)
	}
	if got.dead[0] != [2]string{"vm.start", "unknown_verb"} {
		t.Errorf("dead lettered %v", got.dead)
	}
	if n := len(e.deadLetters(t)); n != 1 {
		t.Errorf("%d dead letters stored", n)
	}
}

// TestObserverPoisonIsDeadLetteredNotStarted: a message that is no command never reaches
// Start but is counted as an invalid_command dead letter.
func TestObserverPoisonIsDeadLetteredNotStarted(t *testing.T) {
	t.Parallel()
	obs := &obsRecorder{}
	e := newEnv(t, func(c *Config) { c.Observer = obs })
	e.start(t, &recorder{})
	m := binaryCommand(e.s, "vm.stop", "obs-poison", `{}`)
	m.Header.Del("ce-source")
	e.publish(t, m)
	eventually(t, 10*time.Second, "dead letter observed", func() bool { return len(obs.snapshot().dead) == 1 })
	got := obs.snapshot()
	if len(got.started) != 0 || len(got.done) != 0 {
		t.Errorf("poison reached Start: %v %v", got.started, got.done)
	}
	if got.dead[0] != [2]string{"vm.stop", ReasonInvalidCommand} {
		t.Errorf("dead lettered %v", got.dead)
	}
}

type ctxKey struct{}

// TestObserverContextAndTraceParentReachTheHandler: the handler runs in the observer's
// context and sees the observer's traceparent in place of the command's.
func TestObserverContextAndTraceParentReachTheHandler(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	obs := &obsRecorder{ctxKey: ctxKey{}, traceParent: tp}
	e := newEnv(t, func(c *Config) { c.Observer = obs })
	var mu sync.Mutex
	var seenValue any
	h := &recorder{answer: func(ctx context.Context, _ events.Command, _ events.Delivery) events.Disposition {
		mu.Lock()
		defer mu.Unlock()
		seenValue = ctx.Value(ctxKey{})
		return events.Disposition{}
	}}
	e.start(t, h)
	e.publish(t, binaryCommand(e.s, "vm.start", "obs-ctx", `{}`))
	eventually(t, 10*time.Second, "handled", func() bool { return len(obs.snapshot().done) == 1 })
	mu.Lock()
	defer mu.Unlock()
	if seenValue != "observed" {
		t.Errorf("handler context value %v", seenValue)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if got := h.cmds[0].TraceParent; got != tp {
		t.Errorf("handler traceparent %q, want %q", got, tp)
	}
}

// TestObservers combines observers: contexts chain, the last traceparent wins, Done runs in
// reverse order and nil observers are skipped.
func TestObservers(t *testing.T) {
	t.Parallel()
	var order []string
	mk := func(name, tp string) Observer {
		return funcObserver{start: func(ctx context.Context) Observation {
			return Observation{
				Context:     context.WithValue(ctx, ctxKey{}, name+"<"+valueOf(ctx)),
				TraceParent: tp,
				Done:        func(events.Disposition) { order = append(order, name) },
			}
		}}
	}
	tests := []struct {
		name      string
		obs       []Observer
		wantValue string
		wantTP    string
		wantOrder []string
	}{
		{"none", nil, "", "", nil},
		{"one", []Observer{mk("a", "tp-a")}, "a<", "tp-a", []string{"a"}},
		{"two with nil", []Observer{mk("a", "tp-a"), nil, mk("b", "")}, "b<a<", "tp-a", []string{"b", "a"}},
		{"last tp wins", []Observer{mk("a", "tp-a"), mk("b", "tp-b")}, "b<a<", "tp-b", []string{"b", "a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			order = nil
			res := Observers(tc.obs...).Start(context.Background(), events.Command{}, events.Delivery{})
			ctx := res.Context
			if ctx == nil {
				ctx = context.Background()
			}
			if got := valueOf(ctx); got != tc.wantValue {
				t.Errorf("context value %q, want %q", got, tc.wantValue)
			}
			if res.TraceParent != tc.wantTP {
				t.Errorf("traceparent %q, want %q", res.TraceParent, tc.wantTP)
			}
			res.Done(events.Disposition{})
			if !slices.Equal(order, tc.wantOrder) {
				t.Errorf("done order %v, want %v", order, tc.wantOrder)
			}
		})
	}
}

func valueOf(ctx context.Context) string {
	s, _ := ctx.Value(ctxKey{}).(string)
	return s
}

type funcObserver struct {
	start func(ctx context.Context) Observation
}

func (f funcObserver) Start(ctx context.Context, _ events.Command, _ events.Delivery) Observation {
	return f.start(ctx)
}
func (funcObserver) Redelivered(string)          {}
func (funcObserver) DeadLettered(string, string) {}

// TestPublishHookSeesStoredMessagesAndDuplicates: the hook sees each stored message, with
// duplicate set for a republish of the same Nats-Msg-Id and the event PublishEvent was given.
func TestPublishHookSeesStoredMessagesAndDuplicates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	var mu sync.Mutex
	var seen []bool
	var published []any
	p := NewPublisher(e.js, nil, PublishHookFunc(func(_ context.Context, pub Publication) {
		mu.Lock()
		defer mu.Unlock()
		if pub.Msg.Header.Get("Nats-Msg-Id") == "hook-1" {
			seen = append(seen, pub.Duplicate)
			published = append(published, pub.Event)
		}
	}))
	for i := range 2 {
		m := nats.NewMsg(e.s.Result(events.Ref("/test", "hook-1")))
		m.Header.Set("Nats-Msg-Id", "hook-1")
		m.Data = []byte(`{}`)
		var err error
		if i == 0 {
			err = p.Publish(ctxT(t), m)
		} else {
			err = p.PublishEvent(ctxT(t), m, events.Result{CommandID: "hook-1", Status: 200})
		}
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	bad := nats.NewMsg("nowhere.at.all")
	if err := p.Publish(ctxT(t), bad); err == nil {
		t.Fatal("publish to no stream succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(seen, []bool{false, true}) {
		t.Errorf("hook saw %v, want [false true]", seen)
	}
	// Publish hands no event; PublishEvent hands the one it was given.
	if len(published) != 2 || published[0] != nil || !reflect.DeepEqual(published[1], events.Result{CommandID: "hook-1", Status: 200}) {
		t.Errorf("hook saw events %v, want [nil, the result]", published)
	}
}
