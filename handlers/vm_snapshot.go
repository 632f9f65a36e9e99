package handlers

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/proxmox"
)

// SnapshotInput is the data of the snapshot verbs.
type SnapshotInput struct {
	GuestRef
	Snapshot      string `json:"snapshot,omitempty"`
	Description   string `json:"description,omitempty"`
	IncludeMemory bool   `json:"include_memory,omitempty"`
	Start         bool   `json:"start,omitempty"`
}

// snapshotNamePattern is PVE's pve-configid format (at most 40 characters).
var snapshotNamePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,39}$`)

// reservedSnapshot is Proxmox's pseudo-snapshot of the running state.
const reservedSnapshot = "current"

// locateSnapshot refuses the reserved name before any request, then resolves the guest. A
// create with include_memory reads a running VM's live status too: judgeCreate tells from it
// whether an existing snapshot without RAM is the one a create would make now.
func locateSnapshot(ctx context.Context, c *proxmox.Client, in SnapshotInput) (SnapshotInput, error) {
	if in.Snapshot == reservedSnapshot {
		return in, proxmox.ErrReservedSnapshotName
	}
	find := locateGuest
	if in.IncludeMemory {
		find = resolveGuest
	}
	ref, err := find(ctx, c, in.GuestRef)
	in.GuestRef = ref
	return in, err
}

// snapshotVerb builds a snapshot write verb around op. Dispatch reads the guest's snapshots
// once before any write and asks judge about the one named (nil when it does not exist): a
// non-nil outcome is the answer and nothing is written (a 200 one reports step skipped); nil
// sends op. present (nil when no read proves it, as for a rollback) tells from the guest's
// snapshots that the effect is in place, so a resumed command confirms by reading and never
// sends twice.
func snapshotVerb(name, step string, decode func(f *Fields) SnapshotInput, success Outcome,
	judge func(in SnapshotInput, existing *proxmox.Snapshot) *Outcome, present func(exists bool) bool,
	op func(ctx context.Context, c *proxmox.Client, in SnapshotInput) (proxmox.TaskResult, error)) Verb {
	return onGuest(Spec[SnapshotInput]{
		Name:   name,
		Access: Write,
		Decode: decode,
		Locate: locateSnapshot,
		Describe: func(in SnapshotInput) []Bullet {
			return append(guestBullets(in.guest), Bullet{"snapshot", in.Snapshot})
		},
		Dispatch: func(ctx context.Context, x *Exec, in SnapshotInput) (Outcome, error) {
			snaps, err := x.Proxmox.Snapshots(ctx, in.guest)
			if err != nil {
				return Outcome{}, err
			}
			var existing *proxmox.Snapshot
			if i := slices.IndexFunc(snaps, func(s proxmox.Snapshot) bool { return s.Name == in.Snapshot }); i >= 0 {
				existing = &snaps[i]
			}
			if out := judge(in, existing); out != nil {
				if out.Status < 400 {
					x.Step(ctx, step, events.StepSkipped, "", out.Detail)
					out.Output = snapshotOutput(in, nil)
				}
				return *out, nil
			}
			var res proxmox.TaskResult
			_, err = x.Write(ctx, step, "", func(ctx context.Context) (Sent, error) {
				var err error
				res, err = op(ctx, x.Proxmox, in)
				return Sent{UPID: lastUPID(res.UPIDs)}, err
			})
			if err != nil {
				return Outcome{}, err
			}
			out := success
			out.UPID = lastUPID(res.UPIDs)
			out.Output = snapshotOutput(in, res.UPIDs)
			return out, nil
		},
		Confirm: confirmSnapshot(success, present),
	}, func(in *SnapshotInput) *GuestRef { return &in.GuestRef })
}

// judgeCreate (contract §9): a snapshot of that name whose description and memory state
// match → 200 already_present, else 409 snapshot_conflict naming the fields that differ.
// Descriptions compare without trailing white space (qemu-server strips it when it reads
// the config). The memory state is compared for VMs only (containers ignore include_memory);
// a stopped VM's snapshot without RAM matches include_memory, since PVE saves RAM only of a
// running VM and a create now would make the same snapshot.
func judgeCreate(in SnapshotInput, existing *proxmox.Snapshot) *Outcome {
	if existing == nil {
		return nil
	}
	var diff []string
	trim := func(s string) string { return strings.TrimRightFunc(s, unicode.IsSpace) }
	if trim(existing.Description) != trim(in.Description) {
		diff = append(diff, "description")
	}
	if in.guest.Type == proxmox.GuestQEMU && existing.HasMemory != in.IncludeMemory &&
		(existing.HasMemory || in.guest.Status != proxmox.StatusStopped) {
		diff = append(diff, "include_memory")
	}
	if len(diff) > 0 {
		return &Outcome{Status: 409, Result: ResultRefused, Reason: ReasonSnapshotConflict, Fields: diff,
			Detail: fmt.Sprintf("snapshot %q exists with a different %s", in.Snapshot, strings.Join(diff, " and "))}
	}
	return &Outcome{Status: 200, Result: ResultAlreadyPresent,
		Detail: fmt.Sprintf("snapshot %q exists with this description and memory state", in.Snapshot)}
}

// judgeDelete: a missing snapshot → 200 already_absent.
func judgeDelete(in SnapshotInput, existing *proxmox.Snapshot) *Outcome {
	if existing != nil {
		return nil
	}
	return &Outcome{Status: 200, Result: ResultAlreadyAbsent, Detail: fmt.Sprintf("snapshot %q does not exist", in.Snapshot)}
}

// judgeRollback: a missing snapshot → 404 snapshot_not_found naming the field.
func judgeRollback(in SnapshotInput, existing *proxmox.Snapshot) *Outcome {
	if existing != nil {
		return nil
	}
	return &Outcome{Status: 404, Result: ResultRefused, Reason: ReasonSnapshotNotFound, Fields: []string{"snapshot"},
		Detail: fmt.Sprintf("snapshot: the guest has no snapshot %q", in.Snapshot)}
}

// confirmSnapshot reads the guest's snapshots after an interrupted attempt: the effect in
// place → success. Nil when no read proves the effect (a rollback).
func confirmSnapshot(success Outcome, present func(exists bool) bool) func(ctx context.Context, x *Exec, in SnapshotInput) (Outcome, error) {
	if present == nil {
		return nil
	}
	return func(ctx context.Context, x *Exec, in SnapshotInput) (Outcome, error) {
		inPlace, err := x.untilInPlace(ctx, func(ctx context.Context) (bool, error) {
			snaps, err := x.Proxmox.Snapshots(ctx, in.guest)
			return err == nil && present(slices.ContainsFunc(snaps, func(s proxmox.Snapshot) bool { return s.Name == in.Snapshot })), err
		})
		switch {
		case err != nil:
			return Outcome{}, err
		case !inPlace:
			return Outcome{}, x.Unconfirmed("", "")
		}
		success.Output = snapshotOutput(in, nil)
		return success, nil
	}
}

func snapshotOutput(in SnapshotInput, upids []string) map[string]any {
	output := guestOutput(in.guest, upids)
	output["snapshot"] = in.Snapshot
	return output
}

func decodeSnapshotName(f *Fields) string {
	return f.String("snapshot", true, snapshotNamePattern.MatchString)
}

// VMSnapshotCreate takes a snapshot (include_memory: with the VM's RAM; ignored for containers).
func VMSnapshotCreate() Verb {
	return snapshotVerb("vm.snapshot.create", "create_snapshot",
		func(f *Fields) SnapshotInput {
			return SnapshotInput{GuestRef: decodeGuestRef(f), Snapshot: decodeSnapshotName(f),
				Description:   f.String("description", false, func(s string) bool { return len(s) <= 8192 }),
				IncludeMemory: f.Bool("include_memory", false)}
		},
		Outcome{Status: 201, Result: ResultCreated}, judgeCreate, func(exists bool) bool { return exists },
		func(ctx context.Context, c *proxmox.Client, in SnapshotInput) (proxmox.TaskResult, error) {
			return c.CreateSnapshot(ctx, in.guest, in.Snapshot, in.Description, in.IncludeMemory)
		})
}

// VMSnapshotDelete deletes a snapshot.
func VMSnapshotDelete() Verb {
	return snapshotVerb("vm.snapshot.delete", "delete_snapshot",
		func(f *Fields) SnapshotInput {
			return SnapshotInput{GuestRef: decodeGuestRef(f), Snapshot: decodeSnapshotName(f)}
		},
		Outcome{Status: 200, Result: ResultOK}, judgeDelete, func(exists bool) bool { return !exists },
		func(ctx context.Context, c *proxmox.Client, in SnapshotInput) (proxmox.TaskResult, error) {
			return c.DeleteSnapshot(ctx, in.guest, in.Snapshot)
		})
}

// VMSnapshotRollback rolls a guest back to a snapshot (start: start it afterwards).
func VMSnapshotRollback() Verb {
	return snapshotVerb("vm.snapshot.rollback", "rollback_snapshot",
		func(f *Fields) SnapshotInput {
			return SnapshotInput{GuestRef: decodeGuestRef(f), Snapshot: decodeSnapshotName(f), Start: f.Bool("start", false)}
		},
		Outcome{Status: 200, Result: ResultOK}, judgeRollback, nil,
		func(ctx context.Context, c *proxmox.Client, in SnapshotInput) (proxmox.TaskResult, error) {
			return c.RollbackSnapshot(ctx, in.guest, in.Snapshot, in.Start)
		})
}

// snapshotView is one entry of vm.snapshot.list's output (contract §9).
type snapshotView struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Created     string `json:"created"`
	Parent      string `json:"parent"`
	HasMemory   bool   `json:"has_memory"`
}

// VMSnapshotList lists a guest's snapshots, never the pseudo-snapshot `current` (a read).
func VMSnapshotList() Verb {
	return Spec[GuestRef]{
		Name:     "vm.snapshot.list",
		Access:   Read,
		Decode:   decodeGuestRef,
		Locate:   locateGuest,
		Resource: func(in GuestRef) string { return in.VM },
		Dispatch: func(ctx context.Context, x *Exec, in GuestRef) (Outcome, error) {
			snaps, err := x.Proxmox.Snapshots(ctx, in.guest)
			if err != nil {
				return Outcome{}, err
			}
			views := make([]snapshotView, 0, len(snaps))
			for _, s := range snaps {
				v := snapshotView{Name: s.Name, Description: s.Description, Parent: s.Parent, HasMemory: s.HasMemory}
				if !s.Created.IsZero() {
					v.Created = s.Created.UTC().Format(time.RFC3339)
				}
				views = append(views, v)
			}
			return Outcome{Status: 200, Result: ResultOK, Output: map[string]any{"vmid": in.VM, "snapshots": views}}, nil
		},
	}
}
