package handlers

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// followTable makes every move of p's deliveries be checked against the command state table:
// the test fails, when it ends, naming each move the table does not have.
func followTable(t *testing.T, p *Pipeline) {
	t.Helper()
	var mu sync.Mutex
	var stray []string
	p.observe = func(tr Transition) {
		if !allowed(tr.From, tr.On, tr.To) {
			mu.Lock()
			stray = append(stray, tr.String())
			mu.Unlock()
		}
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if len(stray) > 0 {
			t.Errorf("moves the command state table does not have: %s", strings.Join(stray, "; "))
		}
	})
}

// allStates is every State.
var allStates = []State{StateReceived, StateWaiting, StateAwaitingApproval, StateRunning, StateConfirming,
	StateDone, StateExpired, StateCancelled, StateRejected, StateFailed}

// TestTransitionTable pins the table's shape: no move leaves an end state, every other state
// can move and is reached, every end state is reached, and no row is listed twice.
func TestTransitionTable(t *testing.T) {
	t.Parallel()
	seen := map[Transition]bool{}
	leaves, reached := map[State]bool{}, map[State]bool{StateReceived: true}
	for _, tr := range Transitions {
		key := Transition{From: tr.From, On: tr.On, To: tr.To}
		if seen[key] {
			t.Errorf("%s is listed twice", tr)
		}
		seen[key] = true
		if tr.From.Final() {
			t.Errorf("%s leaves an end state", tr)
		}
		if tr.By == "" || tr.Persists == "" {
			t.Errorf("%s does not say who makes it or what is kept", tr)
		}
		leaves[tr.From], reached[tr.To] = true, true
	}
	for _, s := range allStates {
		if !s.Final() && !leaves[s] {
			t.Errorf("nothing leaves %s", s)
		}
		if !reached[s] {
			t.Errorf("nothing reaches %s", s)
		}
	}
	if allowed(StateDone, EventClaimed, StateRunning) || !allowed(StateReceived, EventClaimed, StateRunning) {
		t.Error("allowed does not follow the table")
	}
}

// TestPipelineMovesAlongTheTable pins that the check the other tests run (followTable) catches
// a move the table does not have.
func TestPipelineMovesAlongTheTable(t *testing.T) {
	t.Parallel()
	p := &Pipeline{}
	var caught []string
	p.observe = func(tr Transition) {
		if !allowed(tr.From, tr.On, tr.To) {
			caught = append(caught, tr.String())
		}
	}
	r := &run{p: p, log: slog.New(slog.DiscardHandler)}
	r.drive(t.Context(), func(ctx context.Context) move {
		return move{on: EventClaimed, to: StateRunning}.then(func(context.Context) move {
			return move{on: EventExpired, to: StateExpired} // a started command never expires
		})
	})
	if want := "running --expired--> expired"; len(caught) != 1 || caught[0] != want {
		t.Fatalf("caught %v, want [%s]", caught, want)
	}
}

// TestArchitectureShowsTheTable pins that docs/architecture.md shows the table as it is.
func TestArchitectureShowsTheTable(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := TableMarkdown()
	if !strings.Contains(string(doc), want) {
		t.Errorf("docs/architecture.md does not show the command state table as handlers.Transitions has it; put this in it:\n%s", want)
	}
}
