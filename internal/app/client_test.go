package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/embedded"
	"github.com/proxbus/proxbus/internal/testenv"
)

// TestSendRetriesUnansweredPublish pins Send's publish retry: a publish that no stream answers
// (as during a JetStream leader election) is retried with the same message until the stream
// answers, and the command is stored once.
func TestSendRetriesUnansweredPublish(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	subjects := events.NewSubjects("proxbus")
	cmd := events.Command{ID: "retry-1", Source: "/test", Verb: "vm.start", Type: "proxbus.vm.start",
		EndpointID: 1, HasEndpointID: true, Data: json.RawMessage(`{"vm":100}`)}
	before := n.Conn.Stats().OutMsgs

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := app.Send(ctx, n.JS, subjects, cmd, true, nil)
		done <- err
	}()
	// Four requests have gone out unanswered (one more than nats.go's own retries make):
	// now the stream appears, as a newly elected leader would.
	for n.Conn.Stats().OutMsgs < before+4 {
		select {
		case err := <-done:
			t.Fatalf("Send returned before the stream existed: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := consumer.Provision(ctx, n.JS, consumer.Config{Subjects: subjects}); err != nil {
		t.Fatalf("provision: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Send: %v", err)
	}
	s, err := n.JS.Stream(ctx, subjects.CommandsStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil || info.State.Msgs != 1 {
		t.Fatalf("commands stored = %v (%v), want 1", info.State.Msgs, err)
	}
	m, err := s.GetMsg(ctx, info.State.FirstSeq)
	if err != nil || m.Header.Get("Nats-Msg-Id") != "retry-1" {
		t.Errorf("stored command: %v %v", m, err)
	}
}

// TestSendGivesUpOnCancel pins that the publish retry ends with ctx: Send returns the
// unanswered publish's error instead of retrying past its caller's deadline.
func TestSendGivesUpOnCancel(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t) // no streams: every attempt is unanswered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cmd := events.Command{ID: "retry-2", Source: "/test", Verb: "vm.start", Type: "proxbus.vm.start", Data: json.RawMessage(`{}`)}
	_, err := app.Send(ctx, n.JS, events.NewSubjects("proxbus"), cmd, true, nil)
	if err == nil {
		t.Fatal("Send succeeded without a stream")
	}
	if !errors.Is(err, context.Canceled) && !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Errorf("err = %v, want the cancellation or no stream response", err)
	}
}

// provisioned starts NATS with the proxbus streams.
func provisioned(t *testing.T, opts embedded.NATSOptions) (*testenv.NATS, events.Subjects) {
	t.Helper()
	n := testenv.StartNATSWith(t, opts)
	subjects := events.NewSubjects("proxbus")
	if err := consumer.Provision(context.Background(), n.JS, consumer.Config{Subjects: subjects}); err != nil {
		t.Fatalf("provision: %v", err)
	}
	return n, subjects
}

// replica publishes events about cmd as a proxbus replica would.
type replica struct {
	t  *testing.T
	js jetstream.JetStream
	em events.Emitter
}

func (r replica) publish(cmd events.Command, payloads ...events.Payload) {
	r.t.Helper()
	for _, p := range payloads {
		_, msg, err := r.em.Event(events.OriginOf(cmd), p)
		if err != nil {
			r.t.Fatal(err)
		}
		if _, err := r.js.PublishMsg(context.Background(), msg); err != nil {
			r.t.Fatalf("publish event: %v", err)
		}
	}
}

func testCommand(id string) events.Command {
	return events.Command{ID: id, Source: "/test", Verb: "vm.start", Type: "proxbus.vm.start",
		EndpointID: 1, HasEndpointID: true, Data: json.RawMessage(`{"vm":100}`)}
}

// TestSendCommandFollowsOnlyNewEvents pins that SendCommand delivers only the events stored
// after its publish: a re-sent command's earlier steps are not shown again, and the result
// is the new one. OnSent comes once the command is stored, before any event.
func TestSendCommandFollowsOnlyNewEvents(t *testing.T) {
	t.Parallel()
	n, subjects := provisioned(t, embedded.NATSOptions{})
	r := replica{t, n.JS, events.NewEmitter(subjects, "test")}
	cmd := testCommand("new-only")
	r.publish(cmd, events.Step{Seq: 1, Step: "old_step", Status: events.StepDone})
	var steps []string
	var sentAt int
	res, err := app.SendCommand(testContext(t), n.JS, subjects, cmd, app.SendOptions{
		OnSent: func(s app.Sent) {
			sentAt = len(steps) + 1
			if s.Duplicate || s.Seq == 0 {
				t.Errorf("sent %+v", s)
			}
			if info, err := n.JS.Stream(context.Background(), subjects.CommandsStream()); err != nil || info.CachedInfo().State.Msgs != 1 {
				t.Errorf("OnSent before the command was stored (%v)", err)
			}
			r.publish(cmd, events.Step{Seq: 2, Step: "new_step", Status: events.StepDone}, events.Result{Status: 200, Result: "ok"})
		},
		OnStep: func(st events.Step) { steps = append(steps, st.Step) },
	})
	if err != nil || res.Result != "ok" {
		t.Fatalf("SendCommand = %+v, %v", res, err)
	}
	if sentAt != 1 || !slices.Equal(steps, []string{"new_step"}) {
		t.Errorf("OnSent at %d, steps %v; want OnSent first, then only new_step", sentAt, steps)
	}
}

// TestSendCommandDuplicate pins a command id published again within the commands stream's
// duplicate window: not stored again (Sent.Duplicate), and its events are followed from the
// first, since they are this very command's.
func TestSendCommandDuplicate(t *testing.T) {
	t.Parallel()
	n, subjects := provisioned(t, embedded.NATSOptions{})
	r := replica{t, n.JS, events.NewEmitter(subjects, "test")}
	cmd := testCommand("dup-1")
	if _, err := app.SendCommand(testContext(t), n.JS, subjects, cmd, app.SendOptions{NoWait: true}); err != nil {
		t.Fatal(err)
	}
	r.publish(cmd, events.Step{Seq: 1, Step: "first_step", Status: events.StepDone}, events.Result{Status: 200, Result: "ok"})
	var sent app.Sent
	var steps []string
	res, err := app.SendCommand(testContext(t), n.JS, subjects, cmd, app.SendOptions{
		OnSent: func(s app.Sent) { sent = s },
		OnStep: func(st events.Step) { steps = append(steps, st.Step) },
	})
	if err != nil || res.Result != "ok" {
		t.Fatalf("SendCommand = %+v, %v", res, err)
	}
	if !sent.Duplicate || !slices.Equal(steps, []string{"first_step"}) {
		t.Errorf("sent %+v, steps %v; want a duplicate followed from its first step", sent, steps)
	}
}

// TestSendCommandStreamsMissing pins a server without the proxbus streams: ErrStreamsMissing
// at once (one lookup, no publish), OnSent never called, with and without NoWait; and the
// events stream alone missing is refused before publishing too.
func TestSendCommandStreamsMissing(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	subjects := events.NewSubjects("proxbus")
	for _, noWait := range []bool{false, true} {
		before := n.Conn.Stats().OutMsgs
		_, err := app.SendCommand(testContext(t), n.JS, subjects, testCommand("missing"), app.SendOptions{
			NoWait: noWait,
			OnSent: func(app.Sent) { t.Error("OnSent without a stream") },
		})
		if !errors.Is(err, app.ErrStreamsMissing) || !strings.Contains(err.Error(), "PROXBUS_EVENTS") {
			t.Errorf("noWait %v: err = %v, want ErrStreamsMissing naming PROXBUS_EVENTS", noWait, err)
		}
		if sent := n.Conn.Stats().OutMsgs - before; sent != 1 {
			t.Errorf("noWait %v: %d messages went out, want only the stream lookup", noWait, sent)
		}
	}
	if _, err := n.JS.CreateStream(context.Background(), consumer.StreamConfigs(consumer.Config{Subjects: subjects})[0]); err != nil {
		t.Fatal(err)
	}
	_, err := app.SendCommand(testContext(t), n.JS, subjects, testCommand("missing"), app.SendOptions{})
	if !errors.Is(err, app.ErrStreamsMissing) {
		t.Errorf("err = %v, want ErrStreamsMissing", err)
	}
	if s, _ := n.JS.Stream(context.Background(), subjects.CommandsStream()); s.CachedInfo().State.Msgs != 0 {
		t.Error("a command was stored though its events cannot be followed")
	}
}

// TestSendCommandTooLarge pins a command over the server's max_payload or the commands
// stream's max_msg_size: a TooLargeError naming the limit and the size, nothing stored.
func TestSendCommandTooLarge(t *testing.T) {
	t.Parallel()
	big := testCommand("big")
	big.Data = json.RawMessage(`{"vm":100,"pad":"` + strings.Repeat("x", 6000) + `"}`)
	cases := []struct {
		name       string
		maxPayload int32
		maxMsgSize int32
		wantOf     string
		wantLimit  int64
	}{
		{"max_payload", 4096, 0, "the NATS server's max_payload", 4096},
		{"max_msg_size", 0, 2048, "the PROXBUS_COMMANDS stream's max_msg_size", 2048},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n, subjects := provisioned(t, embedded.NATSOptions{MaxPayload: tc.maxPayload})
			if tc.maxMsgSize > 0 {
				cfg := consumer.StreamConfigs(consumer.Config{Subjects: subjects})[0]
				cfg.MaxMsgSize = tc.maxMsgSize
				if _, err := n.JS.UpdateStream(context.Background(), cfg); err != nil {
					t.Fatal(err)
				}
			}
			_, err := app.SendCommand(testContext(t), n.JS, subjects, big, app.SendOptions{NoWait: true})
			var tl *app.TooLargeError
			if !errors.Is(err, app.ErrTooLarge) || !errors.As(err, &tl) {
				t.Fatalf("err = %v, want a TooLargeError", err)
			}
			if tl.Of != tc.wantOf || tl.Limit != tc.wantLimit || tl.Size <= int64(len(big.Data)) {
				t.Errorf("TooLargeError %+v, want %s %d and the size with headers", tl, tc.wantOf, tc.wantLimit)
			}
			if s, _ := n.JS.Stream(context.Background(), subjects.CommandsStream()); s.CachedInfo().State.Msgs != 0 {
				t.Error("the command was stored")
			}
		})
	}
}

// TestSendCommandTooLargeRefusedByStream pins the stream's refusal when its max_msg_size
// cannot be looked up (the lookup not permitted): a TooLargeError still naming the limit.
func TestSendCommandTooLargeRefusedByStream(t *testing.T) {
	t.Parallel()
	n, subjects := provisioned(t, embedded.NATSOptions{})
	big := testCommand("big-2")
	big.Data = json.RawMessage(`{"vm":100,"pad":"` + strings.Repeat("x", 3000) + `"}`)
	js := lookupDenied{n.JS}
	cfg := consumer.StreamConfigs(consumer.Config{Subjects: subjects})[0]
	cfg.MaxMsgSize = 1024
	if _, err := n.JS.UpdateStream(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	_, err := app.SendCommand(testContext(t), js, subjects, big, app.SendOptions{NoWait: true})
	var tl *app.TooLargeError
	if !errors.As(err, &tl) || tl.Of != "the PROXBUS_COMMANDS stream's max_msg_size" || tl.Limit != 0 || !strings.Contains(err.Error(), "max_msg_size") {
		t.Fatalf("err = %v, want a TooLargeError of max_msg_size", err)
	}
}

// lookupDenied is a JetStream whose stream lookups fail as without the permission.
type lookupDenied struct{ jetstream.JetStream }

func (lookupDenied) Stream(context.Context, string) (jetstream.Stream, error) {
	return nil, errors.New("permissions violation")
}

// testContext ends with the test, or after 30 s.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
