package netbox_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/netbox"
	"github.com/proxbus/proxbus/internal/testenv"
)

// fakeLookup counts lookups and answers from a script; block, when set, holds every lookup
// until it is closed (started is signalled first).
type fakeLookup struct {
	mu      sync.Mutex
	calls   int
	results []error // per call; nil entries (or past the end) succeed
	allow   bool
	started chan struct{}
	block   chan struct{}
}

func (f *fakeLookup) Endpoint(ctx context.Context, id int64) (netbox.Endpoint, error) {
	f.mu.Lock()
	n := f.calls
	f.calls++
	allow := f.allow
	var err error
	if n < len(f.results) {
		err = f.results[n]
	}
	f.mu.Unlock()
	if f.started != nil {
		f.started <- struct{}{}
	}
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return netbox.Endpoint{}, ctx.Err()
		}
	}
	if err != nil {
		return netbox.Endpoint{}, err
	}
	return netbox.Endpoint{ID: id, Name: "lab", AllowWrites: allow}, nil
}

func (f *fakeLookup) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// TestEndpointCache pins TTL hits, expiry and that errors are never cached, with an injected clock.
func TestEndpointCache(t *testing.T) {
	t.Parallel()
	boom := netbox.ErrUnavailable
	tests := []struct {
		name      string
		results   []error
		steps     []time.Duration // clock advance before each call
		wantErrs  []error
		wantCalls int
	}{
		{"hit within ttl", nil, []time.Duration{0, 10 * time.Second, 19 * time.Second}, []error{nil, nil, nil}, 1},
		{"expiry", nil, []time.Duration{0, 30 * time.Second, time.Second}, []error{nil, nil, nil}, 2},
		{"errors not cached", []error{boom, boom}, []time.Duration{0, 0, 0, 0}, []error{boom, boom, nil, nil}, 3},
		{"not found not cached", []error{netbox.ErrNotFound}, []time.Duration{0, 0}, []error{netbox.ErrNotFound, nil}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := testenv.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			f := &fakeLookup{results: tc.results, allow: true}
			c := netbox.NewEndpointCache(f, 30*time.Second, clk.Now)
			for i, d := range tc.steps {
				clk.Advance(d)
				ep, err := c.Endpoint(context.Background(), 1)
				if !errors.Is(err, tc.wantErrs[i]) || (tc.wantErrs[i] == nil && err != nil) {
					t.Fatalf("call %d: err = %v, want %v", i, err, tc.wantErrs[i])
				}
				if err == nil && (ep.ID != 1 || !ep.AllowWrites) {
					t.Fatalf("call %d: endpoint = %+v", i, ep)
				}
				if err != nil && ep.AllowWrites {
					t.Fatalf("call %d: error with AllowWrites true", i)
				}
			}
			if got := f.count(); got != tc.wantCalls {
				t.Fatalf("lookups = %d, want %d", got, tc.wantCalls)
			}
		})
	}
}

// TestEndpointCacheIDs checks that ids are cached separately.
func TestEndpointCacheIDs(t *testing.T) {
	t.Parallel()
	f := &fakeLookup{}
	c := netbox.NewEndpointCache(f, time.Minute, nil)
	for _, id := range []int64{1, 2, 1, 2} {
		ep, err := c.Endpoint(context.Background(), id)
		if err != nil || ep.ID != id {
			t.Fatalf("id %d: %+v %v", id, ep, err)
		}
	}
	if got := f.count(); got != 2 {
		t.Fatalf("lookups = %d, want 2", got)
	}
}

// TestEndpointCacheSharedMiss checks that concurrent misses for one id share one lookup, and
// that a waiter whose context ends stops waiting without disturbing the lookup.
func TestEndpointCacheSharedMiss(t *testing.T) {
	t.Parallel()
	f := &fakeLookup{allow: true, started: make(chan struct{}, 16), block: make(chan struct{})}
	c := netbox.NewEndpointCache(f, time.Minute, nil)

	var wg sync.WaitGroup
	results := make(chan error, 9)
	wg.Go(func() {
		_, err := c.Endpoint(context.Background(), 1)
		results <- err
	})
	<-f.started // the first lookup is in flight

	// A waiter whose context is already over returns at once.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Endpoint(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: err = %v", err)
	}

	for range 8 {
		wg.Go(func() {
			ep, err := c.Endpoint(context.Background(), 1)
			if err == nil && !ep.AllowWrites {
				err = errors.New("wrong endpoint")
			}
			results <- err
		})
	}
	close(f.block)
	wg.Wait()
	close(results)
	for err := range results {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := f.count(); got != 1 {
		t.Fatalf("lookups = %d, want 1", got)
	}
}

// TestEndpointCacheAgainstSim checks the cache in front of the real client: concurrent gate
// checks cost one request, and a NetBox outage is not hidden by a cached error.
func TestEndpointCacheAgainstSim(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "")
	clk := testenv.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := netbox.NewEndpointCache(fx.client, 30*time.Second, clk.Now)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if ep, err := c.Endpoint(context.Background(), 2); err != nil || ep.AllowWrites {
				t.Errorf("endpoint 2 = %+v, %v", ep, err)
			}
		})
	}
	wg.Wait()
	if n := fx.sim.Requests("GET", "/api/plugins/proxbox/endpoints/proxmox/2/"); n != 1 {
		t.Fatalf("requests = %d, want 1", n)
	}
	// The cached answer hides a change until the TTL passes.
	fx.sim.SetAllowWrites(2, true)
	if ep, _ := c.Endpoint(context.Background(), 2); ep.AllowWrites {
		t.Fatal("change visible before the TTL")
	}
	clk.Advance(31 * time.Second)
	fx.sim.SetDown(true)
	if _, err := c.Endpoint(context.Background(), 2); !netbox.IsTransient(err) {
		t.Fatalf("expired entry with NetBox down: err = %v", err)
	}
	fx.sim.SetDown(false)
	if ep, err := c.Endpoint(context.Background(), 2); err != nil || !ep.AllowWrites {
		t.Fatalf("after recovery: %+v %v", ep, err)
	}
}
