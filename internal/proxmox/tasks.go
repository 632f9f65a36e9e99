package proxmox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// AdaptiveTaskPoll, as the interval of [WithTaskPollInterval], makes [Client.WaitTask] poll
// on its adaptive curve instead of at a fixed interval. It marks the setting and is never
// waited for.
const AdaptiveTaskPoll time.Duration = math.MaxInt64

// DefaultTaskPollInterval is the task poll setting of a client given no
// [WithTaskPollInterval]: the adaptive curve of [Client.WaitTask].
const DefaultTaskPollInterval = AdaptiveTaskPoll

// The adaptive curve of [Client.WaitTask] (see there).
const (
	// TaskPollMinInterval is the shortest pause between two polls of a task's status.
	TaskPollMinInterval = 100 * time.Millisecond
	// TaskPollShare is the share of the time waited so far that the pause before the next poll
	// lasts: a task is seen stopped at most this share of its duration after its end.
	TaskPollShare = 0.05
	// TaskPollMaxInterval caps the pause between polls.
	TaskPollMaxInterval = 2 * time.Second
	// TaskLogFrom is how long a task is waited for before its log is read for progress.
	TaskLogFrom = time.Second
	// TaskLogInterval is the shortest time between two reads of a task's log for progress.
	TaskLogInterval = 2 * time.Second
)

// maxTaskPollErrors is how many consecutive transient poll failures WaitTask absorbs.
const maxTaskPollErrors = 3

// WithTaskPollInterval makes [Client.WaitTask] poll a task's status every d, from the first
// poll on, and read its log (for progress) at every poll; tests use a few milliseconds.
// d <= 0 or [AdaptiveTaskPoll]: the adaptive curve, the default.
func WithTaskPollInterval(d time.Duration) ClientOption {
	return func(o *clientOptions) { o.taskPoll = d }
}

// pollCurve is the schedule of a task wait: each pause share of the time waited so far,
// at least floor and at most limit; the log is read at the polls from logFrom on, at least
// logEvery apart.
type pollCurve struct {
	floor, limit      time.Duration
	share             float64
	logFrom, logEvery time.Duration
}

// adaptiveCurve is the default schedule (the TaskPoll and TaskLog constants).
func adaptiveCurve() pollCurve {
	return pollCurve{floor: TaskPollMinInterval, limit: TaskPollMaxInterval, share: TaskPollShare,
		logFrom: TaskLogFrom, logEvery: TaskLogInterval}
}

// curve is the client's schedule: adaptive, or a fixed interval set by WithTaskPollInterval.
func (c *Client) curve() pollCurve {
	if c.taskPoll <= 0 || c.taskPoll == AdaptiveTaskPoll {
		return adaptiveCurve()
	}
	return pollCurve{floor: c.taskPoll, limit: c.taskPoll}
}

// next is the pause after a poll made age into the wait.
func (p pollCurve) next(age time.Duration) time.Duration {
	return min(max(time.Duration(float64(age)*p.share), p.floor), p.limit)
}

// readsLog reports whether a poll made age into the wait also reads the task's log, the last
// read having been made lastRead into it (negative: none yet).
func (p pollCurve) readsLog(age, lastRead time.Duration) bool {
	return age >= p.logFrom && (lastRead < 0 || age-lastRead >= p.logEvery)
}

// TaskError is a Proxmox task that ended with an exit status other than "OK" or
// "WARNINGS: n" (both are success). Match it with errors.As.
type TaskError struct {
	UPID       string // the task
	Node       string // the node that ran it
	ExitStatus string // PVE's exit status, e.g. "VM 100 already running"
	// LogError is the task log's last "ERROR: …" line without its prefix, when the log has one
	// that says more than the exit status ("migration aborted" and "job errors" do not say
	// why); "" otherwise. Secrets are scrubbed.
	LogError string
}

// Error renders "proxmox: task UPID on NODE failed: EXITSTATUS", and the log's error line.
func (e *TaskError) Error() string {
	msg := fmt.Sprintf("proxmox: task %s on %s failed: %s", e.UPID, e.Node, e.ExitStatus)
	if e.LogError != "" {
		msg += " (log: " + e.LogError + ")"
	}
	return msg
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

// progressHookKey carries the TaskProgress callback in a context.
type progressHookKey struct{}

// WithTaskProgress returns a context under which [Client.WaitTask] (and so every task this
// package starts and waits for: power, snapshots, provisioning, downloads, …) reads the
// task's log while it runs and reports the progress it finds to fn(node, upid, p), once per
// log read that finds one (the same progress again when no new progress line came). fn runs
// on the waiting goroutine and must return quickly. Without it no log is read.
func WithTaskProgress(ctx context.Context, fn func(node, upid string, p TaskProgress)) context.Context {
	return context.WithValue(ctx, progressHookKey{}, fn)
}

// progressHook is the context's TaskProgress hook, nil when none.
func progressHook(ctx context.Context) func(node, upid string, p TaskProgress) {
	fn, _ := ctx.Value(progressHookKey{}).(func(node, upid string, p TaskProgress))
	return fn
}

// WaitTask waits until the task has stopped. It returns nil when the exit status is "OK" or
// "WARNINGS: n", a *[TaskError] otherwise.
//
// While a [Client.Watch] of c runs, the watch wakes it and no status is polled (see there);
// otherwise, or when the watch stops first, it polls GET /nodes/{node}/tasks/{upid}/status.
//
// The polls follow the client's curve. Adaptive (the default): the first poll is immediate,
// then each pause lasts a twentieth of the time waited so far, at least 100 ms and at most
// 2 s: every 100 ms for the first 2 s, every 2 s from 40 s on. A task is seen stopped at most
// 100 ms or 5 % of its duration after its end, whichever is more (2 s at most); a 3 s task
// costs 30 polls, a 60 s task 93 (121 at a fixed 500 ms).
// [WithTaskPollInterval] sets a fixed interval instead.
//
// Under [WithTaskProgress], a poll from the first second on that finds the task running also
// reads the task's log from the first line not yet read (GET …/log?start=N&limit=…), at most
// every 2 s (at every poll with a fixed interval), and reports the progress its lines give
// ([TaskProgress]); a failed log read is skipped and never fails the wait.
//
// Up to three consecutive transient status poll failures ([IsTransient]: a node briefly
// unreachable) are absorbed; after that, or on any other failure, the poll's error is
// returned wrapped; ctx ends the wait with ctx.Err() wrapped. A poll never repeats the task.
func (c *Client) WaitTask(ctx context.Context, node, upid string) error {
	if c.plan != nil && IsPlannedUPID(upid) {
		return nil // a dry run's task never ran (see Planning)
	}
	if w := c.watching(); w != nil {
		if watched, err := c.waitWatched(ctx, w, node, upid); watched {
			return err
		}
	}
	r := request{method: http.MethodGet, path: taskPath(node, upid) + "/status"}
	curve, hook := c.curve(), progressHook(ctx)
	var tl *taskLog
	if hook != nil {
		tl = newTaskLog(node, upid)
	}
	begun := time.Now()
	lastLog := time.Duration(-1)
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
				return &TaskError{UPID: upid, Node: node, ExitStatus: scrub(exit, c.secrets),
					LogError: scrub(c.taskLogError(ctx, node, upid, exit), c.secrets)}
			}
			if age := time.Since(begun); tl != nil && curve.readsLog(age, lastLog) {
				lastLog = age
				c.reportProgress(ctx, tl, hook)
			}
		} else {
			failures++
			if !IsTransient(err) || failures > maxTaskPollErrors || ctx.Err() != nil {
				return fmt.Errorf("proxmox: waiting for task %s: %w", upid, err)
			}
		}
		t := time.NewTimer(curve.next(time.Since(begun)))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("proxmox: waiting for task %s: %w", upid, ctx.Err())
		case <-t.C:
		}
	}
}

// taskLogErrorLine is an error line of a worker's log, with the time stamp migrations print
// first: "ERROR: Backup of VM 102 failed - …", "2026-12-01 10:00:02 ERROR: migration aborted
// (duration 00:00:02): …". The task's own last line, "TASK ERROR: …", is not one.
var taskLogErrorLine = regexp.MustCompile(`^(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d )?ERROR: (.*)$`)

// taskLogError is the last "ERROR: " line of a failed task's log (its first pages), without
// the prefix, when it says more than exit; "" when there is none or the log cannot be read.
func (c *Client) taskLogError(ctx context.Context, node, upid, exit string) string {
	var last string
	_ = c.scanTaskLog(ctx, node, upid, func(line string) {
		if m := taskLogErrorLine.FindStringSubmatch(line); m != nil && strings.TrimSpace(m[1]) != "" {
			last = strings.TrimSpace(m[1])
		}
	})
	if last == "" || last == exit {
		return ""
	}
	return last
}

// scanTaskLog calls line with each line of the first pages of a task's log (taskLogMaxPages of
// taskLogPage lines), in order, each once. It returns the error of the first read that failed.
func (c *Client) scanTaskLog(ctx context.Context, node, upid string, line func(string)) error {
	tl := newTaskLog(node, upid)
	for range taskLogMaxPages {
		var lines []taskLogLine
		q := url.Values{"start": {strconv.Itoa(tl.seen)}, "limit": {strconv.Itoa(taskLogPage)}}
		if err := c.do(ctx, request{method: http.MethodGet, path: tl.path, query: q}, &lines); err != nil {
			return err
		}
		for _, ln := range lines {
			if ln.N <= tl.seen {
				continue
			}
			tl.seen = ln.N
			line(ln.T)
		}
		if len(lines) < taskLogPage {
			return nil
		}
	}
	return nil
}

// reportProgress reads tl's new lines and reports the task's progress to hook, if its log
// gives one. A failed read is logged at debug level and skipped.
func (c *Client) reportProgress(ctx context.Context, tl *taskLog, hook func(node, upid string, p TaskProgress)) {
	p, ok, err := c.readTaskLog(ctx, tl)
	if err != nil {
		c.log.LogAttrs(ctx, slog.LevelDebug, "task log not read", slog.String("upid", tl.upid), slog.String("err", err.Error()))
	}
	if ok {
		hook(tl.node, tl.upid, p)
	}
}

// taskPath is "/nodes/{node}/tasks/{upid}".
func taskPath(node, upid string) string {
	return "/nodes/" + url.PathEscape(node) + "/tasks/" + url.PathEscape(upid)
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
	if w := c.watching(); w != nil {
		w.note(ctx, upid)
	}
	taskStarted(ctx, node, upid)
	return upid, c.WaitTask(ctx, node, upid)
}

// StopTask stops the running task upid on node (DELETE /nodes/{node}/tasks/{upid}): PVE sends
// its worker TERM, and the task ends with an error ("received interrupt", "interrupted by
// signal" for vzdump), leaving what it had not done undone. A task that already ended is left
// as it is (no error): read its status to know how it ended. Errors: the request's.
func (c *Client) StopTask(ctx context.Context, node, upid string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: taskPath(node, upid)}, nil)
}
