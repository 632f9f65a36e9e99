package proxmox_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// TestConcurrentRequestsReuseConnections pins the client's connection pool: after a burst of
// concurrent requests, the next burst of the same size runs on the connections the first one
// opened (net/http's default keeps only two idle per host, so it would open most anew and leave
// the rest in TIME_WAIT — thousands per minute under load).
func TestConcurrentRequestsReuseConnections(t *testing.T) {
	t.Parallel()
	sim := simpve.New(simpve.Options{Scenario: simpve.ScenarioDemo})
	const burst = 16
	var opened atomic.Int64
	var mu sync.Mutex
	var arrived *sync.WaitGroup
	var release chan struct{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		a, rel := arrived, release
		mu.Unlock()
		a.Done() // every request of a burst is held until the whole burst is in flight
		<-rel
		sim.Handler().ServeHTTP(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c := demoClient(t, srv.URL)

	run := func() {
		mu.Lock()
		arrived, release = &sync.WaitGroup{}, make(chan struct{})
		arrived.Add(burst)
		a, rel := arrived, release
		mu.Unlock()
		go func() { a.Wait(); close(rel) }()
		var wg sync.WaitGroup
		for range burst {
			wg.Go(func() {
				if _, err := c.Version(testCtx(t)); err != nil {
					t.Errorf("Version: %v", err)
				}
			})
		}
		wg.Wait()
	}
	run()
	first := opened.Load()
	if first < burst {
		t.Fatalf("the first burst opened %d connections, want %d (requests were not concurrent)", first, burst)
	}
	run()
	if again := opened.Load() - first; again > 0 {
		t.Errorf("the second burst opened %d new connections; want all %d reused", again, burst)
	}
}
