package proxmox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
)

// Guest deletion errors; they are returned wrapped around PVE's refusal, match them with
// errors.Is.
var (
	// ErrVMRunning: PVE refuses to destroy a running (or paused) guest: "VM 100 is running -
	// destroy failed", "unable to destroy CT 200 - container is running".
	ErrVMRunning = errors.New("proxmox: vm is running")
	// ErrVMProtected: the guest's configuration has protection set: "can't remove VM 100 -
	// protection mode enabled".
	ErrVMProtected = errors.New("proxmox: vm is protected")
)

var (
	// destroyRunning is qemu-server's and pve-container's refusal of a running guest.
	destroyRunning = regexp.MustCompile(`(?i)\bis running - destroy failed\b|\bunable to destroy CT \d+ - container is running\b`)
	// destroyProtected is PVE's check_protection refusal.
	destroyProtected = regexp.MustCompile(`(?i)\bprotection mode enabled\b`)
)

// DeleteOptions are the parameters of [Client.DeleteGuest].
type DeleteOptions struct {
	// Purge removes the vmid from the related configurations as well: backup jobs,
	// replication jobs and HA (PVE's purge).
	Purge bool
	// DestroyUnreferencedDisks also destroys the disks of the vmid on every enabled storage
	// that the guest's configuration does not reference (PVE's destroy-unreferenced-disks).
	DestroyUnreferencedDisks bool
}

// GuestProtected reads g's configuration (GET /nodes/{node}/{qemu|lxc}/{vmid}/config) and
// reports whether it has protection set (protection: 1), which makes PVE refuse to remove the
// guest and its disks. Errors: [ErrVMNotFound] when g is gone from its node, or the request's
// error.
func (c *Client) GuestProtected(ctx context.Context, g Guest) (bool, error) {
	if err := g.check(); err != nil {
		return false, err
	}
	var m flatMap
	if err := c.do(ctx, request{method: http.MethodGet, path: g.basePath() + "/config"}, &m); err != nil {
		return false, guestNotFound(g, err)
	}
	return flatBool(m, "protection"), nil
}

// DeleteGuest destroys g with all the volumes it owns: DELETE
// /nodes/{node}/{qemu|lxc}/{vmid} with purge and destroy-unreferenced-disks (both always
// sent, 1 or 0; LXC's force is never sent, so a running container is refused like a running
// VM), then waits for its task (qmdestroy, vzdestroy) and returns its UPID. PVE's refusals,
// synchronous or from the worker's repeated checks, come back as sentinels wrapping the
// *[APIError] or *[TaskError]: a running guest → [ErrVMRunning], protection →
// [ErrVMProtected], no configuration of g on g.Node → [ErrVMNotFound]. Other errors: a
// *TaskError (the worker failed: a lock, a base volume still used by a linked clone) with its
// UPID, or the request's error; a lost answer ([ErrAnswerLost]) must be confirmed by reading
// whether the guest still exists, never by a second DELETE.
func (c *Client) DeleteGuest(ctx context.Context, g Guest, opts DeleteOptions) (TaskResult, error) {
	var res TaskResult
	if err := g.check(); err != nil {
		return res, err
	}
	q := url.Values{"purge": {boolParam(opts.Purge)}, "destroy-unreferenced-disks": {boolParam(opts.DestroyUnreferencedDisks)}}
	upid, err := c.runTask(ctx, g.Node, request{method: http.MethodDelete, path: g.basePath(), query: q})
	if upid != "" {
		res.UPIDs = append(res.UPIDs, upid)
	}
	switch {
	case err == nil:
		return res, nil
	case matchesText(err, destroyRunning):
		return res, fmt.Errorf("%w: %s %d on %s: %w", ErrVMRunning, g.Type, g.VMID, g.Node, err)
	case matchesText(err, destroyProtected):
		return res, fmt.Errorf("%w: %s %d on %s: %w", ErrVMProtected, g.Type, g.VMID, g.Node, err)
	}
	return res, guestNotFound(g, err)
}
