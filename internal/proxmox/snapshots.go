package proxmox

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"
)

// CurrentSnapshot is PVE's pseudo-snapshot naming the guest's present state ("You are
// here!"). It is never listed by [Client.Snapshots] and never addressable.
const CurrentSnapshot = "current"

// Snapshot is one snapshot of a VM or container.
type Snapshot struct {
	Name        string
	Description string
	Created     time.Time // snaptime, UTC; zero when PVE gave none
	Parent      string    // the snapshot this one was taken on top of; "" for a root
	HasMemory   bool      // QEMU only: the VM's RAM was saved (vmstate)
}

// reserved refuses the pseudo-snapshot before any request is made.
func reserved(name string) error {
	if name == CurrentSnapshot {
		return fmt.Errorf("%w: %q", ErrReservedSnapshotName, name)
	}
	return nil
}

// Snapshots lists g's snapshots (GET .../snapshot) without the "current" entry, oldest
// first (by creation time, then name). Errors: [ErrVMNotFound] when g is gone from its
// node, else the request's error.
func (c *Client) Snapshots(ctx context.Context, g Guest) ([]Snapshot, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	r := request{method: http.MethodGet, path: g.basePath() + "/snapshot"}
	list, err := getList(ctx, c, r, func(it map[string]string) Snapshot {
		s := Snapshot{Name: it["name"], Description: it["description"], Parent: it["parent"], HasMemory: flatBool(it, "vmstate")}
		if t := flatInt(it, "snaptime"); t > 0 {
			s.Created = time.Unix(t, 0).UTC()
		}
		return s
	})
	if err != nil {
		return nil, guestNotFound(g, err)
	}
	list = slices.DeleteFunc(list, func(s Snapshot) bool { return s.Name == CurrentSnapshot })
	slices.SortStableFunc(list, func(a, b Snapshot) int {
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.Name, b.Name))
	})
	return list, nil
}

// guestNotFound wraps a not-found refusal of a guest path as ErrVMNotFound.
func guestNotFound(g Guest, err error) error {
	if err != nil && isNotFound(err) {
		return fmt.Errorf("%w: %s %d on %s: %w", ErrVMNotFound, g.Type, g.VMID, g.Node, err)
	}
	return err
}

// CreateSnapshot takes snapshot name of g (POST .../snapshot snapname, description when not
// empty, vmstate=1 when includeMemory and g is a QEMU VM: containers ignore it) and waits
// for the task. name "current" → [ErrReservedSnapshotName] without a request; an existing
// name → a *[TaskError] matching [ErrAlreadyExists] (PVE's worker: "snapshot name 'x'
// already used").
// Errors: those, *[TaskError], [ErrVMNotFound], or the request's error.
func (c *Client) CreateSnapshot(ctx context.Context, g Guest, name, description string, includeMemory bool) (TaskResult, error) {
	var res TaskResult
	if err := reserved(name); err != nil {
		return res, err
	}
	if err := g.check(); err != nil {
		return res, err
	}
	form := url.Values{"snapname": {name}}
	if description != "" {
		form.Set("description", description)
	}
	if includeMemory && g.Type == GuestQEMU {
		form.Set("vmstate", "1")
	}
	err := c.snapshotTask(ctx, g, request{method: http.MethodPost, path: g.basePath() + "/snapshot", form: form}, &res)
	return res, err
}

// DeleteSnapshot deletes snapshot name of g (DELETE .../snapshot/{snapname}) and waits.
// Its children are re-parented by PVE. name "current" → [ErrReservedSnapshotName] without a
// request; a missing snapshot → a *[TaskError] matching [ErrNotFound] (PVE's worker:
// "snapshot 'x' does not exist").
// Errors: those, *[TaskError], or the request's error.
func (c *Client) DeleteSnapshot(ctx context.Context, g Guest, name string) (TaskResult, error) {
	var res TaskResult
	if err := reserved(name); err != nil {
		return res, err
	}
	if err := g.check(); err != nil {
		return res, err
	}
	err := c.snapshotTask(ctx, g, request{method: http.MethodDelete, path: g.basePath() + "/snapshot/" + url.PathEscape(name)}, &res)
	return res, err
}

// RollbackSnapshot rolls g back to snapshot name (POST .../snapshot/{snapname}/rollback,
// start=1 when start: PVE starts the guest afterwards) and waits. name "current" →
// [ErrReservedSnapshotName] without a request; a missing snapshot → a *[TaskError] matching
// [ErrNotFound]. Errors: those, *[TaskError], or the request's error.
func (c *Client) RollbackSnapshot(ctx context.Context, g Guest, name string, start bool) (TaskResult, error) {
	var res TaskResult
	if err := reserved(name); err != nil {
		return res, err
	}
	if err := g.check(); err != nil {
		return res, err
	}
	var form url.Values // nil: no body
	if start {
		form = url.Values{"start": {"1"}}
	}
	err := c.snapshotTask(ctx, g, request{method: http.MethodPost, path: g.basePath() + "/snapshot/" + url.PathEscape(name) + "/rollback", form: form}, &res)
	return res, err
}

// snapshotTask runs a snapshot request that answers a UPID and waits for it.
func (c *Client) snapshotTask(ctx context.Context, g Guest, r request, res *TaskResult) error {
	upid, err := c.runTask(ctx, g.Node, r)
	if upid != "" {
		res.UPIDs = append(res.UPIDs, upid)
	}
	return err
}
