package proxmox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// DefaultTaskPollInterval is how often [Client.WaitTask] polls a task's status unless
// [WithTaskPollInterval] says otherwise.
const DefaultTaskPollInterval = 500 * time.Millisecond

// maxTaskPollErrors is how many consecutive transient poll failures WaitTask absorbs.
const maxTaskPollErrors = 3

// WithTaskPollInterval sets the interval between task status polls of [Client.WaitTask]
// (d <= 0: [DefaultTaskPollInterval]). Tests use a few milliseconds.
func WithTaskPollInterval(d time.Duration) ClientOption {
	return func(o *clientOptions) { o.taskPoll = d }
}

// TaskError is a Proxmox task that ended with an exit status other than "OK" or
// "WARNINGS: n" (both are success). Match it with errors.As.
type TaskError struct {
	UPID       string // the task
	Node       string // the node that ran it
	ExitStatus string // PVE's exit status, e.g. "VM 100 already running"
}

// Error renders "proxmox: task UPID on NODE failed: EXITSTATUS".
func (e *TaskError) Error() string {
	return fmt.Sprintf("proxmox: task %s on %s failed: %s", e.UPID, e.Node, e.ExitStatus)
}

// Is makes errors.Is(err, ErrNotFound / ErrAlreadyExists) work for tasks whose worker
// found the object missing ("snapshot 'x' does not exist") or present ("snapshot name 'x'
// already used").
func (e *TaskError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return notFoundMessage.MatchString(e.ExitStatus)
	case ErrAlreadyExists:
		return existsMessage.MatchString(e.ExitStatus) || alreadyUsed.MatchString(e.ExitStatus)
	}
	return false
}

// alreadyUsed is PVE's worker text for a snapshot name in use.
var alreadyUsed = regexp.MustCompile(`(?i)\balready used\b`)

// taskOK reports whether a stopped task's exit status is a success.
func taskOK(exit string) bool {
	return exit == "OK" || strings.HasPrefix(exit, "WARNINGS:")
}

// taskHookKey carries the TaskStarted callback in a context.
type taskHookKey struct{}

// WithTaskStarted returns a context under which every task this package starts (power,
// snapshots) is reported to fn(node, upid) as soon as PVE has answered with its UPID,
// before the task is waited for: callers use it to publish progress. fn runs on the
// calling goroutine and must not block.
func WithTaskStarted(ctx context.Context, fn func(node, upid string)) context.Context {
	return context.WithValue(ctx, taskHookKey{}, fn)
}

// taskStarted calls the context's TaskStarted hook, if any.
func taskStarted(ctx context.Context, node, upid string) {
	if fn, ok := ctx.Value(taskHookKey{}).(func(node, upid string)); ok && fn != nil {
		fn(node, upid)
	}
}

// WaitTask polls GET /nodes/{node}/tasks/{upid}/status every poll interval (see
// [WithTaskPollInterval]; the first poll is immediate) until the task has stopped. It
// returns nil when the exit status is "OK" or "WARNINGS: n", a *[TaskError] otherwise.
// Up to three consecutive transient poll failures ([IsTransient]: a node briefly
// unreachable) are absorbed; after that, or on any other failure, the poll's error is
// returned wrapped; ctx ends the wait with ctx.Err() wrapped. A poll never repeats the task.
func (c *Client) WaitTask(ctx context.Context, node, upid string) error {
	r := request{method: http.MethodGet, path: "/nodes/" + url.PathEscape(node) + "/tasks/" + url.PathEscape(upid) + "/status"}
	failures := 0
	for {
		var raw json.RawMessage
		err := c.do(ctx, r, &raw)
		if err == nil {
			failures = 0
			m, derr := flatObject(raw)
			if derr != nil {
				return fmt.Errorf("proxmox: waiting for task %s: %w", upid, unreadable(r, derr))
			}
			if m["status"] == "stopped" {
				exit := m["exitstatus"]
				if taskOK(exit) {
					return nil
				}
				return &TaskError{UPID: upid, Node: node, ExitStatus: scrub(exit, c.secrets)}
			}
		} else {
			failures++
			if !IsTransient(err) || failures > maxTaskPollErrors || ctx.Err() != nil {
				return fmt.Errorf("proxmox: waiting for task %s: %w", upid, err)
			}
		}
		t := time.NewTimer(c.taskPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("proxmox: waiting for task %s: %w", upid, ctx.Err())
		case <-t.C:
		}
	}
}

// runTask POSTs (or DELETEs) r, which answers a UPID, reports it to the context's hook and
// waits for the task. It returns the UPID ("" when the request failed) and the error.
func (c *Client) runTask(ctx context.Context, node string, r request) (string, error) {
	var upid string
	if err := c.do(ctx, r, &upid); err != nil {
		return "", err
	}
	if upid == "" {
		return "", unreadable(r, errors.New("no task id in the answer"))
	}
	taskStarted(ctx, node, upid)
	return upid, c.WaitTask(ctx, node, upid)
}
