package handlers

import (
	"context"
	"strconv"

	"github.com/proxbus/proxbus/internal/proxmox"
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
	return onGuest(Spec[PowerInput]{
		Name:   name,
		Access: Write,
		Decode: func(f *Fields) PowerInput {
			in := PowerInput{GuestRef: decodeGuestRef(f)}
			if withForce {
				in.Force = f.Bool("force", false)
			}
			return in
		},
		Describe: func(in PowerInput) []Bullet {
			b := guestBullets(in.guest)
			if withForce {
				b = append(b, Bullet{"force", boolWord(in.Force)})
			}
			return b
		},
		Dispatch: func(ctx context.Context, x *Exec, in PowerInput) (Outcome, error) {
			var res proxmox.TaskResult
			_, err := x.Write(ctx, step, "", func(ctx context.Context) (Sent, error) {
				var err error
				res, err = op(ctx, x.Proxmox, in.guest, in.Force)
				if res.NoOp {
					return Sent{Skipped: noOp}, err
				}
				return Sent{UPID: lastUPID(res.UPIDs)}, err
			})
			switch {
			case err != nil:
				return Outcome{}, err
			case res.NoOp:
				return Outcome{Status: 200, Result: noOp, Output: guestOutput(in.guest, nil)}, nil
			}
			return Outcome{Status: 200, Result: ResultOK, UPID: lastUPID(res.UPIDs), Output: guestOutput(in.guest, res.UPIDs)}, nil
		},
		Confirm: confirmPower(settled),
	}, func(in *PowerInput) *GuestRef { return &in.GuestRef })
}

// confirmPower reads the guest after an interrupted attempt: its effect in place → ok. Nil
// when no state proves the effect (a reboot).
func confirmPower(settled func(string) bool) func(ctx context.Context, x *Exec, in PowerInput) (Outcome, error) {
	if settled == nil {
		return nil
	}
	return func(ctx context.Context, x *Exec, in PowerInput) (Outcome, error) {
		var now proxmox.Guest
		inPlace, err := x.untilInPlace(ctx, func(ctx context.Context) (bool, error) {
			var err error
			now, err = x.Proxmox.ResolveGuest(ctx, strconv.FormatInt(in.guest.VMID, 10))
			return err == nil && settled(now.Status), err
		})
		switch {
		case err != nil:
			return Outcome{}, err
		case !inPlace:
			return Outcome{}, x.Unconfirmed("", "")
		}
		return Outcome{Status: 200, Result: ResultOK, Output: guestOutput(now, nil)}, nil
	}
}

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
