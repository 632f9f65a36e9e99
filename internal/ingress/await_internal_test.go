package ingress

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/testenv"
)

// TestStoredResult: the lookup the front makes after its wait finds a result stored in the
// events stream (one whose live message the subscription missed), and only a result.
func TestStoredResult(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	subjects := events.NewSubjects("proxbus")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := consumer.Provision(ctx, n.JS, consumer.Config{Subjects: subjects}.WithDefaults()); err != nil {
		t.Fatalf("provision: %v", err)
	}
	s, err := New(Config{JetStream: n.JS, Conn: n.Conn, Subjects: subjects})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	origin := events.Origin{ID: "cmd-stored", Source: "/test", Verb: PBSVerb}
	if _, ok := s.storedResult(ctx, subjects.Result("cmd-stored")); ok {
		t.Fatal("found a result before any was stored")
	}
	emitter := events.NewEmitter(subjects, "test")
	_, step, _ := emitter.Event(origin, events.Step{Seq: 1, Step: "gate", Status: events.StepDone})
	_, res, _ := emitter.Event(origin, events.Result{Status: 409, Result: "refused", Reason: "storage_conflict", JournalFinalized: new(true), Replayed: true})
	for _, m := range []*nats.Msg{step, res} {
		if _, err := n.JS.PublishMsg(ctx, m); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	got, ok := s.storedResult(ctx, subjects.Result("cmd-stored"))
	if !ok || got.Status != 409 || got.Reason != "storage_conflict" || !got.Replayed || got.CommandID != "cmd-stored" {
		t.Errorf("stored result %+v %v", got, ok)
	}
}
