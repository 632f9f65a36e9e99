package client

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/testenv"
)

// streams starts a JetStream with the proxbus streams of prefix; nothing consumes the
// commands.
func streams(t *testing.T, prefix string) jetstream.JetStream {
	t.Helper()
	n := testenv.StartNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := consumer.Provision(ctx, n.JS, consumer.Config{Subjects: events.NewSubjects(prefix)}.WithDefaults()); err != nil {
		t.Fatalf("provision: %v", err)
	}
	return n.JS
}

// stored decodes the last command stored for verb.
func stored(t *testing.T, js jetstream.JetStream, s events.Subjects, verb string) (events.Command, *jetstream.RawStreamMsg) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, s.CommandsStream())
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(ctx, s.Command(verb))
	if err != nil {
		t.Fatalf("no command stored for %s: %v", verb, err)
	}
	cmd, err := events.Decode(m.Subject, m.Header, m.Data, s)
	if err != nil {
		t.Fatalf("stored command does not decode: %v", err)
	}
	return cmd, m
}

// TestHooksRunByStageBeforePublishing: the hooks change the command that is published,
// transforms before the signature whatever the order of the options, and a hook's error
// publishes nothing.
func TestHooksRunByStageBeforePublishing(t *testing.T) {
	t.Parallel()
	js := streams(t, "")
	var order []string
	sign := withHook(stageSign, func(c *events.Command) error {
		order = append(order, "sign:"+string(c.Data))
		c.TraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		return nil
	})
	seal := withHook(stageTransform, func(c *events.Command) error {
		order = append(order, "seal")
		c.Data = []byte(`{"vm":"sealed"}`)
		return nil
	})
	c, err := New(js, sign, seal)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Publish(ctx, Command{EndpointID: 1, Input: VMStart{VM: "web1"}}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"seal", `sign:{"vm":"sealed"}`}; !slices.Equal(order, want) {
		t.Errorf("hooks ran %q, want %q", order, want)
	}
	got, _ := stored(t, js, c.Subjects(), "vm.start")
	if string(got.Data) != `{"vm":"sealed"}` || got.TraceParent == "" {
		t.Errorf("published %s traceparent %q: the hooks' changes are not in it", got.Data, got.TraceParent)
	}

	boom := errors.New("no key")
	failing, err := New(js, withHook(stageTransform, func(*events.Command) error { return boom }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := failing.Publish(ctx, Command{EndpointID: 1, Input: VMStop{VM: "web1"}}); !errors.Is(err, boom) {
		t.Errorf("Publish: %v, want the hook's error", err)
	}
	st, _ := js.Stream(ctx, c.Subjects().CommandsStream())
	if _, err := st.GetLastMsgForSubject(ctx, c.Subjects().Command("vm.stop")); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("a command whose hook failed was published (%v)", err)
	}
}

// TestForward: a structured CloudEvent body is published as it is without hooks, and
// re-encoded after the hooks with them.
func TestForward(t *testing.T) {
	t.Parallel()
	js := streams(t, "")
	s := events.NewSubjects("")
	msg, err := events.EncodeStructured(s, events.Command{ID: "fwd-1", Source: "/netbox/webhook", Verb: "vm.start", Data: []byte(`{"vm": 101}`)})
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := events.Decode(msg.Subject, msg.Header, msg.Data, s)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := New(js)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := plain.Forward(ctx, cmd, msg.Data); err != nil {
		t.Fatal(err)
	}
	if _, m := stored(t, js, s, "vm.start"); string(m.Data) != string(msg.Data) || m.Header.Get(events.HeaderMsgID) != "fwd-1" {
		t.Errorf("forwarded %s (msg id %q), want the body as it is", m.Data, m.Header.Get(events.HeaderMsgID))
	}
	hooked, err := New(js, withHook(stageTransform, func(c *events.Command) error { c.Actor = "hooked"; return nil }))
	if err != nil {
		t.Fatal(err)
	}
	cmd.ID = "fwd-2"
	if _, err := hooked.Forward(ctx, cmd, msg.Data); err != nil {
		t.Fatal(err)
	}
	if got, _ := stored(t, js, s, "vm.start"); got.ID != "fwd-2" || got.Actor != "hooked" || got.Mode != events.ModeStructured || string(got.Data) != `{"vm": 101}` {
		t.Errorf("forwarded with a hook: %+v", got)
	}
}
