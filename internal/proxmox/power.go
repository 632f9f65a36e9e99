package proxmox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
)

// TaskResult is what a guest operation did: the UPIDs of the Proxmox tasks it ran, in
// order, and whether it was a no-op (nothing needed doing, no task was started). It is
// returned with errors too: UPIDs then lists the tasks started before the failure (the
// failed one included).
type TaskResult struct {
	UPIDs []string
	NoOp  bool
}

var (
	// alreadyRunning / notRunning are PVE's answers when the state changed between our
	// status read and the request ("CT 101 already running", "VM 100 not running").
	alreadyRunning = regexp.MustCompile(`(?i)\b(?:VM|CT) \d+ already running\b`)
	notRunning     = regexp.MustCompile(`(?i)\b(?:VM|CT) \d+ not running\b`)
)

// matchesText reports whether err is an *APIError or a *TaskError whose text matches re.
func matchesText(err error, re *regexp.Regexp) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		return re.MatchString(ae.Message)
	}
	var te *TaskError
	if errors.As(err, &te) {
		return re.MatchString(te.ExitStatus)
	}
	return false
}

// powerTask runs POST {guest}/status/{action} and waits for its task, appending its UPID.
func (c *Client) powerTask(ctx context.Context, g Guest, action string, form url.Values, res *TaskResult) error {
	if len(form) == 0 {
		form = nil // no body at all: go-proxmox would label an empty one JSON
	}
	upid, err := c.runTask(ctx, g.Node, request{method: http.MethodPost, path: g.basePath() + "/status/" + action, form: form})
	if upid != "" {
		res.UPIDs = append(res.UPIDs, upid)
	}
	return err
}

// Start starts g (POST .../status/start) and waits for the task. The guest's status is read
// first (GET .../status/current), not taken from g:
//   - running → NoOp, no request (also when PVE reports "already running" because another
//     client started it meanwhile);
//   - paused (QEMU) → it is resumed (POST .../status/resume), one task;
//   - stopped → started. A template cannot start: PVE's task fails → *[TaskError].
//
// Errors: [ErrVMNotFound] when g is gone from its node, *TaskError, or the request's error.
func (c *Client) Start(ctx context.Context, g Guest) (TaskResult, error) {
	st, err := c.guestStatus(ctx, g)
	if err != nil {
		return TaskResult{}, err
	}
	g.Status = st
	return c.StartKnown(ctx, g)
}

// StartKnown is [Client.Start] for a caller that knows g's status already — it has just read
// it (g from [Client.ResolveGuest]) or has just created g, stopped: it decides from g.Status
// and sends no GET .../status/current. A guest started by someone else meanwhile is still a
// NoOp (PVE's "already running"). Errors: as Start's.
func (c *Client) StartKnown(ctx context.Context, g Guest) (TaskResult, error) {
	var res TaskResult
	if err := g.check(); err != nil {
		return res, err
	}
	switch g.Status {
	case StatusRunning:
		return TaskResult{NoOp: true}, nil
	case StatusPaused:
		return res, c.powerTask(ctx, g, "resume", nil, &res)
	}
	err := c.powerTask(ctx, g, "start", nil, &res)
	if err != nil && matchesText(err, alreadyRunning) {
		res.NoOp = true
		return res, nil
	}
	return res, err
}

// Stop shuts g down gracefully (POST .../status/shutdown: ACPI for VMs, init for
// containers) or, with force, stops it at once (POST .../status/stop), and waits for the
// task. A stopped guest → NoOp without a request (also when PVE answers "not running"
// because it stopped meanwhile). A paused VM cannot shut down gracefully: PVE refuses it
// (*[APIError] "VM is paused - cannot shutdown"); force stops it.
// Errors: [ErrVMNotFound], *[TaskError], or the request's error.
func (c *Client) Stop(ctx context.Context, g Guest, force bool) (TaskResult, error) {
	st, err := c.guestStatus(ctx, g)
	if err != nil {
		return TaskResult{}, err
	}
	g.Status = st
	return c.StopKnown(ctx, g, force)
}

// StopKnown is [Client.Stop] for a caller that has just read g's status itself (g from
// [Client.ResolveGuest]): it decides from g.Status and sends no GET .../status/current. A
// guest stopped meanwhile is still a NoOp (PVE's "not running"). Errors: as Stop's.
func (c *Client) StopKnown(ctx context.Context, g Guest, force bool) (TaskResult, error) {
	var res TaskResult
	if err := g.check(); err != nil {
		return res, err
	}
	if g.Status == StatusStopped {
		return TaskResult{NoOp: true}, nil
	}
	action := "shutdown"
	if force {
		action = "stop"
	}
	err := c.powerTask(ctx, g, action, nil, &res)
	if err != nil && len(res.UPIDs) == 0 && matchesText(err, notRunning) {
		res.NoOp = true
		return res, nil
	}
	return res, err
}

// Reboot reboots a running g and waits: POST .../status/reboot (a clean shutdown and start
// by PVE); with force, a VM is reset (POST .../status/reset) and a container, which has no
// reset, is stopped and started again (two tasks, two UPIDs). A guest that is not running
// (stopped) → [ErrVMNotRunning] without a request; a paused VM can only be reset (PVE
// refuses a clean reboot of a paused VM).
// Errors: [ErrVMNotRunning], [ErrVMNotFound], *[TaskError], or the request's error.
func (c *Client) Reboot(ctx context.Context, g Guest, force bool) (TaskResult, error) {
	var res TaskResult
	st, err := c.guestStatus(ctx, g)
	if err != nil {
		return res, err
	}
	if st != StatusRunning && st != StatusPaused {
		return res, fmt.Errorf("%w: %s %d is %s", ErrVMNotRunning, g.Type, g.VMID, st)
	}
	switch {
	case !force:
		err = c.powerTask(ctx, g, "reboot", nil, &res)
	case g.Type == GuestQEMU:
		err = c.powerTask(ctx, g, "reset", nil, &res)
	default:
		if err = c.powerTask(ctx, g, "stop", nil, &res); err == nil {
			err = c.powerTask(ctx, g, "start", nil, &res)
		}
	}
	return res, notRunningErr(err)
}

// notRunningErr turns PVE's "VM 100 not running" refusal into ErrVMNotRunning (wrapping it).
func notRunningErr(err error) error {
	if err != nil && matchesText(err, notRunning) {
		return fmt.Errorf("%w: %w", ErrVMNotRunning, err)
	}
	return err
}

// Suspend pauses a running VM (POST .../status/suspend, in memory) and waits. Containers →
// [ErrUnsupportedForContainer] and a stopped VM → [ErrVMNotRunning], both without a
// request; an already paused VM → NoOp.
// Errors: those, [ErrVMNotFound], *[TaskError], or the request's error.
func (c *Client) Suspend(ctx context.Context, g Guest) (TaskResult, error) {
	var res TaskResult
	if g.Type == GuestLXC {
		return res, fmt.Errorf("%w: suspend of CT %d", ErrUnsupportedForContainer, g.VMID)
	}
	st, err := c.guestStatus(ctx, g)
	if err != nil {
		return res, err
	}
	switch st {
	case StatusPaused:
		return TaskResult{NoOp: true}, nil
	case StatusRunning:
	default:
		return res, fmt.Errorf("%w: %s %d is %s", ErrVMNotRunning, g.Type, g.VMID, st)
	}
	return res, notRunningErr(c.powerTask(ctx, g, "suspend", nil, &res))
}

// Resume continues a paused VM (POST .../status/resume) and waits. The no-op rule: a
// running guest that is not paused (any running container, a running VM) → NoOp without a
// request; a stopped guest → [ErrVMNotRunning] (resume does not start it; use Start).
// Errors: those, [ErrVMNotFound], *[TaskError], or the request's error.
func (c *Client) Resume(ctx context.Context, g Guest) (TaskResult, error) {
	var res TaskResult
	st, err := c.guestStatus(ctx, g)
	if err != nil {
		return res, err
	}
	switch st {
	case StatusRunning:
		return TaskResult{NoOp: true}, nil
	case StatusPaused:
	default:
		return res, fmt.Errorf("%w: %s %d is %s", ErrVMNotRunning, g.Type, g.VMID, st)
	}
	return res, notRunningErr(c.powerTask(ctx, g, "resume", nil, &res))
}

// RebootNode asks node to reboot: POST /nodes/{node}/status command=reboot. PVE answers
// null (no task): the node then goes away for a while and its guests are stopped by the
// reboot. Errors: see the package doc (an *APIError 403 without Sys.PowerMgmt).
func (c *Client) RebootNode(ctx context.Context, node string) error {
	if node == "" {
		return &APIError{Method: http.MethodPost, Path: "/nodes//status", Status: http.StatusNotFound, Message: "empty node name"}
	}
	r := request{method: http.MethodPost, path: "/nodes/" + url.PathEscape(node) + "/status", form: url.Values{"command": {"reboot"}}}
	return c.do(ctx, r, nil)
}
