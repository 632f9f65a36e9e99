package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
	"github.com/proxbus/proxbus/store"
)

// simCall sends one request to the simulator as another Proxmox user would (the GUI, a second
// proxbus), and fails the test unless it is answered 200.
func simCall(t *testing.T, sim *simpve.Server, method, path string, form url.Values) {
	t.Helper()
	req := httptest.NewRequest(method, "/api2/json"+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "PVEAPIToken="+simpve.DemoTokenID+"="+simpve.DemoSecret)
	rec := httptest.NewRecorder()
	sim.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
	}
}

// TestActsWhereTheGuestIsNow pins that a command acts on its guest where the guest is when it
// acts, not where it was located: between the command's locate (GET /cluster/resources) and its
// dispatch, the guest is migrated away (as a command queued ahead of it, or the GUI, would). The
// command follows it to its new node and succeeds there; a guest deleted meanwhile is answered
// 404 vm_not_found as it is now. Without the second look the first two answered 404
// vm_not_found for a guest that exists.
func TestActsWhereTheGuestIsNow(t *testing.T) {
	t.Parallel()
	migrate := func(sim *simpve.Server) {
		simCall(t, sim, "POST", "/nodes/pve3/qemu/102/migrate", url.Values{"target": {"pve1"}, "online": {"1"}})
	}
	remove := func(sim *simpve.Server) {
		simCall(t, sim, "DELETE", "/nodes/pve2/lxc/201", nil)
	}
	tests := []struct {
		name, verb, data string
		meanwhile        func(*simpve.Server)
		status           int
		result, reason   string
		check            func(t *testing.T, sim *simpve.Server)
	}{
		{name: "snapshot of a guest migrated away", verb: "vm.snapshot.create", data: `{"vm":"app-01","snapshot":"aftermove"}`,
			meanwhile: migrate, status: 201, result: ResultCreated,
			check: func(t *testing.T, sim *simpve.Server) {
				g, _ := sim.Guest(102)
				if _, ok := g.Snapshots["aftermove"]; !ok || g.Node != "pve1" {
					t.Errorf("guest 102 on %s with snapshots %v, want aftermove on pve1", g.Node, g.Snapshots)
				}
			}},
		{name: "migration of a guest migrated away", verb: "vm.migrate", data: `{"vm":102,"target_node":"pve2"}`,
			meanwhile: migrate, status: 200, result: ResultOK,
			check: func(t *testing.T, sim *simpve.Server) {
				if g, _ := sim.Guest(102); g.Node != "pve2" {
					t.Errorf("guest 102 on %s, want pve2", g.Node)
				}
			}},
		{name: "snapshot of a guest deleted meanwhile", verb: "vm.snapshot.create", data: `{"vm":201,"snapshot":"gone"}`,
			meanwhile: remove, status: 404, result: ResultRefused, reason: ReasonVMNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newRTEnv(t)
			var once sync.Once
			e.pveLog.after = func(line string) {
				if strings.HasPrefix(line, "GET /api2/json/cluster/resources") {
					once.Do(func() { tc.meanwhile(e.pve) })
				}
			}
			res := e.resultOf(t, tc.verb, "moved-"+strings.ReplaceAll(tc.name, " ", "-"), tc.data)
			if res.Status != tc.status || res.Result != tc.result || res.Reason != tc.reason {
				t.Fatalf("result %d %s %s (%s), want %d %s %s", res.Status, res.Result, res.Reason, res.Detail, tc.status, tc.result, tc.reason)
			}
			if tc.check != nil {
				tc.check(t, e.pve)
			}
		})
	}
}

// TestWaitedCommandLocatesAgain pins contract §4's "after any wait, read again what you act
// on": a vm.backup of guest 102 waits in the wait room while another command holds the guest;
// meanwhile the guest is migrated from pve3 to pve1; once the guest is given back, the backup
// locates it again and backs it up on pve1. Without the second look its vzdump was sent to
// pve3, which no longer has the guest, and it answered 502 proxmox_write_unconfirmed.
func TestWaitedCommandLocatesAgain(t *testing.T) {
	t.Parallel()
	e := newRTEnv(t)
	ctx := context.Background()
	held := e.holdGuest(t, 102)
	done := make(chan events.Result, 1)
	go func() { done <- e.resultOf(t, "vm.backup", "waited-backup", `{"vm":102,"storage":"local"}`) }()
	for !e.pub.waiting("waited-backup") {
		select {
		case res := <-done:
			t.Fatalf("answered without waiting: %+v", res)
		case <-time.After(5 * time.Millisecond):
		}
	}
	simCall(t, e.pve, "POST", "/nodes/pve3/qemu/102/migrate", url.Values{"target": {"pve1"}, "online": {"1"}})
	if err := e.p.cfg.Store.Release(ctx, held.Lease); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.Status != 201 || res.Result != ResultCreated {
		t.Fatalf("result %d %s %s (%s), want 201 created", res.Status, res.Result, res.Reason, res.Detail)
	}
	var out backupOutput
	if err := json.Unmarshal(res.Output, &out); err != nil || !strings.HasPrefix(out.UPID, "UPID:pve1:") {
		t.Errorf("output %s (%v), want a vzdump task on pve1", res.Output, err)
	}
}

// TestPlanActsWhereTheGuestIsNow pins that a dry run (and so the preflight of a command that
// needs approval, which runs the same plan) follows a guest migrated away between its locate and
// its reads: the plan is made on the guest's new node. Without it a dry run of a snapshot of
// VM 102 planned 404 vm_not_found, and an approval command was refused vm_not_found by its
// preflight (the soak's seed 3: a vm.snapshot.delete queued behind a migration).
func TestPlanActsWhereTheGuestIsNow(t *testing.T) {
	t.Parallel()
	e := newRTEnv(t)
	var once sync.Once
	e.pveLog.after = func(line string) {
		if strings.HasPrefix(line, "GET /api2/json/cluster/resources") {
			once.Do(func() {
				simCall(t, e.pve, "POST", "/nodes/pve3/qemu/102/migrate", url.Values{"target": {"pve1"}, "online": {"1"}})
			})
		}
	}
	cmd := events.Command{ID: "plan-moved", Source: "/test/plan", Type: events.TypePrefix + "vm.snapshot.create", Verb: "vm.snapshot.create",
		EndpointID: 1, HasEndpointID: true, DryRun: true, Data: json.RawMessage(`{"vm":102,"snapshot":"planned"}`)}
	if d := e.p.Handle(context.Background(), cmd, events.Delivery{Number: 1, Stored: time.Now()}); d.Action != events.Ack {
		t.Fatalf("decision %+v, want done", d)
	}
	res := e.pub.result(t, cmd.ID)
	var out PlanOutput
	if err := json.Unmarshal(res.Output, &out); err != nil || res.Status != 200 || res.Result != ResultPlanned {
		t.Fatalf("result %d %s %s (%s): %v", res.Status, res.Result, res.Reason, res.Output, err)
	}
	if o := out.Plan.Outcome; o == nil || o.Status != 201 || len(out.Plan.Writes) != 1 || !strings.HasPrefix(out.Plan.Writes[0].Path, "/nodes/pve1/") {
		t.Errorf("plan %+v (outcome %+v), want 201 created with its write on pve1", out.Plan, out.Plan.Outcome)
	}
}

// TestLocatedOnceWhenWaited pins the provisional first locate: a write command is located at
// its first delivery from the client's newest read of the guests (here one that is out of
// date: guest 102 was migrated from pve3 to pve1 after it), waits while another command
// holds its guest, and is located again once claimed, from a read of its own: it makes one
// read of /cluster/resources, not two, and acts on the guest where it is now. Without the
// provisional locate it read them twice.
func TestLocatedOnceWhenWaited(t *testing.T) {
	t.Parallel()
	e := newRTEnv(t)
	ctx := context.Background()

	// a first command reads the guests: the client's newest read
	if res := e.resultOf(t, "vm.snapshot.create", "primer", `{"vm":"web-01","snapshot":"primer"}`); res.Status != 201 {
		t.Fatalf("primer: %d %s (%s)", res.Status, res.Reason, res.Detail)
	}
	simCall(t, e.pve, "POST", "/nodes/pve3/qemu/102/migrate", url.Values{"target": {"pve1"}, "online": {"1"}})
	held := e.holdGuest(t, 102)
	before := e.pve.Requests("GET", "/cluster/resources")
	done := make(chan events.Result, 1)
	go func() {
		done <- e.resultOf(t, "vm.snapshot.create", "located-once", `{"vm":"app-01","snapshot":"once"}`)
	}()
	for !e.pub.waiting("located-once") {
		select {
		case res := <-done:
			t.Fatalf("answered without waiting: %+v", res)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := e.p.cfg.Store.Release(ctx, held.Lease); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.Status != 201 || res.Result != ResultCreated {
		t.Fatalf("result %d %s %s (%s), want 201 created", res.Status, res.Result, res.Reason, res.Detail)
	}
	if g, _ := e.pve.Guest(102); g.Node != "pve1" {
		t.Errorf("guest 102 on %s, want pve1", g.Node)
	} else if _, ok := g.Snapshots["once"]; !ok {
		t.Errorf("guest 102 on %s with snapshots %v, want the snapshot on pve1", g.Node, g.Snapshots)
	}
	if n := e.pve.Requests("GET", "/cluster/resources") - before; n != 1 {
		t.Errorf("%d reads of /cluster/resources by the waited command, want 1", n)
	}
}

// TestProvisionalLocateOfAnotherGuest pins that a command never acts on a guest whose guard it
// does not hold: it is located by name from the newest read (app-01 is guest 102 there), but
// meanwhile 102 was renamed and a new guest 150 took the name. Located again once claimed, it
// finds 150; it gives its claim back and claims afresh at its next delivery, and snapshots 150.
// Without the check it snapshotted 150 holding the guard of 102.
func TestProvisionalLocateOfAnotherGuest(t *testing.T) {
	t.Parallel()
	e := newRTEnv(t)
	if res := e.resultOf(t, "vm.snapshot.create", "primer", `{"vm":"web-01","snapshot":"primer"}`); res.Status != 201 {
		t.Fatalf("primer: %d %s (%s)", res.Status, res.Reason, res.Detail)
	}
	e.pve.AddGuest(simpve.GuestSpec{VMID: 102, Node: "pve3", Name: "app-old", Status: "running"})
	e.pve.AddGuest(simpve.GuestSpec{VMID: 150, Node: "pve1", Name: "app-01"})
	// at the snapshot's POST, the guard of guest 150 must be held (by the command)
	var unguarded atomic.Int32
	e.pveLog.after = func(line string) {
		if !strings.HasPrefix(line, "POST /api2/json/nodes/pve1/qemu/150/snapshot") {
			return
		}
		key := store.GuestResource(1, 150)
		c, err := e.p.cfg.Store.Claim(context.Background(), store.ClaimRequest{Command: store.CommandKey{Source: "/other", ID: "probe"},
			Owner: "other/probe", Guards: store.Guards{Resource: &key}})
		if err == nil && c.State == store.Claimed {
			unguarded.Add(1)
			_ = e.p.cfg.Store.Release(context.Background(), c.Lease)
		}
	}
	cmd := events.Command{ID: "another-guest", Source: "/test/relocate", Type: events.TypePrefix + "vm.snapshot.create", Verb: "vm.snapshot.create",
		EndpointID: 1, HasEndpointID: true, Data: json.RawMessage(`{"vm":"app-01","snapshot":"renamed"}`)}
	arrived := time.Now()
	if d := e.p.Handle(context.Background(), cmd, events.Delivery{Number: 1, Stored: arrived}); d.Action != events.Redeliver {
		t.Fatalf("first delivery: decision %+v, want redeliver (claim afresh)", d)
	}
	if d := e.p.Handle(context.Background(), cmd, events.Delivery{Number: 2, Stored: arrived}); d.Action != events.Ack {
		t.Fatalf("second delivery: decision %+v, want done", d)
	}
	res := e.pub.result(t, "another-guest")
	if res.Status != 201 || res.Result != ResultCreated {
		t.Fatalf("result %d %s %s (%s), want 201 created", res.Status, res.Result, res.Reason, res.Detail)
	}
	if g, _ := e.pve.Guest(150); len(g.Snapshots) == 0 {
		t.Errorf("guest 150 has snapshots %v, want renamed", g.Snapshots)
	}
	if n := unguarded.Load(); n != 0 {
		t.Errorf("guest 150 was snapshotted without its guard held (%d times)", n)
	}
}

// holdGuest runs e's WatchGuards until the test ends and claims guest vmid's guard as another
// command would; it returns the holder's claim.
func (e *rtEnv) holdGuest(t *testing.T, vmid int) store.Claim {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { e.p.WatchGuards(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	key := store.GuestResource(1, vmid)
	held, err := e.p.cfg.Store.Claim(ctx, store.ClaimRequest{Command: store.CommandKey{Source: "/other", ID: "holder"},
		Owner: "other/holder", Guards: store.Guards{Resource: &key}})
	if err != nil || held.State != store.Claimed {
		t.Fatalf("holder: %v %v", held.State, err)
	}
	return held
}
