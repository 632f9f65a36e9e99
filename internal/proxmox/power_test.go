package proxmox_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// TestPower pins every power operation against the simulator's state machines: which PVE
// tasks run (by worker type, in order), the no-op rules, the sentinels for guests that are
// not running or are containers (refused without a write), task failures as *TaskError
// with PVE's exit status, WARNINGS as success, and the guest's state afterwards.
func TestPower(t *testing.T) {
	t.Parallel()
	type op func(c *proxmox.Client, g proxmox.Guest) (proxmox.TaskResult, error)
	start := func(c *proxmox.Client, g proxmox.Guest) (proxmox.TaskResult, error) { return c.Start(testCtx(t), g) }
	stop := func(force bool) op {
		return func(c *proxmox.Client, g proxmox.Guest) (proxmox.TaskResult, error) {
			return c.Stop(testCtx(t), g, force)
		}
	}
	reboot := func(force bool) op {
		return func(c *proxmox.Client, g proxmox.Guest) (proxmox.TaskResult, error) {
			return c.Reboot(testCtx(t), g, force)
		}
	}
	suspend := func(c *proxmox.Client, g proxmox.Guest) (proxmox.TaskResult, error) { return c.Suspend(testCtx(t), g) }
	resume := func(c *proxmox.Client, g proxmox.Guest) (proxmox.TaskResult, error) { return c.Resume(testCtx(t), g) }

	tests := []struct {
		name     string
		ref      string
		fault    string // FailTask exit status for the guest's next task
		op       op
		noop     bool
		tasks    []string // worker types run
		err      error    // sentinel
		exit     string   // *TaskError exit status
		apiMsg   string   // *APIError message prefix
		endState string
	}{
		{name: "start running vm", ref: "web-01", op: start, noop: true, endState: "running"},
		{name: "start stopped vm", ref: "db-01", op: start, tasks: []string{"qmstart"}, endState: "running"},
		{name: "start paused vm resumes", ref: "batch-01", op: start, tasks: []string{"qmresume"}, endState: "running"},
		{name: "start template", ref: "9000", op: start, tasks: []string{"qmstart"}, exit: "you can't start a vm if it's a template", endState: "stopped"},
		{name: "start stopped ct", ref: "ct-pve2", op: start, tasks: []string{"vzstart"}, endState: "running"},
		{name: "start running ct", ref: "ct-pve1", op: start, noop: true, endState: "running"},
		{name: "start task fails", ref: "db-01", fault: "start failed: QEMU exited with code 1", op: start, tasks: []string{"qmstart"}, exit: "start failed: QEMU exited with code 1", endState: "stopped"},
		{name: "start with warnings", ref: "db-01", fault: "WARNINGS: 2", op: start, tasks: []string{"qmstart"}, endState: "running"},
		{name: "stop stopped vm", ref: "db-01", op: stop(false), noop: true, endState: "stopped"},
		{name: "stop stopped ct", ref: "ct-pve2", op: stop(true), noop: true, endState: "stopped"},
		{name: "shutdown vm", ref: "web-01", op: stop(false), tasks: []string{"qmshutdown"}, endState: "stopped"},
		{name: "force stop vm", ref: "web-01", op: stop(true), tasks: []string{"qmstop"}, endState: "stopped"},
		{name: "shutdown ct", ref: "ct-pve1", op: stop(false), tasks: []string{"vzshutdown"}, endState: "stopped"},
		{name: "force stop ct", ref: "ct-pve1", op: stop(true), tasks: []string{"vzstop"}, endState: "stopped"},
		{name: "shutdown paused vm refused", ref: "batch-01", op: stop(false), apiMsg: "VM is paused - cannot shutdown", endState: "paused"},
		{name: "force stop paused vm", ref: "batch-01", op: stop(true), tasks: []string{"qmstop"}, endState: "stopped"},
		{name: "shutdown times out", ref: "web-01", fault: "VM quit/powerdown failed - got timeout", op: stop(false), tasks: []string{"qmshutdown"}, exit: "VM quit/powerdown failed - got timeout", endState: "running"},
		{name: "reboot vm", ref: "web-01", op: reboot(false), tasks: []string{"qmreboot"}, endState: "running"},
		{name: "force reboot vm resets", ref: "web-01", op: reboot(true), tasks: []string{"qmreset"}, endState: "running"},
		{name: "reboot ct", ref: "ct-pve3", op: reboot(false), tasks: []string{"vzreboot"}, endState: "running"},
		{name: "force reboot ct is stop+start", ref: "ct-pve3", op: reboot(true), tasks: []string{"vzstop", "vzstart"}, endState: "running"},
		{name: "force reboot ct stop fails", ref: "ct-pve3", fault: "command 'lxc-stop -n 202 --kill' failed: exit code 1", op: reboot(true), tasks: []string{"vzstop"}, exit: "command 'lxc-stop -n 202 --kill' failed: exit code 1", endState: "running"},
		{name: "reboot stopped vm", ref: "db-01", op: reboot(false), err: proxmox.ErrVMNotRunning, endState: "stopped"},
		{name: "force reboot stopped ct", ref: "ct-pve2", op: reboot(true), err: proxmox.ErrVMNotRunning, endState: "stopped"},
		{name: "force reboot paused vm", ref: "batch-01", op: reboot(true), tasks: []string{"qmreset"}, endState: "running"},
		{name: "suspend vm", ref: "web-01", op: suspend, tasks: []string{"qmsuspend"}, endState: "paused"},
		{name: "suspend paused vm", ref: "batch-01", op: suspend, noop: true, endState: "paused"},
		{name: "suspend stopped vm", ref: "db-01", op: suspend, err: proxmox.ErrVMNotRunning, endState: "stopped"},
		{name: "suspend ct", ref: "ct-pve1", op: suspend, err: proxmox.ErrUnsupportedForContainer, endState: "running"},
		{name: "resume paused vm", ref: "batch-01", op: resume, tasks: []string{"qmresume"}, endState: "running"},
		{name: "resume running vm", ref: "web-01", op: resume, noop: true, endState: "running"},
		{name: "resume running ct", ref: "ct-pve1", op: resume, noop: true, endState: "running"},
		{name: "resume stopped vm", ref: "db-01", op: resume, err: proxmox.ErrVMNotRunning, endState: "stopped"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sim, c := guestSim(t, -1)
			g := resolve(t, c, tt.ref)
			if tt.fault != "" {
				sim.FailTask(g.Node, g.VMID, tt.fault)
			}
			res, err := tt.op(c, g)
			var te *proxmox.TaskError
			var ae *proxmox.APIError
			switch {
			case tt.err != nil:
				if !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
			case tt.exit != "":
				if !errors.As(err, &te) || te.ExitStatus != tt.exit || te.Node != g.Node || len(res.UPIDs) == 0 || te.UPID != res.UPIDs[len(res.UPIDs)-1] {
					t.Fatalf("err = %v (res %+v), want *TaskError %q", err, res, tt.exit)
				}
			case tt.apiMsg != "":
				if !errors.As(err, &ae) || ae.Status != http.StatusInternalServerError || !strings.HasPrefix(ae.Message, tt.apiMsg) {
					t.Fatalf("err = %v, want 500 %q", err, tt.apiMsg)
				}
			default:
				if err != nil {
					t.Fatalf("err = %v", err)
				}
			}
			if res.NoOp != tt.noop {
				t.Errorf("NoOp = %v, want %v", res.NoOp, tt.noop)
			}
			if got := taskTypes(t, res.UPIDs); !slices.Equal(got, tt.tasks) && (len(got) != 0 || len(tt.tasks) != 0) {
				t.Errorf("tasks = %v, want %v", got, tt.tasks)
			}
			if len(tt.tasks) == 0 && tt.apiMsg == "" && writes(sim) != 0 {
				t.Errorf("%d writes sent, want none: %+v", writes(sim), sim.RequestLog())
			}
			st, _ := sim.Guest(g.VMID)
			if st.Status != tt.endState || st.Busy {
				t.Errorf("guest afterwards = %s (busy %v), want %s", st.Status, st.Busy, tt.endState)
			}
		})
	}
}

// TestPowerLocked pins that a task holds the guest's lock: WaitTask ends with the caller's
// context (the UPID is still returned), and a second power operation meanwhile is PVE's
// "can't lock file" refusal.
func TestPowerLocked(t *testing.T) {
	t.Parallel()
	_, c := guestSim(t, time.Hour) // never ends within the test
	g := resolve(t, c, "db-01")
	ctx, cancel := context.WithTimeout(testCtx(t), 100*time.Millisecond)
	defer cancel()
	var hooked []string
	ctx = proxmox.WithTaskStarted(ctx, func(node, upid string) { hooked = append(hooked, node+" "+upid) })
	res, err := c.Start(ctx, g)
	if !errors.Is(err, context.DeadlineExceeded) || len(res.UPIDs) != 1 {
		t.Fatalf("Start = %+v, %v; want the UPID and the deadline", res, err)
	}
	if len(hooked) != 1 || hooked[0] != "pve2 "+res.UPIDs[0] {
		t.Errorf("TaskStarted hook saw %v", hooked)
	}
	_, err = c.Start(testCtx(t), g)
	var ae *proxmox.APIError
	if !errors.As(err, &ae) || ae.Status != 500 || ae.Message != "can't lock file '/var/lock/qemu-server/lock-101.conf' - got timeout" {
		t.Errorf("second Start = %v, want PVE's lock timeout", err)
	}
}

// TestWaitTask pins the task poll: OK and WARNINGS are success, an unknown task is an
// error, and a task interrupted by a node reboot fails with its exit status.
func TestWaitTask(t *testing.T) {
	t.Parallel()
	sim, c := guestSim(t, -1)
	sim.FailTask("pve1", 100, "WARNINGS: 1")
	g := resolve(t, c, "web-01")
	res, err := c.Suspend(testCtx(t), g)
	if err != nil || len(res.UPIDs) != 1 {
		t.Fatalf("Suspend = %+v, %v", res, err)
	}
	if err := c.WaitTask(testCtx(t), "pve1", res.UPIDs[0]); err != nil {
		t.Errorf("WaitTask(WARNINGS) = %v, want success", err)
	}
	bogus := "UPID:pve1:0000ABCD:00123456:6745A0B1:qmstart:100:proxbus@pve!demo:"
	if err := c.WaitTask(testCtx(t), "pve1", bogus); !errors.Is(err, proxmox.ErrNotFound) {
		t.Errorf("WaitTask(unknown) = %v, want a not-found refusal", err)
	}
	if err := c.WaitTask(testCtx(t), "pve1", "nonsense"); err == nil || proxmox.IsTransient(err) {
		t.Errorf("WaitTask(malformed) = %v, want a permanent error", err)
	}
}

// TestRebootNode pins node.reboot: PVE answers null, the node is unreachable (595 through
// pveproxy) while it reboots, its guests are "unknown" in the resources, a task running on
// it ends unexpectedly, and it comes back with its guests stopped.
func TestRebootNode(t *testing.T) {
	t.Parallel()
	sim := simpve.New(simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: time.Hour, NodeRebootDuration: time.Hour})
	url, err := sim.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	c := newClient(t, endpoint(simpve.DemoTokenID, url), simpve.DemoSecret, proxmox.WithTaskPollInterval(time.Millisecond))
	app := resolve(t, c, "app-01")
	ctx, cancel := context.WithTimeout(testCtx(t), 50*time.Millisecond)
	defer cancel()
	res, _ := c.Suspend(ctx, app) // a task left running on pve3
	if len(res.UPIDs) != 1 {
		t.Fatalf("Suspend = %+v", res)
	}

	if err := c.RebootNode(testCtx(t), "pve3"); err != nil {
		t.Fatalf("RebootNode: %v", err)
	}
	log := sim.RequestLog()
	if last := log[len(log)-1]; last.Method != "POST" || last.Path != "/nodes/pve3/status" || last.Params.Get("command") != "reboot" || last.Status != 200 {
		t.Errorf("request = %+v", last)
	}
	if st, _ := sim.NodeStatus("pve3"); st != "offline" {
		t.Errorf("pve3 = %s, want offline", st)
	}
	g, err := c.ResolveGuest(testCtx(t), "app-01")
	if err != nil || g.Status != "unknown" {
		t.Errorf("app-01 while rebooting = %+v, %v; want status unknown", g, err)
	}
	_, err = c.Start(testCtx(t), app)
	var ae *proxmox.APIError
	if !errors.As(err, &ae) || ae.Status != 595 || !proxmox.IsTransient(err) {
		t.Errorf("Start on a rebooting node = %v, want 595", err)
	}
	if err := c.WaitTask(testCtx(t), "pve3", res.UPIDs[0]); err == nil {
		t.Error("WaitTask on an unreachable node succeeded")
	}
	if err := c.RebootNode(testCtx(t), "pve9"); err == nil {
		t.Error("RebootNode(pve9) succeeded")
	}

	sim.SetNodeRebootDuration(-1)
	if err := c.RebootNode(testCtx(t), "pve1"); err != nil {
		t.Fatalf("RebootNode(pve1): %v", err)
	}
	for _, ref := range []string{"web-01", "ct-pve1"} {
		if g := resolve(t, c, ref); g.Status != "stopped" {
			t.Errorf("%s after the reboot = %s, want stopped", ref, g.Status)
		}
	}
	var interrupted bool
	for _, tk := range sim.Tasks() {
		interrupted = interrupted || (tk.UPID == res.UPIDs[0] && !tk.Running && tk.ExitStatus == "unexpected status")
	}
	if !interrupted {
		t.Errorf("the task on pve3 was not interrupted: %+v", sim.Tasks())
	}
}

// TestPowerKnownStatus pins StartKnown and StopKnown: they decide from the guest's Status as
// given and send no status read; a status that is out of date still ends as PVE's answer
// says (a guest already running or already stopped is a NoOp).
func TestPowerKnownStatus(t *testing.T) {
	t.Parallel()
	start := func(c *proxmox.Client, g proxmox.Guest) (proxmox.TaskResult, error) {
		return c.StartKnown(testCtx(t), g)
	}
	stop := func(c *proxmox.Client, g proxmox.Guest) (proxmox.TaskResult, error) {
		return c.StopKnown(testCtx(t), g, true)
	}
	tests := []struct {
		name     string
		ref      string
		status   string // the Status the caller gives
		op       func(c *proxmox.Client, g proxmox.Guest) (proxmox.TaskResult, error)
		noop     bool
		tasks    []string
		endState string
	}{
		{name: "start a stopped vm", ref: "db-01", status: "stopped", op: start, tasks: []string{"qmstart"}, endState: "running"},
		{name: "start a vm known running", ref: "web-01", status: "running", op: start, noop: true, endState: "running"},
		{name: "start a paused vm resumes", ref: "batch-01", status: "paused", op: start, tasks: []string{"qmresume"}, endState: "running"},
		{name: "start a running vm said stopped", ref: "web-01", status: "stopped", op: start, noop: true, tasks: []string{"qmstart"}, endState: "running"},
		{name: "start a running ct said stopped", ref: "ct-pve1", status: "stopped", op: start, noop: true, endState: "running"},
		{name: "stop a running vm", ref: "web-01", status: "running", op: stop, tasks: []string{"qmstop"}, endState: "stopped"},
		{name: "stop a paused vm", ref: "batch-01", status: "paused", op: stop, tasks: []string{"qmstop"}, endState: "stopped"},
		{name: "stop a vm known stopped", ref: "db-01", status: "stopped", op: stop, noop: true, endState: "stopped"},
		{name: "stop a stopped ct said running", ref: "ct-pve2", status: "running", op: stop, noop: true, endState: "stopped"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sim, c := guestSim(t, -1)
			g, err := c.LocateGuest(testCtx(t), tt.ref)
			if err != nil {
				t.Fatal(err)
			}
			g.Status = tt.status
			before := len(sim.RequestLog())
			res, err := tt.op(c, g)
			if err != nil || res.NoOp != tt.noop {
				t.Fatalf("res %+v, err %v; want NoOp %v", res, err, tt.noop)
			}
			if got := taskTypes(t, res.UPIDs); !slices.Equal(got, tt.tasks) && (len(got) != 0 || len(tt.tasks) != 0) {
				t.Errorf("tasks = %v, want %v", got, tt.tasks)
			}
			for _, r := range sim.RequestLog()[before:] {
				if strings.HasSuffix(r.Path, "/status/current") {
					t.Errorf("a status read: %s %s", r.Method, r.Path)
				}
			}
			if st, _ := sim.Guest(g.VMID); st.Status != tt.endState {
				t.Errorf("guest afterwards = %s, want %s", st.Status, tt.endState)
			}
		})
	}
}
