package proxmox_test

import (
	"errors"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// TestProvisionalLocate pins WithProvisionalLocate: a locate under it answers from the
// client's newest read of the guests without a request (so what it finds may be out of
// date), a plain locate always reads them; under it no request is sent (a running VM's
// status read fails), and a guest the newest read lacks is not answered vm_not_found.
func TestProvisionalLocate(t *testing.T) {
	t.Parallel()
	sim, c := guestSim(t, -1)
	ctx := testCtx(t)
	reads := func() int { return sim.Requests("GET", "/cluster/resources") }
	g, err := c.LocateGuest(ctx, "db-01")
	if err != nil || g.Status != "stopped" {
		t.Fatalf("LocateGuest: %+v, %v; want db-01 stopped", g, err)
	}
	if _, err := c.Start(ctx, g); err != nil {
		t.Fatal(err)
	}
	before := reads()
	pctx := proxmox.WithProvisionalLocate(ctx)
	prov, err := c.LocateGuest(pctx, "db-01")
	if err != nil || prov.Status != "stopped" || reads() != before {
		t.Errorf("provisional LocateGuest: %+v, %v, %d reads; want db-01 as the newest read saw it (stopped), no read", prov, err, reads()-before)
	}
	if _, err := c.ResolveGuest(pctx, "web-01"); err == nil || reads() != before {
		t.Errorf("provisional ResolveGuest of a running VM: %v, %d reads; want an error, no request (its status read)", err, reads()-before)
	}
	fresh, err := c.LocateGuest(ctx, "db-01")
	if err != nil || fresh.Status != "running" || reads() != before+1 {
		t.Errorf("LocateGuest: %+v, %v, %d reads; want db-01 running, from one read", fresh, err, reads()-before)
	}
	if _, err := c.LocateGuest(pctx, "no-such-guest"); err == nil || errors.Is(err, proxmox.ErrVMNotFound) || reads() != before+1 {
		t.Errorf("provisional LocateGuest of a guest the newest read lacks: %v, %d reads; want an error that is not ErrVMNotFound, no request", err, reads()-before)
	}
}

// TestWatchDiffsCommandsReads pins that the watch reports guest changes from the reads of
// the guests the client's locates made, without reading them itself while those are fresh.
func TestWatchDiffsCommandsReads(t *testing.T) {
	t.Parallel()
	sim, c := guestSim(t, -1)
	ctx := testCtx(t)
	// the watch reads the guests itself only at its first round (its baseline); a hand task
	// started after the first round's report is reported by a later round, after that read
	sim.StartTask(simpve.HandTask{Node: "pve1", Type: "srvreload", Duration: time.Minute})
	l := runWatch(t, c, proxmox.WatchConfig{Busy: 10 * time.Millisecond, Idle: 10 * time.Millisecond, Resources: time.Hour})
	reported := func(n int) func([]proxmox.Task, []proxmox.GuestChange) bool {
		return func(ts []proxmox.Task, _ []proxmox.GuestChange) bool { return len(ts) >= n }
	}
	l.waitFor(t, "the first hand task", reported(1))
	sim.StartTask(simpve.HandTask{Node: "pve1", Type: "srvreload", Duration: time.Minute})
	l.waitFor(t, "the second hand task", reported(2))
	g := resolve(t, c, "db-01")
	if _, err := c.Start(ctx, g); err != nil {
		t.Fatal(err)
	}
	if _, err := c.LocateGuest(ctx, "db-01"); err != nil {
		t.Fatal(err)
	}
	l.waitFor(t, "db-01 started, from a locate's read", func(_ []proxmox.Task, gs []proxmox.GuestChange) bool {
		for _, x := range gs {
			if x.VMID == g.VMID && x.Change == proxmox.GuestStarted {
				return true
			}
		}
		return false
	})
	if n := sim.Requests("GET", "/cluster/resources"); n != 3 {
		t.Errorf("%d reads of /cluster/resources, want 3 (the watch's first, and the two locates')", n)
	}
}
