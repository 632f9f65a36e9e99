package app_test

import (
	"context"
	"errors"
	"testing"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/handlers"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/embedded"
	"github.com/proxbus/proxbus/internal/testenv"
	"github.com/proxbus/proxbus/store"
)

// TestCommandStatus pins proxbus status's reading of a command against a real events stream
// and Redis: a finished command is done with its steps and first-hand result (a replay does
// not replace it); one whose approval is pending awaits approval; one held by a replica runs;
// a command nobody knows is ErrCommandUnknown.
func TestCommandStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n, subjects := provisioned(t, embedded.NATSOptions{})
	r := replica{t, n.JS, events.NewEmitter(subjects, "test")}
	redis := testenv.StartRedis(t)
	st, err := store.New(redis.Client, store.Options{Prefix: redis.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	key := func(c events.Command) store.CommandKey { return store.CommandKey{Source: c.Source, ID: c.ID} }

	done := testCommand("status-done")
	r.publish(done, events.Step{Seq: 1, Step: "start_vm", Status: events.StepStarted}, events.Step{Seq: 2, Step: "start_vm", Status: events.StepDone},
		events.Result{Status: 200, Result: "ok"}, events.Result{Status: 200, Result: "ok", Replayed: true})
	awaiting := testCommand("status-awaiting")
	r.publish(awaiting, events.Step{Seq: 1, Step: "approval", Status: events.StepWaiting, Detail: "awaiting approval"})
	if _, err := st.RequestApproval(ctx, store.Approval{Command: key(awaiting), Verb: "vm.start", Requester: "alice"}); err != nil {
		t.Fatal(err)
	}
	running := testCommand("status-running")
	if c, err := st.Claim(ctx, store.ClaimRequest{Command: key(running), Owner: "replica-1/1/1"}); err != nil || c.State != store.Claimed {
		t.Fatalf("claim: %v %v", c.State, err)
	}

	tests := []struct {
		cmd   events.Command
		state handlers.State
		steps int
	}{
		{done, handlers.StateDone, 2},
		{awaiting, handlers.StateAwaitingApproval, 1},
		{running, handlers.StateRunning, 0},
	}
	for _, tc := range tests {
		got, err := app.CommandStatus(ctx, n.JS, subjects, st, key(tc.cmd))
		if err != nil || got.State != tc.state || len(got.Steps) != tc.steps {
			t.Errorf("%s: %s with %d steps (%v), want %s with %d", tc.cmd.ID, got.State, len(got.Steps), err, tc.state, tc.steps)
		}
		if tc.state == handlers.StateDone && (got.Result == nil || got.Result.Replayed) {
			t.Errorf("%s: result %+v, want the first-hand one", tc.cmd.ID, got.Result)
		}
	}
	if _, err := app.CommandStatus(ctx, n.JS, subjects, st, store.CommandKey{Source: "/test", ID: "nobody"}); !errors.Is(err, app.ErrCommandUnknown) {
		t.Errorf("unknown command: %v, want ErrCommandUnknown", err)
	}
}
