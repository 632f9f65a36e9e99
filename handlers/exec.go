package handlers

import (
	"context"
	"fmt"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/netbox"
	"github.com/proxbus/proxbus/proxmox"
	"github.com/proxbus/proxbus/store"
)

// Exec is what a verb's Dispatch gets: the endpoint's Proxmox client, step reporting, and the
// dispatch flag that, with the write-ahead journal entry, makes writes safe across crashes and
// redeliveries.
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

// PriorDispatch reports whether an earlier attempt of this command may already have sent its
// write: it suspended after marking the dispatch, or it stopped without recording anything
// after writing its journal entry. A verb must then confirm by reading and never send the
// write again.
func (x *Exec) PriorDispatch() bool { return x.prior }

// Dispatched reports whether this command's write may have been sent.
func (x *Exec) Dispatched() bool { return x.progress.Dispatched }

// UnmarkDispatched notes that the write certainly did not leave this process (Proxmox was
// unreachable before the request was written), so a redelivery may send it. The pipeline
// records it when it suspends the command for redelivery.
func (x *Exec) UnmarkDispatched() { x.progress.Dispatched = false }

// MarkDispatched notes, right before a verb sends its Proxmox write, that the write may be
// sent from now on. It costs no round trip: the write-ahead journal entry already is the
// command's intent record (a later owner that finds it after a crash assumes the write may have
// been sent), and this flag only decides, in this attempt, whether a transient failure may
// suspend the command for a plain retry (the pipeline records it then with Suspend). A verb
// must call it before its write and must not write when it fails (it fails only for reads).
func (x *Exec) MarkDispatched(ctx context.Context) error {
	if x.lease == nil {
		return fmt.Errorf("%w: a read verb cannot write", errTransient)
	}
	x.progress.Dispatched = true
	return nil
}

// Step publishes a step event (contract §3). Publishing failures are logged, never fatal.
func (x *Exec) Step(ctx context.Context, step string, status events.StepStatus, upid, detail string) {
	x.r.step(ctx, step, status, upid, detail)
}

// step publishes the command's next step event. seq continues across a delivery's steps; a
// redelivery starts at 1000×(delivery−1)+1, so its events never collide with (and are never
// dropped as duplicates of) an earlier delivery's.
func (r *run) step(ctx context.Context, step string, status events.StepStatus, upid, detail string) {
	r.mu.Lock()
	r.seq++
	seq := r.seq
	r.mu.Unlock()
	st, msg, err := r.p.cfg.Emitter.Step(r.origin, events.Step{
		Seq: seq, Step: step, Status: status, UPID: upid, Detail: r.scrub(detail), At: r.p.cfg.Now(),
	})
	if err != nil {
		r.log.Warn("step not encodable", "err", err)
		return
	}
	if err := r.p.cfg.Publisher.PublishEvent(ctx, msg, st); err != nil {
		r.log.Warn("step not published", "step", step, "err", err)
	}
}

func kindOf(s string) netbox.Kind { return netbox.Kind(s) }
