package consumer

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/deadletter"
)

// seenDelivery is one delivery a middleware saw: the command id, the delivery number and the
// disposition the wrapped handler returned.
type seenDelivery struct {
	id     string
	number uint64
	action events.Action
}

// watcher records what a middleware and the DeadLettered callback see.
type watcher struct {
	mu         sync.Mutex
	deliveries []seenDelivery
	dead       [][2]string
}

func (w *watcher) middleware(next Handler) Handler {
	return HandlerFunc(func(ctx context.Context, cmd events.Command, d events.Delivery) events.Disposition {
		disp := next.Handle(ctx, cmd, d)
		w.mu.Lock()
		defer w.mu.Unlock()
		w.deliveries = append(w.deliveries, seenDelivery{cmd.ID, d.Number, disp.Action})
		return disp
	})
}

func (w *watcher) deadLettered(verb, reason string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dead = append(w.dead, [2]string{verb, reason})
}

func (w *watcher) snapshot() ([]seenDelivery, [][2]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.deliveries), slices.Clone(w.dead)
}

func (w *watcher) configure(c *Config) {
	c.Middleware = []Middleware{w.middleware}
	c.DeadLettered = w.deadLettered
}

// TestMiddlewareSeesDeliveriesAndDeadLetters: a command redelivered once, then dead-lettered
// by its handler, passes the middleware twice with each delivery's number and disposition,
// and its dead letter is reported once under its verb and reason.
func TestMiddlewareSeesDeliveriesAndDeadLetters(t *testing.T) {
	t.Parallel()
	w := &watcher{}
	e := newEnv(t, w.configure)
	h := &recorder{answer: func(_ context.Context, _ events.Command, d events.Delivery) events.Disposition {
		if d.Number == 1 {
			return events.Disposition{Action: events.Redeliver}
		}
		return events.Disposition{Action: events.DeadLetter, Reason: "unknown_verb"}
	}}
	e.start(t, h)
	e.publish(t, binaryCommand(e.s, "vm.start", "obs-1", `{}`))
	eventually(t, 10*time.Second, "dead letter reported", func() bool { _, dead := w.snapshot(); return len(dead) == 1 })

	seen, dead := w.snapshot()
	want := []seenDelivery{{"obs-1", 1, events.Redeliver}, {"obs-1", 2, events.DeadLetter}}
	if !slices.Equal(seen, want) {
		t.Errorf("middleware saw %v, want %v", seen, want)
	}
	if dead[0] != [2]string{"vm.start", "unknown_verb"} {
		t.Errorf("dead lettered %v", dead)
	}
	if n := len(e.deadLetters(t)); n != 1 {
		t.Errorf("%d dead letters stored", n)
	}
}

// TestPoisonIsDeadLetteredNotHandled: a message that is no command never reaches the
// middleware but is reported as an invalid_command dead letter.
func TestPoisonIsDeadLetteredNotHandled(t *testing.T) {
	t.Parallel()
	w := &watcher{}
	e := newEnv(t, w.configure)
	e.start(t, &recorder{})
	m := binaryCommand(e.s, "vm.stop", "obs-poison", `{}`)
	m.Header.Del("ce-source")
	e.publish(t, m)
	eventually(t, 10*time.Second, "dead letter reported", func() bool { _, dead := w.snapshot(); return len(dead) == 1 })
	seen, dead := w.snapshot()
	if len(seen) != 0 {
		t.Errorf("poison reached the middleware: %v", seen)
	}
	if dead[0] != [2]string{"vm.stop", deadletter.ReasonInvalidCommand} {
		t.Errorf("dead lettered %v", dead)
	}
}

// TestDeadLetteredOnlyForANewCopy: storing the same dead-letter copy twice (two replicas, a
// retry) stores it once and reports it once.
func TestDeadLetteredOnlyForANewCopy(t *testing.T) {
	t.Parallel()
	w := &watcher{}
	e := newEnv(t, w.configure)
	c, err := New(e.js, e.cfg, &recorder{}, NewPublisher(e.js, events.NewEmitter(e.s, "test")))
	if err != nil {
		t.Fatal(err)
	}
	o := deadletter.Original{Subject: e.s.Command("vm.start"), Data: []byte(`{}`), StreamSeq: 7, Deliveries: 1}
	for range 2 {
		if err := c.deadLetter(ctxT(t), o, "vm.start", "unknown_verb", ""); err != nil {
			t.Fatalf("dead letter: %v", err)
		}
	}
	if _, dead := w.snapshot(); len(dead) != 1 {
		t.Errorf("reported %v, want one dead letter", dead)
	}
	if n := len(e.deadLetters(t)); n != 1 {
		t.Errorf("%d dead letters stored", n)
	}
}

type ctxKey struct{}

// TestMiddlewareContextAndCommandReachTheHandler: the handler runs in the context the
// middleware hands it and sees the command as the middleware amended it.
func TestMiddlewareContextAndCommandReachTheHandler(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	mw := func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, cmd events.Command, d events.Delivery) events.Disposition {
			cmd.TraceParent = tp
			return next.Handle(context.WithValue(ctx, ctxKey{}, "wrapped"), cmd, d)
		})
	}
	e := newEnv(t, func(c *Config) { c.Middleware = []Middleware{mw} })
	var mu sync.Mutex
	var seenValue any
	h := &recorder{answer: func(ctx context.Context, _ events.Command, _ events.Delivery) events.Disposition {
		mu.Lock()
		defer mu.Unlock()
		seenValue = ctx.Value(ctxKey{})
		return events.Disposition{Action: events.Ack}
	}}
	e.start(t, h)
	e.publish(t, binaryCommand(e.s, "vm.start", "obs-ctx", `{}`))
	eventually(t, 10*time.Second, "handled", func() bool { return h.count() == 1 })
	mu.Lock()
	defer mu.Unlock()
	if seenValue != "wrapped" {
		t.Errorf("handler context value %v", seenValue)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if got := h.cmds[0].TraceParent; got != tp {
		t.Errorf("handler traceparent %q, want %q", got, tp)
	}
}

// TestMiddlewareOrder: the first middleware is the outermost, nil ones are skipped, and each
// sees a handler's panic as the Redeliver it became.
func TestMiddlewareOrder(t *testing.T) {
	t.Parallel()
	var order []string
	mk := func(name string) Middleware {
		return func(next Handler) Handler {
			return HandlerFunc(func(ctx context.Context, cmd events.Command, d events.Delivery) events.Disposition {
				order = append(order, name+">")
				disp := next.Handle(ctx, cmd, d)
				order = append(order, "<"+name+":"+disp.Action.String())
				return disp
			})
		}
	}
	cfg := testConfig()
	cfg.Middleware = []Middleware{mk("a"), nil, mk("b")}
	h := HandlerFunc(func(context.Context, events.Command, events.Delivery) events.Disposition {
		order = append(order, "handler")
		panic("boom")
	})
	c, err := New(noJS{}, cfg, h, NewPublisher(noJS{}, events.NewEmitter(cfg.Subjects, "test")))
	if err != nil {
		t.Fatal(err)
	}
	disp := c.handler.Handle(context.Background(), events.Command{ID: "c1"}, events.Delivery{Number: 1})
	if disp.Action != events.Redeliver || disp.Delay != panicDelay {
		t.Errorf("disposition %+v, want a Redeliver after %s", disp, panicDelay)
	}
	want := []string{"a>", "b>", "handler", "<b:redeliver", "<a:redeliver"}
	if !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
}

// TestPublishHookSeesStoredEventsAndDuplicates: the hook sees the data of each stored event
// with its command fields filled, duplicate set for a republish of the same event; nothing
// is stored or seen for data that is no event's or an event no stream takes.
func TestPublishHookSeesStoredEventsAndDuplicates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	type seen struct {
		data      any
		duplicate bool
	}
	var mu sync.Mutex
	var got []seen
	hook := func(_ context.Context, data events.Payload, duplicate bool) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, seen{data, duplicate})
	}
	p := NewPublisher(e.js, events.NewEmitter(e.s, "test"), nil, hook)
	o := events.Origin{ID: "hook-1", Source: "/test", Verb: "vm.start"}
	for range 2 {
		if err := p.Publish(ctxT(t), o, events.Result{Status: 200, Result: "ok"}); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	if err := p.Publish(ctxT(t), o, events.Result{Status: 42}); !errors.Is(err, events.ErrEncode) {
		t.Errorf("publish of a result with status 42: %v, want ErrEncode", err)
	}
	if err := p.Publish(ctxT(t), events.Origin{Source: "/test"}, events.Step{Seq: 1}); !errors.Is(err, events.ErrEncode) {
		t.Errorf("publish without a command id: %v, want ErrEncode", err)
	}
	nowhere := NewPublisher(e.js, events.NewEmitter(events.NewSubjects("nowhere"), "test"), hook)
	if err := nowhere.Publish(ctxT(t), o, events.Result{Status: 200}); err == nil {
		t.Error("publish to no stream succeeded")
	}
	if n := e.streamMsgs(t, e.s.EventsStream()); n != 1 {
		t.Errorf("%d events stored, want 1", n)
	}
	want := events.Result{CommandID: "hook-1", CommandSource: "/test", Verb: "vm.start", Status: 200, Result: "ok"}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("hook saw %d events, want 2: %v", len(got), got)
	}
	for i, s := range got {
		if r, ok := s.data.(events.Result); !ok || r.CommandID != want.CommandID || r.CommandSource != want.CommandSource ||
			r.Verb != want.Verb || r.Status != want.Status || r.Result != want.Result {
			t.Errorf("hook saw %#v, want %#v", s.data, want)
		}
		if s.duplicate != (i == 1) {
			t.Errorf("publication %d: duplicate %v", i, s.duplicate)
		}
	}
}
