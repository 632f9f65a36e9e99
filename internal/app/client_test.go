package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/consumer"
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
