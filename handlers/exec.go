package handlers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/netbox"
	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/store"
)

// Exec is what a verb's Dispatch and Confirm get: the endpoint's Proxmox client, step
// reporting, and [Exec.Write], through which every Proxmox write is sent so that the pipeline
// knows, across crashes and redeliveries, whether one may have left.
type Exec struct {
	// Proxmox is the endpoint's client.
	Proxmox *proxmox.Client
	// EndpointID is the NetBox id of the endpoint.
	EndpointID int64

	r        *run
	lease    *store.Lease // nil for reads
	progress store.Progress
	prior    bool
	// plan, in a dry run, records the writes Proxmox (a planning client) is not sent; no step
	// event is published for them.
	plan *proxmox.Plan

	runMu       sync.Mutex // guards lastRunning and runningHook's last: tasks may be waited for on a verb's goroutines
	lastRunning time.Time  // when the newest running step was published (pipeline clock)
}

func (r *run) exec(lease *store.Lease, progress store.Progress) *Exec {
	return &Exec{Proxmox: r.client, EndpointID: r.cmd.EndpointID, r: r, lease: lease, progress: progress, prior: progress.Dispatched}
}

// Sent is what one Proxmox write reports to [Exec.Write].
type Sent struct {
	// UPID is the Proxmox task the write started, "" for a synchronous write.
	UPID string
	// Skipped, when not empty, says that the write found its effect already in place and
	// sent nothing; the step is reported skipped with this detail.
	Skipped string
}

// ErrReadOnly is returned by [Exec.Write] in a read verb, which has no claim to write under.
var ErrReadOnly = errors.New("handlers: a read verb cannot write")

// errNotSent: the write was not sent because its dispatch could not be marked in the store.
var errNotSent = errors.New("handlers: the write was not sent: its dispatch could not be marked")

// Write sends one Proxmox write of the command as the step named step: it notes that the write
// may leave from now on, reports the step started (with detail), calls send, and reports it done (with the
// task's UPID), skipped or error. While send waits for a Proxmox task, the task's progress
// (read from its log, see proxmox.WithTaskProgress) is reported as running steps of step with
// the task's UPID and progress, at most one per second of the pipeline's clock per command,
// the first a second after the step started, and only when the progress changed: a task that
// ends within a second reports none. send's error is returned as it is; the pipeline routes it:
//   - proxmox.ErrUnreachable: nothing left this process, so a later attempt may send it again
//     (unless an earlier write of this command may have left);
//   - proxmox.ErrAnswerLost: the write may have taken effect: the pipeline confirms it with the
//     verb's Confirm and never sends it a second time;
//   - any other error is mapped to the command's outcome, or, when it is not one (a dependency
//     unavailable while waiting for a task), the command is suspended as dispatched and
//     confirmed by reading on its next delivery.
func (x *Exec) Write(ctx context.Context, step, detail string, send func(ctx context.Context) (Sent, error)) (Sent, error) {
	if x.plan != nil { // a dry run: x.Proxmox records the writes instead of sending them
		return send(ctx)
	}
	if x.lease == nil {
		return Sent{}, fmt.Errorf("%w: step %s", ErrReadOnly, step)
	}
	before, wrote := x.progress.Dispatched, x.r.wrote
	x.Step(ctx, step, events.StepStarted, "", detail)
	// Marked in the store right before it leaves, so that a later owner knows which writes may
	// have left (and, without the mark, that this one did not).
	if err := x.r.p.cfg.Store.Dispatching(ctx, *x.lease, x.progress, step); err != nil {
		x.Step(ctx, step, events.StepError, "", "the store is unavailable; nothing was sent")
		if !before {
			return Sent{}, errors.Join(errTransient, fmt.Errorf("%w: %w", errNotSent, err))
		}
		return Sent{}, fmt.Errorf("%w: %w", errNotSent, err)
	}
	x.r.reach(crashStored, "dispatch mark")
	x.progress.Sent = append(x.progress.Sent, step)
	x.progress.Dispatched, x.r.wrote = true, true
	x.r.reach(crashBeforeSend, step)
	sendCtx := proxmox.WithTaskStarted(x.runningHook(ctx, step), func(node, upid string) { x.r.taskStarted(ctx, step, node, upid) })
	sent, err := send(sendCtx)
	x.r.taskEnded()
	x.r.reach(crashAfterSend, step)
	switch {
	case err == nil && sent.Skipped != "":
		x.Step(ctx, step, events.StepSkipped, sent.UPID, sent.Skipped)
	case err == nil:
		x.Step(ctx, step, events.StepDone, sent.UPID, "")
	case errors.Is(err, proxmox.ErrUnreachable):
		x.progress.Dispatched, x.r.wrote = before, wrote
		x.Step(ctx, step, events.StepError, "", "Proxmox is unreachable; nothing was sent")
	case errors.Is(err, proxmox.ErrAnswerLost):
		x.Step(ctx, step, events.StepError, sent.UPID, "the answer was lost; the write may have taken effect")
	default:
		x.Step(ctx, step, events.StepError, sent.UPID, "")
	}
	return sent, err
}

// CommandSince is when the command arrived in the stream (else its time attribute, else this
// delivery's start): no task it started can be older, so a Confirm looks for its effects
// from then on.
func (x *Exec) CommandSince() time.Time {
	switch {
	case !x.r.delivery.Stored.IsZero():
		return x.r.delivery.Stored
	case !x.r.cmd.Time.IsZero():
		return x.r.cmd.Time
	}
	return x.r.started
}

// PriorDispatch reports whether this run is confirming a write that an earlier attempt, or
// this one, may have sent. A Confirm that finds the effect absent and runs the verb again (as
// vm.provision does when its VM was never created) sends its writes through [Exec.Write] as
// usual.
func (x *Exec) PriorDispatch() bool { return x.prior }

// Dispatched reports whether a write of this command may have been sent.
func (x *Exec) Dispatched() bool { return x.progress.Dispatched }

// MaySent reports whether the write named step may have been sent by this command, by this
// run or an earlier one: a write whose dispatch was marked, or any write when an earlier owner
// did not mark them (which it cannot tell apart). A Confirm sends a write it finds not sent
// as usual.
func (x *Exec) MaySent(step string) bool {
	if !x.progress.Dispatched {
		return false
	}
	return x.progress.Sent == nil || slices.Contains(x.progress.Sent, step)
}

// AwaitTask waits for task upid on node that an earlier write (step) of this command started,
// as a Confirm does for a write whose answer was lost, reporting its progress as running
// steps of "confirm": a cancellation of the command stops it as it would the write's own
// (when step may be stopped). Its error is WaitTask's (a *proxmox.TaskError for a task that
// failed or was stopped).
func (x *Exec) AwaitTask(ctx context.Context, step, node, upid string) error {
	x.r.taskStarted(ctx, step, node, upid)
	defer x.r.taskEnded()
	return x.Proxmox.WaitTask(x.runningHook(ctx, "confirm"), node, upid)
}

// Step publishes a step event (contract §3). Publishing failures are logged, never fatal.
func (x *Exec) Step(ctx context.Context, step string, status events.StepStatus, upid, detail string) {
	x.r.step(ctx, step, status, upid, detail)
}

// runningEvery is the least time between two running steps of a command, and between a
// write's started step and its first running step (contract §3: at most one per second).
const runningEvery = time.Second

// runningHook returns ctx with a proxmox.WithTaskProgress hook that reports the progress of
// the tasks step waits for as running steps (see [Exec.Write]).
func (x *Exec) runningHook(ctx context.Context, step string) context.Context {
	began := x.r.p.cfg.Now()
	var last events.Progress // the progress step last reported; guarded by x.runMu
	// the watch's task events name the command
	ctx = proxmox.WithCommandID(ctx, x.r.cmd.ID)
	return proxmox.WithTaskProgress(ctx, func(_, upid string, tp proxmox.TaskProgress) {
		p := events.Progress{Done: tp.Done, Total: tp.Total, Unit: tp.Unit}
		if at, due := x.runningDue(began, &last, p); due {
			x.r.publishStep(ctx, events.Step{Step: step, Status: events.StepRunning, UPID: upid, Progress: &p, At: at})
		}
	})
}

// runningDue reports whether progress p of a write that began at began is published now
// (returned): it differs from *last, the write began a second ago and the command's previous
// running step was a second ago. If so it takes the slot (and sets *last).
func (x *Exec) runningDue(began time.Time, last *events.Progress, p events.Progress) (time.Time, bool) {
	now := x.r.p.cfg.Now()
	x.runMu.Lock()
	defer x.runMu.Unlock()
	if p == *last || now.Sub(began) < runningEvery || (!x.lastRunning.IsZero() && now.Sub(x.lastRunning) < runningEvery) {
		return time.Time{}, false
	}
	x.lastRunning, *last = now, p
	return now, true
}

// step publishes the command's next step event. seq continues across deliveries: a
// redelivery starts after the newest step an earlier delivery published, so no step event id
// is used twice.
func (r *run) step(ctx context.Context, step string, status events.StepStatus, upid, detail string) {
	r.publishStep(ctx, events.Step{Step: step, Status: status, UPID: upid, Detail: detail})
}

// publishStep publishes st as the command's next step event: Seq and Attempt are filled in,
// Detail is scrubbed, a zero At is now.
func (r *run) publishStep(ctx context.Context, st events.Step) {
	r.mu.Lock()
	r.seq++
	st.Seq = r.seq
	r.mu.Unlock()
	st.Detail, st.Attempt = r.scrub(st.Detail), r.attempt
	if st.At.IsZero() {
		st.At = r.p.cfg.Now()
	}
	r.reach(crashBeforePublish, "step "+st.Step+" "+string(st.Status))
	if err := r.p.cfg.Publisher.Publish(ctx, r.origin, st); err != nil {
		r.log.Warn("step not published", "step", st.Step, "err", err)
	}
	r.reach(crashAfterPublish, "step "+st.Step+" "+string(st.Status))
}

func kindOf(s string) netbox.Kind { return netbox.Kind(s) }

// untilInPlace reads with check until it reports the effect in place, for up to the pipeline's
// ConfirmFor: an interrupted write's task may still be running. It returns check's error at
// once.
func (x *Exec) untilInPlace(ctx context.Context, check func(ctx context.Context) (bool, error)) (bool, error) {
	if x.plan != nil { // a dry run: what a planned write would have made never appears
		return check(ctx)
	}
	pause := confirmPause
	for over := x.r.p.cfg.After(x.r.p.cfg.ConfirmFor); ; {
		done, err := check(ctx)
		if err != nil || done {
			return done, err
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-over:
			return false, nil
		case <-x.r.p.cfg.After(pause):
		}
		pause = min(2*pause, 2*time.Second)
	}
}

// Unconfirmed is what a Confirm, or a Dispatch resuming an earlier attempt, returns when
// reading cannot find the effect of a write that may have been sent: the pipeline answers 502
// proxmox_write_unconfirmed saying detail (its default when "") with the write's task upid
// (when known), and never sends the write again.
func (x *Exec) Unconfirmed(upid, detail string) error {
	return &unconfirmedError{upid: upid, detail: detail}
}

// confirmPause is the first pause between the reads that look for an interrupted write's
// effect; it doubles up to 2 s.
const confirmPause = 250 * time.Millisecond

// Read runs read, a read-only step of the verb (nothing it does changes Proxmox), as step: a
// started step, then done, or an error step — with the refusal's detail when read found the
// command bound to be refused (a refusal is an outcome: the verb answers it). An error is a
// read that did not answer; the pipeline classifies it.
func (x *Exec) Read(ctx context.Context, step string, read func(ctx context.Context) (*Outcome, error)) (*Outcome, error) {
	x.Step(ctx, step, events.StepStarted, "", "")
	refusal, err := read(ctx)
	switch {
	case err != nil:
		x.Step(ctx, step, events.StepError, "", "")
		return nil, err
	case refusal != nil:
		x.Step(ctx, step, events.StepError, "", refusal.Detail)
		return refusal, nil
	}
	x.Step(ctx, step, events.StepDone, "", "")
	return nil, nil
}
