package e2e_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
)

// TestGuestCommandsNeverOverlap: commands on one guest, spread over two replicas, run one at a
// time — none meets Proxmox's config lock ("can't lock file"), every one succeeds.
func TestGuestCommandsNeverOverlap(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.pve.SetTaskDuration(150 * time.Millisecond)
	e.replica("r1")
	e.replica("r2")
	var cmds []events.Command
	for i := range 6 {
		verb := "vm.stop"
		if i%2 == 1 {
			verb = "vm.start"
		}
		c := e.guestCommand(verb, `{"vm":100,"force":true}`)
		if verb == "vm.start" {
			c = e.guestCommand(verb, `{"vm":100}`)
		}
		cmds = append(cmds, c)
		e.publish(c)
	}
	for _, c := range cmds {
		res := e.result(c)
		if res.Status != 200 {
			t.Errorf("%s: %d %s %s (overlapping commands on one guest)", c.Verb, res.Status, res.Reason, res.Detail)
		}
	}
}

// TestMaxParallelPerEndpoint: with max_parallel 1 two replicas never have two commands'
// requests in flight against the cluster at once, yet both commands complete.
func TestMaxParallelPerEndpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var inFlight, peak atomic.Int64
	counting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond) // widen the window a second command would overlap in
		e.pve.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(counting.Close)
	one := func(c *app.Config) {
		c.Endpoints[0].URLs = []string{counting.URL}
		c.Endpoints[0].MaxParallel = 1
		// max_parallel bounds commands; the endpoint's watch reads beside them (one request
		// per round), and this test counts every request
		c.NoTaskWatch = true
	}
	e.replica("r1", one)
	e.replica("r2", one)
	var wg sync.WaitGroup
	for _, id := range []string{"pbs-par-1", "pbs-par-2", "pbs-par-3"} {
		c := e.command(pbs(id))
		e.publish(c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if res := e.result(c); res.Status != 201 {
				t.Errorf("%s: %d %s", id, res.Status, res.Reason)
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p != 1 {
		t.Errorf("peak concurrent Proxmox requests = %d, want 1 with max_parallel 1", p)
	}
}
