package handlers

import (
	"context"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/store"
)

// locateAgain reads the command's object again once it holds its claim after waiting for
// another command that held its guest (which may have migrated or deleted it meanwhile), so
// that it never acts on what it read before it waited. A guest that moved is acted on where
// it is now; one that is gone now is answered so, the claim given back (nothing was written).
// Otherwise it goes on with next.
func (r *run) locateAgain(ctx context.Context, lease store.Lease, next stage) move {
	if r.relocate == nil {
		return next(ctx)
	}
	located, err := r.relocate(ctx, r.client)
	if err != nil {
		r.release(ctx, lease)
		return r.settleBeforeWrite(ctx, "locate", err, func(out Outcome) move {
			return r.answer(ctx, out, noJournal)
		})
	}
	if held, _ := r.prep.exclusive(r.cmd.EndpointID); held != exclusiveOf(located, r.cmd.EndpointID) {
		// the reference names another guest now (renamed, or deleted and made anew): the
		// guard this command holds is not that guest's; it claims afresh at its next delivery
		r.release(ctx, lease)
		return r.redeliver(0)
	}
	r.moved(ctx, located)
	return next(ctx)
}

// exclusiveOf is the key of the resource p is exclusive on at endpointID (zero for none).
func exclusiveOf(p prepared, endpointID int64) store.ResourceKey {
	k, _ := p.exclusive(endpointID)
	return k
}

// firstLocate locates the command's object before it is claimed. A write command that claims
// at its first delivery may be located from the client's newest read of its guest
// (proxmox.WithProvisionalLocate: no request at all); it is then located again once claimed,
// before it acts (locateAgain), whether it waited or not. A provisional locate that fails (the
// newest read lacks the guest, or the locate needs more than the guest's place) is done again
// from reads of its own, as any other command's is.
func (r *run) firstLocate(ctx context.Context) (prepared, error) {
	if r.verb.VerbAccess() == Write && !r.cmd.DryRun && !r.needsApproval() && r.delivery.Number == 1 {
		located, err := r.prep.locate(proxmox.WithProvisionalLocate(ctx), r.client)
		if err == nil {
			r.provisional = true
			return located, nil
		}
	}
	return r.prep.locate(ctx, r.client)
}

// followGuest is called when a dispatch that has written nothing finds the command's guest
// missing from the node it was located on: the guest is located again. It reports true when
// the guest is now on another node (r.prep is bound to it and the dispatch runs again there),
// false when it is where it was (the not-found stands), and the error of locating it, which is
// the command's answer (a guest gone now is answered vm_not_found as it is now).
func (r *run) followGuest(ctx context.Context, x *Exec) (bool, error) {
	located, err := r.relocate(ctx, r.client)
	if err != nil {
		return false, err
	}
	if nodeOf(located) == nodeOf(r.prep) {
		return false, nil
	}
	r.moved(ctx, located)
	return true, nil
}

// moved binds the command to located, and says so in a step when its node changed.
func (r *run) moved(ctx context.Context, located prepared) {
	from, to := nodeOf(r.prep), nodeOf(located)
	r.prep = located
	if from != to && from != "" {
		r.step(ctx, "locate", events.StepDone, "", "the guest moved from node "+from+" to "+to+" since it was located; acting on it there")
		r.log.Info("the command's guest moved since it was located", "from", from, "to", to)
	}
}

// nodeOf is the node of the guest a prepared command is bound to ("" for none).
func nodeOf(p prepared) string {
	for _, b := range p.bullets {
		if b.Name == "node" {
			return b.Value
		}
	}
	return ""
}
