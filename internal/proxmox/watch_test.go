package proxmox_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// watchLog collects what a watch reports.
type watchLog struct {
	mu     sync.Mutex
	tasks  []proxmox.Task
	guests []proxmox.GuestChange
	news   chan struct{}
}

func (l *watchLog) task(t proxmox.Task) {
	l.mu.Lock()
	l.tasks = append(l.tasks, t)
	l.mu.Unlock()
	l.poke()
}

func (l *watchLog) guest(g proxmox.GuestChange) {
	l.mu.Lock()
	l.guests = append(l.guests, g)
	l.mu.Unlock()
	l.poke()
}

func (l *watchLog) poke() {
	select {
	case l.news <- struct{}{}:
	default:
	}
}

// waitFor waits until cond holds of what was reported (checked after each report).
func (l *watchLog) waitFor(t *testing.T, what string, cond func(tasks []proxmox.Task, guests []proxmox.GuestChange) bool) {
	t.Helper()
	ctx := testCtx(t)
	for {
		l.mu.Lock()
		ok := cond(l.tasks, l.guests)
		l.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-l.news:
		case <-ctx.Done():
			l.mu.Lock()
			defer l.mu.Unlock()
			t.Fatalf("%s never reported (%d tasks, %d guest changes reported)", what, len(l.tasks), len(l.guests))
		}
	}
}

// runWatch runs c's watch until the test ends, reporting into a fresh log.
func runWatch(t *testing.T, c *proxmox.Client, cfg proxmox.WatchConfig) *watchLog {
	t.Helper()
	l := &watchLog{news: make(chan struct{}, 1)}
	cfg.OnTask, cfg.OnGuest = l.task, l.guest
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Watch(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Watch: %v, want context.Canceled", err)
		}
	})
	return l
}

// TestWatchWakesWaiters pins the watch: commands waiting for their tasks are woken by it, a
// failed task's exit status comes back as a TaskError, and no task's status is polled.
func TestWatchWakesWaiters(t *testing.T) {
	t.Parallel()
	sim, c := guestSim(t, 150*time.Millisecond)
	runWatch(t, c, proxmox.WatchConfig{Busy: 20 * time.Millisecond, Idle: 50 * time.Millisecond})
	ctx := testCtx(t)
	sim.FailTask("pve1", simpve.DemoWebVMID, "VM 100 qmp command 'stop' failed")
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, ref := range []string{"web-01", "db-01", "app-01"} {
		wg.Go(func() {
			g := resolve(t, c, ref)
			if g.Status == "running" {
				_, errs[i] = c.Stop(ctx, g, true)
			} else {
				_, errs[i] = c.Start(ctx, g)
			}
		})
	}
	wg.Wait()
	var te *proxmox.TaskError
	if !errors.As(errs[0], &te) || te.ExitStatus != "VM 100 qmp command 'stop' failed" {
		t.Errorf("web-01: %v, want the task's error", errs[0])
	}
	for i, err := range errs[1:] {
		if err != nil {
			t.Errorf("guest %d: %v", i+1, err)
		}
	}
	for _, st := range sim.TaskStats() {
		if st.StatusPolls != 0 {
			t.Errorf("task %s: %d status polls, want none", st.UPID, st.StatusPolls)
		}
	}
	if err := c.Watch(ctx, proxmox.WatchConfig{}); !errors.Is(err, proxmox.ErrWatching) {
		t.Errorf("a second Watch: %v, want ErrWatching", err)
	}
}

// TestWatchReportsTasks pins the task events: a task started by hand (as in the GUI) is
// reported at its start and its end, not as proxbus's; a task of the client's own token is
// proxbus's and carries the id of the command that waited for it.
func TestWatchReportsTasks(t *testing.T) {
	t.Parallel()
	sim, c := guestSim(t, 100*time.Millisecond)
	l := runWatch(t, c, proxmox.WatchConfig{Busy: 20 * time.Millisecond, Idle: 20 * time.Millisecond})
	hand := sim.StartTask(simpve.HandTask{Node: "pve2", Type: "vzdump", VMID: simpve.DemoDBVMID, User: "alice@pve", Exit: "job errors"})
	ctx := proxmox.WithCommandID(testCtx(t), "cmd-1")
	res, err := c.Start(ctx, resolve(t, c, "db-01"))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	find := func(tasks []proxmox.Task, upid string, running bool) (proxmox.Task, bool) {
		for _, x := range tasks {
			if x.UPID == upid && x.Running == running {
				return x, true
			}
		}
		return proxmox.Task{}, false
	}
	l.waitFor(t, "both tasks' ends", func(tasks []proxmox.Task, _ []proxmox.GuestChange) bool {
		_, a := find(tasks, hand, false)
		_, b := find(tasks, res.UPIDs[0], false)
		return a && b
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, tc := range []struct {
		upid, user, exit, cmd string
		ours                  bool
	}{
		{hand, "alice@pve", "job errors", "", false},
		{res.UPIDs[0], simpve.DemoTokenID, "OK", "cmd-1", true},
	} {
		start, ok1 := find(l.tasks, tc.upid, true)
		end, _ := find(l.tasks, tc.upid, false)
		if !ok1 {
			t.Errorf("%s: no start reported", tc.upid)
		}
		for _, x := range []proxmox.Task{start, end} {
			if x.User != tc.user || x.ByProxbus != tc.ours || x.CommandID != tc.cmd {
				t.Errorf("%s: user %q, by proxbus %v, command %q; want %q, %v, %q", tc.upid, x.User, x.ByProxbus, x.CommandID, tc.user, tc.ours, tc.cmd)
			}
		}
		if end.ExitStatus != tc.exit || end.EndTime.IsZero() {
			t.Errorf("%s: end %q at %v, want %q", tc.upid, end.ExitStatus, end.EndTime, tc.exit)
		}
	}
}

// TestWatchReadsIndexForLostEnds pins the fallback: when more tasks end between two rounds
// than a node's active list keeps (25), the ends the list dropped are read from the node's
// task index, so every waiter is still woken.
func TestWatchReadsIndexForLostEnds(t *testing.T) {
	t.Parallel()
	sim, c := guestSim(t, 50*time.Millisecond)
	l := runWatch(t, c, proxmox.WatchConfig{Busy: 300 * time.Millisecond, Idle: 300 * time.Millisecond})
	var upids []string
	for range 40 {
		upids = append(upids, sim.StartTask(simpve.HandTask{Node: "pve3", Type: "qmigrate", Duration: time.Second}))
	}
	ctx := testCtx(t)
	var wg sync.WaitGroup
	for _, u := range upids {
		wg.Go(func() {
			if err := c.WaitTask(ctx, "pve3", u); err != nil {
				t.Errorf("WaitTask %s: %v", u, err)
			}
		})
	}
	wg.Wait()
	l.waitFor(t, "40 ends", func(tasks []proxmox.Task, _ []proxmox.GuestChange) bool {
		n := 0
		for _, x := range tasks {
			if !x.Running {
				n++
			}
		}
		return n == 40
	})
}

// TestWatchReportsGuestChanges pins the guest events from the resources' diff and from
// pause and resume tasks.
func TestWatchReportsGuestChanges(t *testing.T) {
	t.Parallel()
	sim, c := guestSim(t, -1)
	// the watch's first read of the guests is its baseline: a task started by hand after the
	// first round's report is reported by a later round, after that read
	first := sim.StartTask(simpve.HandTask{Node: "pve1", Type: "srvreload", Duration: time.Minute})
	l := runWatch(t, c, proxmox.WatchConfig{Busy: 10 * time.Millisecond, Idle: 10 * time.Millisecond, Resources: 10 * time.Millisecond})
	ctx := testCtx(t)
	reported := func(upid string) func([]proxmox.Task, []proxmox.GuestChange) bool {
		return func(ts []proxmox.Task, _ []proxmox.GuestChange) bool {
			for _, x := range ts {
				if x.UPID == upid {
					return true
				}
			}
			return false
		}
	}
	l.waitFor(t, "the first hand task", reported(first))
	l.waitFor(t, "the second hand task", reported(sim.StartTask(simpve.HandTask{Node: "pve1", Type: "srvreload", Duration: time.Minute})))
	if _, err := c.Start(ctx, resolve(t, c, "db-01")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Suspend(ctx, resolve(t, c, "web-01")); err != nil {
		t.Fatal(err)
	}
	l.waitFor(t, "db-01 started, web-01 paused", func(_ []proxmox.Task, gs []proxmox.GuestChange) bool {
		var started, paused bool
		for _, g := range gs {
			started = started || g.VMID == simpve.DemoDBVMID && g.Change == proxmox.GuestStarted && g.Name == "db-01"
			paused = paused || g.VMID == simpve.DemoWebVMID && g.Change == proxmox.GuestPaused && g.UPID != ""
		}
		return started && paused
	})
}

// TestTaskEndedWakes pins the sharing of watches between replicas: a task end another
// replica's watch saw (TaskEnded) wakes this replica's waiter although its own watch has not
// looked again, and a failed end comes back as the task's error.
func TestTaskEndedWakes(t *testing.T) {
	t.Parallel()
	sim, c := guestSim(t, time.Hour)
	first := sim.StartTask(simpve.HandTask{Node: "pve1", Type: "srvreload"})
	l := runWatch(t, c, proxmox.WatchConfig{Busy: time.Hour, Idle: time.Hour, Resources: -1})
	l.waitFor(t, "the watch's first round", func(ts []proxmox.Task, _ []proxmox.GuestChange) bool { return len(ts) > 0 && ts[0].UPID == first })
	for _, tc := range []struct {
		exit string
		ok   bool
	}{{"OK", true}, {"migration aborted", false}} {
		upid := sim.StartTask(simpve.HandTask{Node: "pve2", Type: "qmigrate"})
		done := make(chan error, 1)
		go func() { done <- c.WaitTask(testCtx(t), "pve2", upid) }()
		// the wait is registered once the watch holds it: TaskEnded before that would be lost,
		// so it is repeated until the waiter returns
		for woken := false; !woken; {
			c.TaskEnded(proxmox.Task{UPID: upid, Node: "pve2", ExitStatus: tc.exit})
			select {
			case err := <-done:
				woken = true
				if (err == nil) != tc.ok {
					t.Errorf("exit %q: WaitTask = %v", tc.exit, err)
				}
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}
