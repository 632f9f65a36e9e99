package repair

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/store"
)

// fakeStore holds repairs with the times they are due, as the store's repairs index does.
type fakeStore struct {
	mu          sync.Mutex
	due         map[string]time.Time
	reps        map[string]store.Repair
	rescheduled []time.Duration // delay of each reschedule, from the time it was asked
}

func (s *fakeStore) ClaimDueRepair(_ context.Context, lease time.Duration) (store.Repair, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, at := range s.due {
		if !time.Now().Before(at) {
			s.due[id] = time.Now().Add(lease)
			return s.reps[id], true, nil
		}
	}
	return store.Repair{}, false, nil
}

func (s *fakeStore) RescheduleRepair(_ context.Context, rep store.Repair, next time.Time, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rep.Attempts++
	s.reps[rep.Command.ID] = rep
	s.due[rep.Command.ID] = next
	s.rescheduled = append(s.rescheduled, time.Until(next))
	return nil
}

func (s *fakeStore) done(rep store.Repair) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.due, rep.Command.ID)
}

// flakyApplier refuses each repair fails times, then applies it.
type flakyApplier struct {
	st      *fakeStore
	fails   int
	mu      sync.Mutex
	applied map[string]time.Time
	tries   int
}

func (a *flakyApplier) ApplyRepair(_ context.Context, rep store.Repair) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tries++
	if rep.Attempts < a.fails {
		return errors.New("netbox: 503")
	}
	a.applied[rep.Command.ID] = time.Now()
	a.st.done(rep)
	return nil
}

// TestRunRetriesUntilApplied: a repair NetBox refuses is rescheduled with a doubling delay
// and applied once NetBox takes it; nothing is dropped, and Run returns nil when ctx ends.
func TestRunRetriesUntilApplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rep := store.Repair{Command: store.CommandKey{ID: "c1", Source: "s"}, JournalID: 7}
		st := &fakeStore{due: map[string]time.Time{"c1": time.Now()}, reps: map[string]store.Repair{"c1": rep}}
		a := &flakyApplier{st: st, fails: 3, applied: map[string]time.Time{}}
		ctx, cancel := context.WithCancel(t.Context())
		start := time.Now()
		errc := make(chan error, 1)
		go func() { errc <- Run(ctx, st, a, Config{Logger: slog.New(slog.DiscardHandler)}) }()

		time.Sleep(time.Minute)
		synctest.Wait()
		cancel()
		if err := <-errc; err != nil {
			t.Fatalf("Run returned %v, want nil once ctx ended", err)
		}
		want := []time.Duration{DefaultBaseBackoff, 2 * DefaultBaseBackoff, 4 * DefaultBaseBackoff}
		if len(st.rescheduled) != len(want) {
			t.Fatalf("rescheduled %v, want %v", st.rescheduled, want)
		}
		for i, d := range want {
			if st.rescheduled[i] != d {
				t.Errorf("reschedule %d after %v, want %v", i+1, st.rescheduled[i], d)
			}
		}
		at, ok := a.applied["c1"]
		if !ok {
			t.Fatal("repair never applied")
		}
		// Applied at the first scan after the last delay: 2+4+8 s, scanned every 2 s.
		if got := at.Sub(start); got != 14*time.Second {
			t.Errorf("applied after %v, want 14s", got)
		}
		if a.tries != 4 {
			t.Errorf("%d tries, want 4 (three refusals, one success)", a.tries)
		}
	})
}

func TestBackoffIsCapped(t *testing.T) {
	t.Parallel()
	c := Config{BaseBackoff: time.Second, MaxBackoff: time.Minute}
	for _, tt := range []struct {
		attempts int
		want     time.Duration
	}{{0, time.Second}, {1, 2 * time.Second}, {5, 32 * time.Second}, {6, time.Minute}, {1000, time.Minute}} {
		if got := c.Backoff(tt.attempts); got != tt.want {
			t.Errorf("Backoff(%d) = %v, want %v", tt.attempts, got, tt.want)
		}
	}
}

func TestNegativeDurationsAreRefused(t *testing.T) {
	t.Parallel()
	err := Run(t.Context(), &fakeStore{}, &flakyApplier{}, Config{Interval: -time.Second})
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "Interval") {
		t.Fatalf("Run with a negative Interval: %v, want config.ErrInvalid naming Interval", err)
	}
}
