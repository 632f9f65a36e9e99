package handlers

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
	"github.com/proxbus/proxbus/store"
)

// awaitStep waits until command id has published step with status, failing after a while.
func (c *collector) awaitStep(t *testing.T, id, step string, status events.StepStatus) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		for _, m := range c.msgs {
			var ev struct {
				Data events.Step `json:"data"`
			}
			if strings.HasSuffix(m.Subject, ".step") && json.Unmarshal(m.Data, &ev) == nil &&
				ev.Data.CommandID == id && ev.Data.Step == step && ev.Data.Status == status {
				c.mu.Unlock()
				return
			}
		}
		c.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s never published %s %s", id, step, status)
}

// TestCancelStartedCommand pins contract §4 "Cancel" for commands that have started: a
// vm.backup whose vzdump runs has its task stopped (DELETE /nodes/{node}/tasks/{upid}) by the
// replica running it, announced through the store, and answers 410 command_cancelled naming
// the canceller, the task and what Proxmox left, journaled; no backup is made. A started
// vm.start (no task that can be stopped) is 409 not_cancellable and finishes; the canceller
// is told so at once. Cancelling the cancelled command again says it already is.
func TestCancelStartedCommand(t *testing.T) {
	t.Parallel()
	e := backupEnv(t)
	ctx, done := e.startLongTask(t, "vm.backup", "to-cancel", `{"vm":100,"storage":"local"}`, "backup_vm")
	key := store.CommandKey{Source: "/test/vm.backup", ID: "to-cancel"}
	out, res := cancelUntilAnswered(t, e, key, done)
	checkCancelled(t, e, res)
	if o := out.Output.(CancelOutput); o.Cancelled != "stop_requested" || o.Verb != "vm.backup" {
		t.Errorf("cancel output %+v", o)
	}
	if again, _ := CancelCommand(ctx, e.p.cfg.Store, e.p.cfg.Registry, key, "carol", ""); again.Status != 200 || !strings.Contains(again.Detail, "already cancelled") {
		t.Errorf("cancelling the cancelled command again: %+v, want 200 saying it is already cancelled", again)
	}

	e.pve.SetTaskDuration(300 * time.Millisecond)
	go func() { done <- e.resultOf(t, "vm.start", "not-cancellable", `{"vm":101}`) }()
	e.pub.awaitStep(t, "not-cancellable", "start_vm", events.StepStarted)
	refused, err := CancelCommand(ctx, e.p.cfg.Store, e.p.cfg.Registry, store.CommandKey{Source: "/test/vm.start", ID: "not-cancellable"}, "carol", "")
	if err != nil || refused.Status != 409 || refused.Reason != ReasonNotCancellable || !strings.Contains(refused.Detail, "vm.start") {
		t.Errorf("cancelling a started vm.start: %+v, %v; want 409 %s naming the verb", refused, err, ReasonNotCancellable)
	}
	if started := <-done; started.Status != 200 {
		t.Errorf("the vm.start answered %d %s, want it finished", started.Status, started.Reason)
	}
}

// startLongTask runs the guard watch for the test's life and starts command id of verb with
// tasks that run a minute, returning once its write step has started: the watch's context
// and the channel its result comes on.
func (e *rtEnv) startLongTask(t *testing.T, verb, id, data, step string) (context.Context, chan events.Result) {
	t.Helper()
	e.pve.SetTaskDuration(time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { e.p.WatchGuards(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	done := make(chan events.Result, 1)
	go func() { done <- e.resultOf(t, verb, id, data) }()
	e.pub.awaitStep(t, id, step, events.StepStarted)
	return ctx, done
}

// cancelUntilAnswered cancels key until the command answers on done (WatchGuards subscribes
// asynchronously, so the first announcement may come before it listens) and returns the
// canceller's answer and the command's result.
func cancelUntilAnswered(t *testing.T, e *rtEnv, key store.CommandKey, done <-chan events.Result) (Outcome, events.Result) {
	t.Helper()
	var first *Outcome
	for range 200 {
		out, err := CancelCommand(context.Background(), e.p.cfg.Store, e.p.cfg.Registry, key, "carol", "wrong storage")
		switch {
		case err == nil && first != nil && out.Status == 409 && out.Reason == ReasonNotCancellable:
			// asked before, and finished since (its result may still be on its way)
			select {
			case res := <-done:
				return *first, res
			case <-time.After(10 * time.Second):
				t.Fatal("the cancelled command finished without a result")
			}
		case err != nil || out.Status != 200:
			t.Fatalf("cancel: %+v, %v", out, err)
		case first == nil:
			first = &out
		}
		select {
		case res := <-done:
			return *first, res
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatal("the command was not cancelled")
	return Outcome{}, events.Result{}
}

// checkCancelled checks the result of the cancelled backup and what it left.
func checkCancelled(t *testing.T, e *rtEnv, res events.Result) {
	t.Helper()
	if res.Status != 410 || res.Reason != ReasonCommandCancelled || !res.Finalized() {
		t.Fatalf("result %d %s %s (%s), want 410 %s journaled", res.Status, res.Result, res.Reason, res.Detail, ReasonCommandCancelled)
	}
	for _, want := range []string{"cancelled by carol (wrong storage)", "backup_vm task UPID:pve1:", "interrupted by signal", "vzdump removes"} {
		if !strings.Contains(res.Detail, want) {
			t.Errorf("detail %q does not say %q", res.Detail, want)
		}
	}
	stops := 0
	for _, r := range e.pve.RequestLog() {
		if r.Method == "DELETE" && r.Route == "/nodes/{node}/tasks/{upid}" {
			stops++
		}
	}
	if stops != 1 {
		t.Errorf("task stops = %d, want 1", stops)
	}
	cl, _ := e.p.cfg.Proxmox.Get(1)
	backups, err := cl.GuestBackups(context.Background(), "pve1", "local", 100)
	backups = slices.DeleteFunc(backups, func(b proxmox.BackupVolume) bool { return b.VolID == simpve.DemoBackupWeb }) // the demo cluster's own
	if err != nil || len(backups) != 0 {
		t.Errorf("backups of 100 after the cancellation: %+v, %v; want none but the demo's", backups, err)
	}
}

// TestCommandCancelVerb pins command.cancel as a command on the bus: before its target
// started, 200 ok (cancelled before_start) and the target, delivered later, answers 410
// command_cancelled on that first delivery, writes nothing and asks nobody's approval; a
// target that finished is 409 not_cancellable.
func TestCommandCancelVerb(t *testing.T) {
	t.Parallel()
	l, sc := newApprovalLifecycle(t) // a cancelled command is answered before it asks for approval
	target := testCommand("cancel-me")
	if res := l.decide(t, "command.cancel", "cancel-1", "carol", target); res.Status != 200 || !strings.Contains(string(res.Output), `"before_start"`) {
		t.Fatalf("cancel before start: %+v", res)
	}
	if d := l.deliver(target, 1); d.Action != events.Ack {
		t.Fatalf("the cancelled command: %+v, want ack", d)
	}
	wantOnlyResult(t, l, sc, target, 410, ReasonCommandCancelled)
	if pending, _ := l.store.PendingApprovals(context.Background()); len(pending) != 0 {
		t.Errorf("pending %+v: a cancelled command asked for approval", pending)
	}

	l2 := newLifecycle(t, okScript())
	done := testCommand("finished")
	if d := l2.deliver(done, 1); d.Action != events.Ack {
		t.Fatalf("the finished command: %+v", d)
	}
	if res := l2.decide(t, "command.cancel", "cancel-2", "carol", done); res.Status != 409 || res.Reason != ReasonNotCancellable {
		t.Errorf("cancel of a finished command: %d %s, want 409 %s", res.Status, res.Reason, ReasonNotCancellable)
	}
}

// TestCancelWhileConfirming: a vm.backup whose vzdump answer was lost waits, confirming, for
// the task it may have started; a cancellation stops that task too, and the command answers
// 410 command_cancelled, with no second vzdump and no backup.
func TestCancelWhileConfirming(t *testing.T) {
	t.Parallel()
	e := backupEnv(t)
	e.pve.SetTaskDuration(time.Minute)
	e.pve.DropAnswerAfterApply("POST", "/nodes/pve1/vzdump", 1)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { e.p.WatchGuards(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	done := make(chan events.Result, 1)
	go func() { done <- e.resultOf(t, "vm.backup", "confirming", `{"vm":100,"storage":"local"}`) }()
	e.pub.awaitStep(t, "confirming", "confirm", events.StepRunning)
	_, res := cancelUntilAnswered(t, e, store.CommandKey{Source: "/test/vm.backup", ID: "confirming"}, done)
	checkCancelled(t, e, res)
	if n := vzdumps(e, "pve1"); n != 1 {
		t.Errorf("vzdumps = %d, want 1", n)
	}
}
