package proxmox_test

import (
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// guestSim starts a demo simulator whose tasks take taskDur (negative: end at once) and a
// full-rights client polling tasks every millisecond.
func guestSim(t *testing.T, taskDur time.Duration) (*simpve.Server, *proxmox.Client) {
	t.Helper()
	sim := simpve.New(simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: taskDur, NodeRebootDuration: -1})
	url, err := sim.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("start sim: %v", err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	c := newClient(t, endpoint(simpve.DemoTokenID, url), simpve.DemoSecret, proxmox.WithTaskPollInterval(time.Millisecond))
	return sim, c
}

// resolve resolves ref, failing the test on error.
func resolve(t *testing.T, c *proxmox.Client, ref string) proxmox.Guest {
	t.Helper()
	g, err := c.ResolveGuest(testCtx(t), ref)
	if err != nil {
		t.Fatalf("ResolveGuest(%q): %v", ref, err)
	}
	return g
}

// writes counts the non-GET requests the simulator read.
func writes(sim *simpve.Server) int {
	n := 0
	for _, r := range sim.RequestLog() {
		if r.Method != "GET" {
			n++
		}
	}
	return n
}

// taskTypes returns the worker types of upids.
func taskTypes(t *testing.T, upids []string) []string {
	t.Helper()
	out := make([]string, 0, len(upids))
	for _, s := range upids {
		u, err := proxmox.ParseUPID(s)
		if err != nil {
			t.Fatalf("ParseUPID(%q): %v", s, err)
		}
		out = append(out, u.Type)
	}
	return out
}
