package handlers

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/proxmox"
	"github.com/proxbus/proxbus/store"
)

// PowerInput is the data of the guest power verbs: the guest and, for stop and reboot, force.
type PowerInput struct {
	GuestRef
	Force bool `json:"force,omitempty"`
}

// powerVerb builds one guest power verb (contract §9, guest power). op performs it and waits
// for its task(s); noOp is the result word when the guest already was in the wanted state.
// settled (nil when no state proves it, as for a reboot) tells from a guest's status that the
// verb's effect is in place: a resumed command confirms by reading and never sends twice.
func powerVerb(name, step string, withForce bool, noOp string, settled func(status string) bool,
	op func(ctx context.Context, c *proxmox.Client, g proxmox.Guest, force bool) (proxmox.TaskResult, error)) Verb {
	return Spec[PowerInput]{
		Name:   name,
		Access: Write,
		Decode: func(f *Fields) PowerInput {
			in := PowerInput{GuestRef: decodeGuestRef(f)}
			if withForce {
				in.Force = f.Bool("force", false)
			}
			return in
		},
		Locate: func(ctx context.Context, c *proxmox.Client, in PowerInput) (PowerInput, error) {
			ref, err := locateGuest(ctx, c, in.GuestRef)
			in.GuestRef = ref
			return in, err
		},
		Resource:    func(in PowerInput) string { return in.VM },
		JournalVMID: func(in PowerInput) int64 { return in.guest.VMID },
		Exclusive:   func(in PowerInput) (string, string) { return store.KindGuest, in.VM },
		Describe: func(in PowerInput) []Bullet {
			b := guestBullets(in.guest)
			if withForce {
				b = append(b, Bullet{"force", boolWord(in.Force)})
			}
			return b
		},
		Dispatch: func(ctx context.Context, x *Exec, in PowerInput) (Outcome, error) {
			if x.PriorDispatch() {
				return confirmPower(ctx, x, in.guest, step, settled)
			}
			if err := x.MarkDispatched(ctx); err != nil {
				return Outcome{}, err
			}
			x.Step(ctx, step, events.StepStarted, "", "")
			res, err := op(ctx, x.Proxmox, in.guest, in.Force)
			if err != nil {
				x.Step(ctx, step, events.StepError, "", "")
				switch {
				case errors.Is(err, proxmox.ErrUnreachable):
					x.UnmarkDispatched() // nothing left: a redelivery may try again
				case errors.Is(err, proxmox.ErrAnswerLost):
					return confirmPower(ctx, x, in.guest, step, settled) // sent: confirm, never resend
				}
				return Outcome{}, err
			}
			if res.NoOp {
				x.Step(ctx, step, events.StepSkipped, "", noOp)
				return Outcome{Status: 200, Result: noOp, Output: guestOutput(in.guest, nil)}, nil
			}
			x.Step(ctx, step, events.StepDone, lastUPID(res.UPIDs), "")
			return Outcome{Status: 200, Result: ResultOK, UPID: lastUPID(res.UPIDs), Output: guestOutput(in.guest, res.UPIDs)}, nil
		},
	}
}

// confirmPower reads the guest after an interrupted attempt: its effect in place → ok;
// otherwise the write is not sent again.
func confirmPower(ctx context.Context, x *Exec, g proxmox.Guest, step string, settled func(string) bool) (Outcome, error) {
	x.Step(ctx, step, events.StepStarted, "", "confirming an interrupted attempt by reading")
	if settled == nil {
		x.Step(ctx, step, events.StepError, "", "cannot be confirmed by reading")
		return unconfirmedWrite(), nil
	}
	// The interrupted task may still be running: look a few times before giving up.
	var now proxmox.Guest
	for i := range confirmReads {
		if i > 0 {
			time.Sleep(confirmPause)
		}
		var err error
		if now, err = x.Proxmox.ResolveGuest(ctx, strconv.FormatInt(g.VMID, 10)); err != nil {
			return Outcome{}, err
		}
		if settled(now.Status) {
			break
		}
	}
	if !settled(now.Status) {
		x.Step(ctx, step, events.StepError, "", "not in place")
		return unconfirmedWrite(), nil
	}
	x.Step(ctx, step, events.StepDone, "", "confirmed")
	return Outcome{Status: 200, Result: ResultOK, Output: guestOutput(now, nil)}, nil
}

// confirmReads and confirmPause bound how long an interrupted power task is waited for.
const (
	confirmReads = 10
	confirmPause = 300 * time.Millisecond
)

func statusIs(want string) func(string) bool { return func(s string) bool { return s == want } }

// VMStart starts a VM or container; already running → 200 already_running.
func VMStart() Verb {
	return powerVerb("vm.start", "start_vm", false, ResultAlreadyRunning, statusIs(proxmox.StatusRunning),
		func(ctx context.Context, c *proxmox.Client, g proxmox.Guest, _ bool) (proxmox.TaskResult, error) {
			return c.Start(ctx, g)
		})
}

// VMStop shuts a guest down (force: stops it at once); already stopped → 200 already_stopped.
func VMStop() Verb {
	return powerVerb("vm.stop", "stop_vm", true, ResultAlreadyStopped, statusIs(proxmox.StatusStopped),
		func(ctx context.Context, c *proxmox.Client, g proxmox.Guest, force bool) (proxmox.TaskResult, error) {
			return c.Stop(ctx, g, force)
		})
}

// VMReboot reboots a running guest (force: reset; for containers stop then start).
func VMReboot() Verb {
	return powerVerb("vm.reboot", "reboot_vm", true, ResultOK, nil,
		func(ctx context.Context, c *proxmox.Client, g proxmox.Guest, force bool) (proxmox.TaskResult, error) {
			return c.Reboot(ctx, g, force)
		})
}

// VMSuspend pauses a running VM; containers are refused (409 unsupported_for_container).
func VMSuspend() Verb {
	return powerVerb("vm.suspend", "suspend_vm", false, ResultOK, statusIs(proxmox.StatusPaused),
		func(ctx context.Context, c *proxmox.Client, g proxmox.Guest, _ bool) (proxmox.TaskResult, error) {
			return c.Suspend(ctx, g)
		})
}

// VMResume resumes a paused guest.
func VMResume() Verb {
	return powerVerb("vm.resume", "resume_vm", false, ResultOK, statusIs(proxmox.StatusRunning),
		func(ctx context.Context, c *proxmox.Client, g proxmox.Guest, _ bool) (proxmox.TaskResult, error) {
			return c.Resume(ctx, g)
		})
}

func boolWord(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
