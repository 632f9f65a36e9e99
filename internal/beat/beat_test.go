package beat

import (
	"sync/atomic"
	"testing"
	"time"
)

// waitFor polls cond for up to 5 s (no timed assertion: only a bound on a hang).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestStartBeatsUntilStopped(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	stop := Start(time.Millisecond, func() bool { calls.Add(1); return true })
	waitFor(t, "three beats", func() bool { return calls.Load() >= 3 })
	stop()
	after := calls.Load()
	time.Sleep(20 * time.Millisecond)
	if got := calls.Load(); got != after {
		t.Errorf("%d beats after stop returned, want none", got-after)
	}
	stop() // a second stop is harmless
}

func TestStartEndsWhenFReturnsFalse(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	stop := Start(time.Millisecond, func() bool { calls.Add(1); return false })
	t.Cleanup(stop)
	waitFor(t, "the first beat", func() bool { return calls.Load() >= 1 })
	time.Sleep(20 * time.Millisecond)
	if got := calls.Load(); got != 1 {
		t.Errorf("%d beats, want 1: f returned false", got)
	}
}

func TestStopWaitsForBeatInProgress(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	stop := Start(time.Millisecond, func() bool {
		close(entered)
		<-release
		finished.Store(true)
		return true
	})
	<-entered
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("stop returned while a beat was in progress")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	<-stopped
	if !finished.Load() {
		t.Error("stop returned before the beat in progress did")
	}
}

func TestStopBeforeFirstBeat(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	stop := Start(10*time.Millisecond, func() bool { calls.Add(1); return true })
	stop()
	time.Sleep(30 * time.Millisecond)
	if got := calls.Load(); got != 0 {
		t.Errorf("%d beats after a stop before the first, want none", got)
	}
}

func TestStartWithoutIntervalNeverCalls(t *testing.T) {
	t.Parallel()
	for _, interval := range []time.Duration{0, -time.Second} {
		var calls atomic.Int32
		stop := Start(interval, func() bool { calls.Add(1); return true })
		time.Sleep(10 * time.Millisecond)
		stop()
		if got := calls.Load(); got != 0 {
			t.Errorf("interval %s: %d calls, want none", interval, got)
		}
	}
}
