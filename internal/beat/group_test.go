package beat

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// runGroup runs a Group of the given interval until the test ends.
func runGroup(t *testing.T, interval time.Duration) *Group {
	t.Helper()
	g := NewGroup(interval)
	ctx, cancel := context.WithCancel(context.Background())
	var running sync.WaitGroup
	running.Go(func() { g.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		running.Wait()
	})
	return g
}

// TestSlotCallsEveryFourTicks: a held function is called on the fourth tick after Hold (3/4 to
// one interval later, depending on where between two ticks Hold fell), then on every fourth,
// and never once released.
func TestSlotCallsEveryFourTicks(t *testing.T) {
	t.Parallel()
	g := NewGroup(time.Second) // never run: the test ticks by hand
	s := g.Slot()
	defer s.Close()
	calls := 0
	s.Hold(func() bool { calls++; return true })
	for tick, want := range []int{0, 0, 0, 1, 1, 1, 1, 2} {
		s.tick()
		if calls != want {
			t.Fatalf("after tick %d: %d calls, want %d", tick+1, calls, want)
		}
	}
	s.Hold(func() bool { calls += 100; return true }) // a new holding counts from zero
	for range 3 {
		s.tick()
	}
	if calls != 2 {
		t.Fatalf("%d calls three ticks after a new Hold, want 2", calls)
	}
	s.tick()
	if calls != 102 {
		t.Fatalf("%d calls on the fourth tick, want the new function's call (102)", calls)
	}
	s.Release()
	for range 8 {
		s.tick()
	}
	if calls != 102 {
		t.Errorf("%d calls after Release, want 102", calls)
	}
}

func TestGroupCallsHeldFunctionsUntilReleased(t *testing.T) {
	t.Parallel()
	g := runGroup(t, 4*time.Millisecond)
	a, b := g.Slot(), g.Slot()
	defer a.Close()
	defer b.Close()
	var ca, cb atomic.Int32
	a.Hold(func() bool { ca.Add(1); return true })
	b.Hold(func() bool { cb.Add(1); return true })
	waitFor(t, "three calls of each", func() bool { return ca.Load() >= 3 && cb.Load() >= 3 })
	a.Release()
	after := ca.Load()
	waitFor(t, "three more calls of the other", func() bool { return cb.Load() >= 6 })
	if got := ca.Load(); got != after {
		t.Errorf("%d calls after Release returned, want none", got-after)
	}
}

func TestGroupEndsCallsWhenFReturnsFalse(t *testing.T) {
	t.Parallel()
	g := runGroup(t, 4*time.Millisecond)
	s, other := g.Slot(), g.Slot()
	defer s.Close()
	defer other.Close()
	var calls, others atomic.Int32
	s.Hold(func() bool { calls.Add(1); return false })
	other.Hold(func() bool { others.Add(1); return true })
	waitFor(t, "the first call", func() bool { return calls.Load() >= 1 })
	waitFor(t, "three intervals more", func() bool { return others.Load() >= 4 })
	if got := calls.Load(); got != 1 {
		t.Errorf("%d calls, want 1: f returned false", got)
	}
}

func TestReleaseWaitsForCallInProgress(t *testing.T) {
	t.Parallel()
	g := runGroup(t, time.Millisecond)
	s := g.Slot()
	defer s.Close()
	entered, release := make(chan struct{}), make(chan struct{})
	unblock := sync.OnceFunc(func() { close(release) })
	defer unblock() // first, so that a failing test does not hang in Close or the group's end
	var finished atomic.Bool
	var once sync.Once
	s.Hold(func() bool {
		once.Do(func() {
			close(entered)
			<-release
			finished.Store(true)
		})
		return true
	})
	<-entered
	released := make(chan struct{})
	go func() { s.Release(); close(released) }()
	select {
	case <-released:
		t.Fatal("Release returned while a call was in progress")
	case <-time.After(20 * time.Millisecond):
	}
	unblock()
	<-released
	if !finished.Load() {
		t.Error("Release returned before the call in progress did")
	}
}

func TestClosedSlotIsNotCalled(t *testing.T) {
	t.Parallel()
	g := runGroup(t, 4*time.Millisecond)
	s, other := g.Slot(), g.Slot()
	defer other.Close()
	var calls, others atomic.Int32
	s.Hold(func() bool { calls.Add(1); return true })
	s.Close()
	other.Hold(func() bool { others.Add(1); return true })
	waitFor(t, "three calls of the other slot", func() bool { return others.Load() >= 3 })
	if got := calls.Load(); got != 0 {
		t.Errorf("%d calls of a closed slot, want none", got)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.slots[s]; ok {
		t.Error("closed slot still in its group")
	}
}

func TestRunWithoutIntervalReturnsAtOnce(t *testing.T) {
	t.Parallel()
	g := NewGroup(0)
	done := make(chan struct{})
	go func() { g.Run(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run of a group without an interval did not return")
	}
}

// TestGroupOfTinyInterval: an interval shorter than its four ticks still runs (a tick of a
// nanosecond) and calls what is held.
func TestGroupOfTinyInterval(t *testing.T) {
	t.Parallel()
	g := runGroup(t, 3*time.Nanosecond)
	s := g.Slot()
	defer s.Close()
	var calls atomic.Int32
	s.Hold(func() bool { calls.Add(1); return true })
	waitFor(t, "a call", func() bool { return calls.Load() >= 1 })
}
