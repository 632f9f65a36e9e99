package handlers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/proxmox"
)

// Reasons of vm.delete (contract §9).
const (
	// ReasonVMRunning: the guest runs and stop_first was not asked (409); nothing was written.
	ReasonVMRunning = "vm_running"
	// ReasonVMProtected: the guest's configuration has protection: 1 (409); nothing was written.
	ReasonVMProtected = "vm_protected"
)

// Steps of vm.delete: the hard stop asked by stop_first ([stepStopVM], vm.stop's step) and the
// destroy itself.
const (
	stepStopVM   = "stop_vm"
	stepDeleteVM = "delete_vm"
)

// DeleteInput is the data of vm.delete: the guest, and PVE's purge and
// destroy-unreferenced-disks (both default true), and whether a running guest is hard-stopped
// first (default false: it is refused 409 vm_running).
type DeleteInput struct {
	GuestRef
	Purge                    bool `json:"purge"`
	DestroyUnreferencedDisks bool `json:"destroy_unreferenced_disks"`
	StopFirst                bool `json:"stop_first"`
	// absent is set by Locate when vm is a vmid that no guest has: the delete is a repeat
	// whose effect is in place (200 already_absent), journaled on the vmid's NetBox VM.
	absent bool
}

// deleteOutput is vm.delete's output: the guest's vmid, the node it was on (unknown when it
// was already gone) and the Proxmox tasks waited for (the stop, the destroy).
type deleteOutput struct {
	VMID  string   `json:"vmid"`
	Node  string   `json:"node,omitempty"`
	UPIDs []string `json:"upids"`
}

// VMDelete destroys a QEMU VM or LXC container with the volumes it owns (contract §9
// vm.delete): DELETE /nodes/{node}/{qemu|lxc}/{vmid} with purge and
// destroy-unreferenced-disks, waiting for its task. A running guest → 409 vm_running unless
// stop_first, which hard-stops it first (POST …/status/stop, its own step and task);
// protection: 1 → 409 vm_protected, checked before anything is written; a vmid no guest has →
// 200 already_absent (a replay-safe repeat), while a name that resolves to nothing is 404
// vm_not_found as for every guest verb (a typo cannot be told from a deleted guest). A lost
// answer or an interrupted attempt is confirmed by reading whether the guest still exists,
// for up to the pipeline's ConfirmFor while its destroy task runs; never by a second DELETE.
// The journal goes on the vmid's NetBox VM, which outlives the Proxmox guest.
func VMDelete() Verb {
	return onGuest(Spec[DeleteInput]{
		Name:   "vm.delete",
		Access: Write,
		Decode: func(f *Fields) DeleteInput {
			return DeleteInput{GuestRef: decodeGuestRef(f), Purge: f.Bool("purge", true),
				DestroyUnreferencedDisks: f.Bool("destroy_unreferenced_disks", true), StopFirst: f.Bool("stop_first", false)}
		},
		Locate: locateDelete,
		Describe: func(in DeleteInput) []Bullet {
			b := []Bullet{{"vmid", strconv.FormatInt(in.guest.VMID, 10)}}
			if !in.absent {
				b = guestBullets(in.guest)
			}
			return append(b, Bullet{"purge", boolWord(in.Purge)},
				Bullet{"destroy_unreferenced_disks", boolWord(in.DestroyUnreferencedDisks)}, Bullet{"stop_first", boolWord(in.StopFirst)})
		},
		Dispatch: dispatchDelete,
		Confirm:  confirmDelete,
		Gone: func(vmid string, sent []string) (Outcome, bool) {
			if vmid == "" || (sent != nil && !slices.Contains(sent, stepDeleteVM)) {
				return Outcome{}, false // only its stop may have left: who removed the guest is unknown
			}
			return Outcome{Status: 200, Result: ResultOK, Output: deleteOutput{VMID: vmid, UPIDs: []string{}},
				Detail: "resumed after its DELETE may have been sent, the guest can no longer be found: it is deleted"}, true
		},
	}, func(in *DeleteInput) *GuestRef { return &in.GuestRef })
}

// locateDelete resolves the guest. A vmid (100–999999999) that no guest has is not an error
// here: the command goes on, journaled, to answer 200 already_absent (or, resumed after a
// destroy that completed, ok).
func locateDelete(ctx context.Context, c *proxmox.Client, in DeleteInput) (DeleteInput, error) {
	ref, err := locateGuest(ctx, c, in.GuestRef)
	if vmid, byID := refVMID(in.VM); byID && errors.Is(err, proxmox.ErrVMNotFound) {
		in.GuestRef = GuestRef{VM: strconv.FormatInt(vmid, 10), guest: proxmox.Guest{VMID: vmid}}
		in.absent = true
		return in, nil
	}
	in.GuestRef = ref
	return in, err
}

// refVMID reads a `vm` reference as a vmid: all digits, within PVE's 100–999999999.
func refVMID(ref string) (int64, bool) {
	vmid, err := strconv.ParseInt(ref, 10, 64)
	if err != nil || ref == "" || ref[0] == '+' || ref[0] == '-' || vmid < 100 || vmid > 999999999 {
		return 0, false
	}
	return vmid, true
}

// dispatchDelete reads the guest again now that the command holds it (it may have changed
// while the command waited), refuses before any write what PVE would refuse (protection, a
// running guest without stop_first), hard-stops it when asked (from the status just read: the
// stop reads none of its own), and destroys it.
func dispatchDelete(ctx context.Context, x *Exec, in DeleteInput) (Outcome, error) {
	vmid := strconv.FormatInt(in.guest.VMID, 10)
	if in.absent {
		return deleteAbsent(ctx, x, in, "no guest with vmid "+vmid+" in the endpoint's cluster resources"), nil
	}
	g, err := x.Proxmox.ResolveGuest(ctx, vmid)
	if errors.Is(err, proxmox.ErrVMNotFound) {
		return deleteAbsent(ctx, x, in, "the guest is gone from the endpoint's cluster resources"), nil
	} else if err != nil {
		return Outcome{}, err
	}
	protected, err := x.Proxmox.GuestProtected(ctx, g)
	if errors.Is(err, proxmox.ErrVMNotFound) {
		return deleteAbsent(ctx, x, in, "the guest is gone from "+g.Node), nil
	} else if err != nil {
		return Outcome{}, err
	}
	if protected {
		return deleteProtected(g), nil
	}
	running := g.Status == proxmox.StatusRunning || g.Status == proxmox.StatusPaused
	if running && !in.StopFirst {
		return deleteRunning(g), nil
	}
	out := deleteOutput{VMID: vmid, Node: g.Node, UPIDs: []string{}}
	if running && x.MaySent(stepStopVM) {
		// resumed: the stop an interrupted attempt sent is waited for, never sent again
		stopped, err := x.untilInPlace(ctx, func(ctx context.Context) (bool, error) {
			g, err = x.Proxmox.ResolveGuest(ctx, vmid)
			return err == nil && g.Status == proxmox.StatusStopped, err
		})
		if err != nil {
			return Outcome{}, err
		}
		if !stopped {
			return Outcome{}, x.Unconfirmed("", "an interrupted attempt sent the stop before the delete, but "+guestLabel(g)+" is still "+g.Status+
				"; neither is sent again: check it in Proxmox")
		}
		running = false
	}
	if running {
		var stop proxmox.TaskResult
		_, err := x.Write(ctx, stepStopVM, "a hard stop before the delete (stop_first)", func(ctx context.Context) (Sent, error) {
			var err error
			stop, err = x.Proxmox.StopKnown(ctx, g, true) // g's status was read just above
			if stop.NoOp {
				return Sent{Skipped: "already stopped"}, err
			}
			return Sent{UPID: lastUPID(stop.UPIDs)}, err
		})
		out.UPIDs = append(out.UPIDs, stop.UPIDs...)
		if err != nil {
			return Outcome{}, err
		}
	}
	var res proxmox.TaskResult
	_, err = x.Write(ctx, stepDeleteVM, "", func(ctx context.Context) (Sent, error) {
		var err error
		res, err = x.Proxmox.DeleteGuest(ctx, g, proxmox.DeleteOptions{Purge: in.Purge, DestroyUnreferencedDisks: in.DestroyUnreferencedDisks})
		return Sent{UPID: lastUPID(res.UPIDs)}, err
	})
	out.UPIDs = append(out.UPIDs, res.UPIDs...)
	switch {
	case errors.Is(err, proxmox.ErrVMRunning): // started again between the read and the delete
		return deleteRunning(g), nil
	case errors.Is(err, proxmox.ErrVMProtected): // protected between the read and the delete
		return deleteProtected(g), nil
	case errors.Is(err, proxmox.ErrVMNotFound) && len(res.UPIDs) == 0:
		return deleteVanished(ctx, x, g, err)
	case err != nil:
		return Outcome{}, err
	}
	return Outcome{Status: 200, Result: ResultOK, UPID: lastUPID(res.UPIDs), Output: out}, nil
}

// deleteVanished answers a DELETE that PVE refused because the guest's configuration is not
// on its node: gone from the cluster → 200 already_absent; still listed (it moved to another
// node meanwhile) → PVE's refusal, 502 proxmox_refused.
func deleteVanished(ctx context.Context, x *Exec, g proxmox.Guest, refusal error) (Outcome, error) {
	_, err := x.Proxmox.ResolveGuest(ctx, strconv.FormatInt(g.VMID, 10))
	switch {
	case errors.Is(err, proxmox.ErrVMNotFound):
		return Outcome{Status: 200, Result: ResultAlreadyAbsent, Detail: "the guest was gone when the delete reached " + g.Node,
			Output: deleteOutput{VMID: strconv.FormatInt(g.VMID, 10), Node: g.Node, UPIDs: []string{}}}, nil
	case err != nil:
		return Outcome{}, err
	}
	var apiErr *proxmox.APIError
	if errors.As(refusal, &apiErr) {
		return Outcome{}, apiErr // not a missing guest: the guest is listed elsewhere
	}
	return Outcome{}, refusal
}

// deleteAbsent is the answer for a guest already gone: 200 already_absent, the step skipped.
func deleteAbsent(ctx context.Context, x *Exec, in DeleteInput, detail string) Outcome {
	x.Step(ctx, stepDeleteVM, events.StepSkipped, "", detail)
	return Outcome{Status: 200, Result: ResultAlreadyAbsent, Detail: detail,
		Output: deleteOutput{VMID: strconv.FormatInt(in.guest.VMID, 10), Node: in.guest.Node, UPIDs: []string{}}}
}

// deleteProtected refuses a protected guest: 409 vm_protected, nothing written.
func deleteProtected(g proxmox.Guest) Outcome {
	return Outcome{Status: 409, Result: ResultRefused, Reason: ReasonVMProtected,
		Detail: fmt.Sprintf("%s has protection: 1 in its configuration; clear the guest's protection option in Proxmox first, then delete it", guestLabel(g))}
}

// deleteRunning refuses a running guest: 409 vm_running, nothing written.
func deleteRunning(g proxmox.Guest) Outcome {
	return Outcome{Status: 409, Result: ResultRefused, Reason: ReasonVMRunning,
		Detail: fmt.Sprintf("%s is %s; stop it first, or send stop_first: true to hard-stop it before the delete", guestLabel(g), g.Status)}
}

// guestLabel is "VM 100 (web-01) on pve1" or "CT 200 (ct-pve1) on pve1".
func guestLabel(g proxmox.Guest) string {
	kind := "VM"
	if g.Type == proxmox.GuestLXC {
		kind = "CT"
	}
	return fmt.Sprintf("%s %d (%s) on %s", kind, g.VMID, g.Name, g.Node)
}

// confirmDelete tells by reading whether an interrupted delete took effect. An attempt that
// never sent the DELETE (it stopped after its stop_first stop, as the marks of its writes
// say) is finished: the delete runs, waiting for that stop instead of sending it again.
// Otherwise: the guest gone from the cluster's resources → 200 ok. It reads for up to
// ConfirmFor, since the destroy task may still run; a guest still there then → 502
// proxmox_write_unconfirmed: the DELETE is never sent a second time, since the vmid may
// meanwhile name a new guest.
func confirmDelete(ctx context.Context, x *Exec, in DeleteInput) (Outcome, error) {
	if !x.MaySent(stepDeleteVM) {
		return dispatchDelete(ctx, x, in)
	}
	vmid := strconv.FormatInt(in.guest.VMID, 10)
	gone, err := x.untilInPlace(ctx, func(ctx context.Context) (bool, error) {
		_, err := x.Proxmox.ResolveGuest(ctx, vmid)
		if errors.Is(err, proxmox.ErrVMNotFound) {
			return true, nil
		}
		return false, err
	})
	switch {
	case err != nil:
		return Outcome{}, err
	case !gone:
		return Outcome{}, x.Unconfirmed("", "")
	}
	return Outcome{Status: 200, Result: ResultOK, Output: deleteOutput{VMID: vmid, Node: in.guest.Node, UPIDs: []string{}}}, nil
}
