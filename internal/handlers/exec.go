package handlers

import (
	"context"
	"errors"
	"fmt"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/netbox"
	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/internal/store"
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

// Write sends one Proxmox write of the command as the step named step: it notes that the write
// may leave from now on, reports the step started (with detail), calls send, and reports it done (with the
// task's UPID), skipped or error. send's error is returned as it is; the pipeline routes it:
//   - proxmox.ErrUnreachable: nothing left this process, so a later attempt may send it again
//     (unless an earlier write of this command may have left);
//   - proxmox.ErrAnswerLost: the write may have taken effect: the pipeline confirms it with the
//     verb's Confirm and never sends it a second time;
//   - any other error is mapped to the command's outcome, or, when it is not one (a dependency
//     unavailable while waiting for a task), the command is suspended as dispatched and
//     confirmed by reading on its next delivery.
func (x *Exec) Write(ctx context.Context, step, detail string, send func(ctx context.Context) (Sent, error)) (Sent, error) {
	if x.lease == nil {
		return Sent{}, fmt.Errorf("%w: step %s", ErrReadOnly, step)
	}
	before, wrote := x.progress.Dispatched, x.r.wrote
	x.progress.Dispatched, x.r.wrote = true, true
	x.Step(ctx, step, events.StepStarted, "", detail)
	sent, err := send(ctx)
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

// PriorDispatch reports whether this run is confirming a write that an earlier attempt, or
// this one, may have sent. A Confirm that finds the effect absent and runs the verb again (as
// vm.provision does when its VM was never created) sends its writes through [Exec.Write] as
// usual.
func (x *Exec) PriorDispatch() bool { return x.prior }

// Dispatched reports whether a write of this command may have been sent.
func (x *Exec) Dispatched() bool { return x.progress.Dispatched }

// Step publishes a step event (contract §3). Publishing failures are logged, never fatal.
func (x *Exec) Step(ctx context.Context, step string, status events.StepStatus, upid, detail string) {
	x.r.step(ctx, step, status, upid, detail)
}

// step publishes the command's next step event. seq continues across deliveries: a
// redelivery starts after the newest step an earlier delivery published, so no step event id
// is used twice.
func (r *run) step(ctx context.Context, step string, status events.StepStatus, upid, detail string) {
	r.mu.Lock()
	r.seq++
	seq := r.seq
	r.mu.Unlock()
	err := r.p.cfg.Publisher.Publish(ctx, r.origin, events.Step{
		Seq: seq, Step: step, Status: status, UPID: upid, Detail: r.scrub(detail), Attempt: r.attempt, At: r.p.cfg.Now(),
	})
	if err != nil {
		r.log.Warn("step not published", "step", step, "err", err)
	}
}

func kindOf(s string) netbox.Kind { return netbox.Kind(s) }
