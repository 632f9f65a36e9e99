package handlers

import (
	"context"
	"regexp"
	"slices"
	"time"

	"github.com/proxbus/proxbus/proxmox"
	"github.com/proxbus/proxbus/store"
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

// locateSnapshot refuses the reserved name before any request, then resolves the guest.
func locateSnapshot(ctx context.Context, c *proxmox.Client, in SnapshotInput) (SnapshotInput, error) {
	if in.Snapshot == reservedSnapshot {
		return in, proxmox.ErrReservedSnapshotName
	}
	ref, err := locateGuest(ctx, c, in.GuestRef)
	in.GuestRef = ref
	return in, err
}

// snapshotVerb builds a snapshot write verb around op. present (nil when no read proves it, as
// for a rollback) tells from the guest's snapshots that the effect is in place, so a resumed
// command confirms by reading and never sends twice.
func snapshotVerb(name, step string, decode func(f *Fields) SnapshotInput, success Outcome, present func(exists bool) bool,
	op func(ctx context.Context, c *proxmox.Client, in SnapshotInput) (proxmox.TaskResult, error)) Verb {
	return Spec[SnapshotInput]{
		Name:        name,
		Access:      Write,
		Decode:      decode,
		Locate:      locateSnapshot,
		Resource:    func(in SnapshotInput) string { return in.VM },
		JournalVMID: func(in SnapshotInput) int64 { return in.guest.VMID },
		Exclusive:   func(in SnapshotInput) (string, string) { return store.KindGuest, in.VM },
		Describe: func(in SnapshotInput) []Bullet {
			return append(guestBullets(in.guest), Bullet{"snapshot", in.Snapshot})
		},
		Dispatch: func(ctx context.Context, x *Exec, in SnapshotInput) (Outcome, error) {
			var res proxmox.TaskResult
			_, err := x.Write(ctx, step, "", func(ctx context.Context) (Sent, error) {
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
	}
}

// confirmSnapshot reads the guest's snapshots after an interrupted attempt: the effect in
// place → success. Nil when no read proves the effect (a rollback).
func confirmSnapshot(success Outcome, present func(exists bool) bool) func(ctx context.Context, x *Exec, in SnapshotInput) (Outcome, error) {
	if present == nil {
		return nil
	}
	return func(ctx context.Context, x *Exec, in SnapshotInput) (Outcome, error) {
		inPlace, err := untilInPlace(ctx, func(ctx context.Context) (bool, error) {
			snaps, err := x.Proxmox.Snapshots(ctx, in.guest)
			return err == nil && present(slices.ContainsFunc(snaps, func(s proxmox.Snapshot) bool { return s.Name == in.Snapshot })), err
		})
		switch {
		case err != nil:
			return Outcome{}, err
		case !inPlace:
			return unconfirmedWrite(), nil
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
		Outcome{Status: 201, Result: ResultCreated}, func(exists bool) bool { return exists },
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
		Outcome{Status: 200, Result: ResultOK}, func(exists bool) bool { return !exists },
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
		Outcome{Status: 200, Result: ResultOK}, nil,
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
