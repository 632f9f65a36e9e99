package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/store"
)

// ReasonNotCancellable (409): command.cancel of a command that has started and whose verb has
// no Proxmox task that can be stopped, or that has finished: it is finished, not cancelled.
const ReasonNotCancellable = "not_cancellable"

// CancelOutput is the output of command.cancel: the command, and whether it was cancelled
// before it started or its replica was asked to stop its Proxmox task.
type CancelOutput struct {
	CommandID     string `json:"command_id"`
	CommandSource string `json:"command_source"`
	// Verb is the cancelled command's verb, when known.
	Verb string `json:"verb,omitempty"`
	// Cancelled is "before_start" (answered 410 command_cancelled, nothing done) or
	// "stop_requested" (the replica running it stops its Proxmox task; its own result says
	// what was stopped).
	Cancelled string `json:"cancelled"`
}

// CommandCancel cancels a command (contract §4 "Cancel", §9): one that has not started is
// answered 410 command_cancelled and does nothing; one that has started and whose verb can
// stop its Proxmox task (vm.backup, vm.migrate, a vm.provision disk move or image download)
// has it stopped by the replica running it, which answers 410 command_cancelled saying what
// was stopped and what Proxmox left; any other started or finished command is 409
// not_cancellable. The canceller is the command's actor.
func CommandCancel() Verb {
	return Spec[DecisionInput]{
		Name:     "command.cancel",
		Access:   Control,
		Decode:   decodeDecision,
		Resource: func(in DecisionInput) string { return in.CommandSource + " " + in.CommandID },
		Dispatch: func(ctx context.Context, x *Exec, in DecisionInput) (Outcome, error) {
			target := store.CommandKey{Source: in.CommandSource, ID: in.CommandID}
			return CancelCommand(ctx, x.r.p.cfg.Store, x.r.p.cfg.Registry, target, x.r.actor(), in.Reason)
		},
	}
}

// CancelCommand cancels command target for by, with reason (see [CommandCancel]) and returns
// the canceller's answer: 200 ok with a [CancelOutput], or 409 not_cancellable. An unreachable
// store is an error.
func CancelCommand(ctx context.Context, st *store.Store, reg *Registry, target store.CommandKey, by, reason string) (Outcome, error) {
	output := CancelOutput{CommandID: target.ID, CommandSource: target.Source}
	who := "cancelled by " + by
	if reason != "" {
		who += " (" + reason + ")"
	}
	r := &run{cmd: events.Command{ID: target.ID, Source: target.Source}}
	raw, _, err := r.record(Outcome{Status: 410, Result: ResultRefused, Reason: ReasonCommandCancelled,
		Detail: who + " before it started; nothing was done"}, noJournal)
	if err != nil {
		return Outcome{}, err
	}
	state, stored, err := st.FinishUnstarted(ctx, target, raw)
	if err != nil {
		return Outcome{}, errors.Join(errTransient, err)
	}
	switch state {
	case store.Absent:
		if err := st.DropApproval(ctx, target); err != nil {
			return Outcome{}, errors.Join(errTransient, err)
		}
		output.Cancelled = "before_start"
		return Outcome{Status: 200, Result: ResultOK, Output: output,
			Detail: "it had not started: whichever replica takes it answers 410 command_cancelled and does nothing"}, nil
	case store.Finished:
		var rec record
		_ = json.Unmarshal(stored, &rec)
		if rec.Result.Reason == ReasonCommandCancelled {
			output.Cancelled = "before_start"
			return Outcome{Status: 200, Result: ResultOK, Output: output, Detail: "it was already cancelled"}, nil
		}
		return Outcome{Status: 409, Result: ResultRefused, Reason: ReasonNotCancellable, Output: output,
			Detail: fmt.Sprintf("it has finished: %d %s", rec.Result.Status, strings.TrimSpace(rec.Result.Result+" "+rec.Result.Reason))}, nil
	}
	rec, err := st.Inspect(ctx, target)
	if err != nil {
		return Outcome{}, errors.Join(errTransient, err)
	}
	output.Verb = rec.Verb
	var steps []string
	if v, ok := reg.Lookup(rec.Verb); ok {
		for step := range v.VerbCancellable() {
			steps = append(steps, step)
		}
	}
	if len(steps) == 0 {
		return Outcome{Status: 409, Result: ResultRefused, Reason: ReasonNotCancellable, Output: output,
			Detail: "it has started, and " + cmpVerb(rec.Verb) + " has no Proxmox task that can be stopped: it is finished, not cancelled"}, nil
	}
	if _, err := st.RequestCancel(ctx, target, store.CancelRequest{By: by, Reason: reason}); errors.Is(err, store.ErrNotFound) {
		return Outcome{Status: 409, Result: ResultRefused, Reason: ReasonNotCancellable, Output: output, Detail: "it has just finished"}, nil
	} else if err != nil {
		return Outcome{}, errors.Join(errTransient, err)
	}
	sort.Strings(steps)
	output.Cancelled = "stop_requested"
	return Outcome{Status: 200, Result: ResultOK, Output: output,
		Detail: "it has started: the replica running it stops its Proxmox task (" + strings.Join(steps, ", ") +
			") and answers 410 command_cancelled saying what Proxmox left; a step that cannot be stopped is finished first, " +
			"and a command that ends before it reaches one answers as it ends"}, nil
}

// cmpVerb names a verb in a sentence ("its verb" when unknown).
func cmpVerb(verb string) string {
	if verb == "" {
		return "its verb"
	}
	return verb
}

// canceller is the cancellation of one running command in this process: the Proxmox task
// its write waits for, the cancel request once one arrived, and the task it stopped.
type canceller struct {
	mu      sync.Mutex
	steps   map[string]string // the verb's cancellable steps
	current *runningTask      // the task a write waits for now, nil between writes
	request *store.CancelRequest
	stopped *runningTask // the task stopped for the request
}

// runningTask is a Proxmox task a write of the command waits for.
type runningTask struct{ step, node, upid string }

// running registers r, which holds its claim, as running in this process until the returned
// stop is called; a cancel request announced for it reaches it through [Pipeline.WatchGuards].
// A resumed command looks once for a request made before it resumed.
func (r *run) running(ctx context.Context, claim store.Claim) (stop func()) {
	steps := r.verb.VerbCancellable()
	if len(steps) == 0 {
		return func() {}
	}
	r.cancel = &canceller{steps: steps}
	name := r.p.cfg.Store.WatchName(r.key())
	r.p.runMu.Lock()
	r.p.running[name] = r
	r.p.runMu.Unlock()
	if claim.State == store.Resumed {
		r.cancelRequested(ctx)
	}
	return func() {
		r.p.runMu.Lock()
		if r.p.running[name] == r {
			delete(r.p.running, name)
		}
		r.p.runMu.Unlock()
	}
}

// announced is called by [Pipeline.WatchGuards] with every name announced: a running command
// of this process so named looks at its record for a cancel request.
func (p *Pipeline) announced(ctx context.Context, name string) {
	p.runMu.Lock()
	r := p.running[name]
	p.runMu.Unlock()
	if r != nil {
		r.cancelRequested(ctx)
	}
}

// cancelRequested reads the command's cancel request and, when there is one, stops the
// cancellable task its write waits for now, or the next one it starts.
func (r *run) cancelRequested(ctx context.Context) {
	req, ok, err := r.p.cfg.Store.CancelRequested(ctx, r.key())
	if err != nil {
		r.log.Warn("store: the command's cancel request cannot be read", "err", err)
		return
	}
	if !ok {
		return
	}
	c := r.cancel
	c.mu.Lock()
	first := c.request == nil
	c.request = &req
	task := c.current
	c.mu.Unlock()
	if first {
		r.log.Info("cancel requested", "by", req.By, "reason", req.Reason)
	}
	if task != nil {
		r.stopTask(ctx, *task)
	}
}

// taskStarted notes the task a write (step) now waits for, and stops it at once when a cancel
// was requested and the step's task may be stopped.
func (r *run) taskStarted(ctx context.Context, step, node, upid string) {
	c := r.cancel
	if c == nil {
		return
	}
	t := runningTask{step: step, node: node, upid: upid}
	c.mu.Lock()
	c.current = &t
	requested := c.request != nil
	c.mu.Unlock()
	if requested {
		r.stopTask(ctx, t)
	}
}

// taskEnded notes that the write's task is no longer waited for.
func (r *run) taskEnded() {
	if c := r.cancel; c != nil {
		c.mu.Lock()
		c.current = nil
		c.mu.Unlock()
	}
}

// stopTask stops t (DELETE /nodes/{node}/tasks/{upid}) when its step may be stopped and no
// task was stopped yet.
func (r *run) stopTask(ctx context.Context, t runningTask) {
	c := r.cancel
	c.mu.Lock()
	_, may := c.steps[t.step]
	if !may || c.stopped != nil {
		c.mu.Unlock()
		return
	}
	c.stopped = &t
	c.mu.Unlock()
	if err := r.client.StopTask(ctx, t.node, t.upid); err != nil {
		r.log.Warn("cancel: the task could not be stopped", "upid", t.upid, "err", err)
		c.mu.Lock()
		c.stopped = nil
		c.mu.Unlock()
		return
	}
	r.step(ctx, "cancel", events.StepDone, t.upid, "stopped the "+t.step+" task for the cancellation")
}

// cancelledOutcome is the outcome of a command whose task was stopped for a cancellation,
// given what its dispatch returned: 410 command_cancelled saying who cancelled it, what was
// stopped and what Proxmox left, when the task ended interrupted; otherwise (it ended before
// the stop reached it) the dispatch's own. ok is false when no task was stopped.
func (r *run) cancelledOutcome(out Outcome, err error) (Outcome, bool) {
	c := r.cancel
	if c == nil {
		return Outcome{}, false
	}
	c.mu.Lock()
	stopped, req := c.stopped, c.request
	c.mu.Unlock()
	var te *proxmox.TaskError
	if stopped == nil || req == nil || !errors.As(err, &te) || te.UPID != stopped.upid || !interrupted(te.ExitStatus) {
		return Outcome{}, false
	}
	who := "cancelled by " + req.By
	if req.Reason != "" {
		who += " (" + req.Reason + ")"
	}
	detail := fmt.Sprintf("%s after it started: its %s task %s was stopped (Proxmox: %s); %s",
		who, stopped.step, stopped.upid, te.ExitStatus, c.steps[stopped.step])
	return Outcome{Status: 410, Result: ResultRefused, Reason: ReasonCommandCancelled, UPID: stopped.upid, Detail: detail,
		Output: out.Output}, true
}

// interrupted reports whether a task's exit status is that of a worker stopped by TERM
// (pve-common RESTEnvironment fork_worker, vzdump's handler).
func interrupted(exit string) bool {
	return slices.Contains([]string{"received interrupt", "interrupted by signal"}, exit)
}
