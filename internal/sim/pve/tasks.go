package simpve

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// taskOK is PVE's exit status of a successful task.
const taskOK = "OK"

// task is one worker task. Tasks run on simulated time: a task ends when a request (or an
// observation) finds its end time passed; its effect is applied then, in end-time order.
type task struct {
	upid   string
	node   string
	typ    string // worker type, "qmstart"
	vmid   int64
	user   string
	end    time.Time
	done   bool
	exit   string
	fault  string            // exit status to end with instead of OK ("" none)
	effect func(t time.Time) // applied when the task ends successfully; Server.mu held
	guest  *guest
	// log returns the task's log lines once the fraction frac (0–1) of its run has passed, as
	// PVE's worker writes them (e.g. vzdump's "INFO: ... % (... of ...)" lines); nil: the task
	// logs only its end. The lines for a larger frac must begin with those for a smaller one
	// (a log only grows); "TASK OK" / "TASK ERROR: …" is appended when the task ends.
	log func(frac float64) []string
	// begun is when the task started; ended when it ended (zero while it runs).
	begun, ended time.Time
	// listed: the task has been written to its node's active file (tasklist.go).
	listed bool
	// what the task's clients asked: status polls, log reads, log lines answered, lines
	// answered again (at or below logServedTo, the highest line number answered).
	statusPolls, logReads, logLinesServed, logRereads, logServedTo int
}

// succeeded reports whether an exit status is a success ("OK" or "WARNINGS: n").
func succeeded(exit string) bool { return exit == taskOK || strings.HasPrefix(exit, "WARNINGS:") }

// startTask creates a task of typ for g that applies effect when it ends successfully,
// takes g's lock (and shows configLock, if any) while it runs, and answers its UPID.
// failure, when not empty, is the exit status of a check PVE runs inside the worker
// (e.g. "VM 100 already running"): the task then fails with it. An injected FailTask
// fault takes precedence. Server.mu is held.
func (s *Server) startTask(c *call, g *guest, typ, configLock, failure string, effect func(t time.Time)) answer {
	return s.startLoggedTask(c, g, typ, configLock, failure, effect, nil)
}

// startLoggedTask is startTask for a task that writes log lines as it runs (see task.log).
func (s *Server) startLoggedTask(c *call, g *guest, typ, configLock, failure string, effect func(t time.Time), log func(frac float64) []string) answer {
	return s.startTaskAs(c, g, strconv.FormatInt(g.vmid, 10), typ, configLock, failure, effect, log)
}

// startTaskAs is startLoggedTask for a task whose worker id is id rather than g's vmid (a
// volume's deletion, "100@local").
func (s *Server) startTaskAs(c *call, g *guest, id, typ, configLock, failure string, effect func(t time.Time), log func(frac float64) []string) answer {
	now := time.Now()
	s.state.pid++
	u := proxmox.UPID{
		Node: g.node, PID: s.state.pid, PStart: 0x00123456 + s.state.pid, StartTime: now.Truncate(time.Second).UTC(),
		Type: typ, ID: id, User: c.tokenID,
	}
	t := &task{upid: u.String(), node: g.node, typ: typ, vmid: g.vmid, user: c.tokenID, end: now.Add(s.taskRun(s.state.pid)), effect: effect, guest: g, log: log, begun: now}
	key := faultKey(g.node, g.vmid)
	if q := s.taskFaults[key]; len(q) > 0 {
		t.fault = q[0]
		if len(q) == 1 {
			delete(s.taskFaults, key)
		} else {
			s.taskFaults[key] = q[1:]
		}
	}
	if t.fault == "" {
		t.fault = failure
	}
	s.state.tasks = append(s.state.tasks, t)
	g.task, g.lock = t.upid, configLock
	if s.taskDur <= 0 {
		s.finishTask(t, now)
	}
	return ok(t.upid)
}

// taskRun is how long the API's task with pid n runs (see Options.TaskSpread). Server.mu is
// held.
func (s *Server) taskRun(n int64) time.Duration {
	if s.taskDur <= 0 || s.taskSpread == 0 {
		return s.taskDur
	}
	_, frac := math.Modf(float64(n) * math.Phi)
	return time.Duration(float64(s.taskDur) * (1 - s.taskSpread + 2*s.taskSpread*frac))
}

func faultKey(node string, vmid int64) string { return node + "/" + strconv.FormatInt(vmid, 10) }

// finishTask ends t at time at: its effect is applied unless it fails. Server.mu is held.
func (s *Server) finishTask(t *task, at time.Time) {
	if t.done {
		return
	}
	t.done, t.ended = true, at
	t.exit = taskOK
	if t.fault != "" {
		t.exit = t.fault
	}
	if succeeded(t.exit) && t.effect != nil {
		t.effect(at)
	}
	if t.guest != nil && t.guest.task == t.upid {
		t.guest.task, t.guest.lock = "", ""
	}
	s.nodeActive(t.node) // the worker's reaper rewrites the active file
}

// advance ends every task whose time has come (in end order) and brings rebooted nodes
// back. Server.mu is held.
func (s *Server) advance(now time.Time) {
	var due []*task
	for _, t := range s.state.tasks {
		if !t.done && !t.end.After(now) {
			due = append(due, t)
		}
	}
	slices.SortStableFunc(due, func(a, b *task) int { return a.end.Compare(b.end) })
	for _, t := range due {
		s.finishTask(t, t.end)
	}
	for i := range s.state.nodes {
		n := &s.state.nodes[i]
		if !n.downUntil.IsZero() && !n.downUntil.After(now) {
			n.status, n.downUntil = "online", time.Time{}
		}
	}
}

// getTaskStatus is GET /nodes/{node}/tasks/{upid}/status.
func (s *Server) getTaskStatus(c *call) answer {
	raw := c.r.PathValue("upid")
	u, err := proxmox.ParseUPID(raw)
	if err != nil {
		return paramFail(map[string]string{"upid": "unable to parse worker upid"})
	}
	for _, t := range s.state.tasks {
		if t.upid != raw || t.node != c.r.PathValue("node") {
			continue
		}
		t.statusPolls++
		m := map[string]any{
			"upid": t.upid, "node": u.Node, "pid": u.PID, "pstart": u.PStart, "starttime": u.StartTime.Unix(),
			"type": u.Type, "id": u.ID, "user": u.User, "status": "running",
		}
		if t.done {
			m["status"] = "stopped"
			m["exitstatus"] = t.exit
		}
		return ok(m)
	}
	// pve-manager PVE/API2/Tasks.pm, read_task_status: raise_param_exc({ upid => "no such
	// task" }) when the task's file is absent.
	return paramFail(map[string]string{"upid": "no such task"})
}

// stopTaskPerm is stop_task's permission (pve-manager PVE/API2/Tasks.pm): a token that is not
// the task's owner needs Sys.Modify on the node. Server.mu is held.
func (s *Server) stopTaskPerm(c *call) (string, string) {
	for _, t := range s.state.tasks {
		if t.upid == c.r.PathValue("upid") && t.user == c.tokenID {
			return "", ""
		}
	}
	return "/nodes/" + c.r.PathValue("node"), privSysModify
}

// stopTask is DELETE /nodes/{node}/tasks/{upid} (pve-manager PVE/API2/Tasks.pm, stop_task):
// PVE::RPCEnvironment::check_worker($upid, 1) (pve-common RESTEnvironment.pm) sends TERM to a
// running worker's process group, which dies in its signal handler, so the task ends at once
// with its error, "received interrupt" (fork_worker's handler), "interrupted by signal" for
// vzdump (PVE/API2/VZDump.pm's own handler), and what it was doing is not done. A task that
// already ended is left as it is. It answers null; an unknown UPID is 400 "no such task".
func (s *Server) stopTask(c *call) answer {
	raw := c.r.PathValue("upid")
	if _, err := proxmox.ParseUPID(raw); err != nil {
		return paramFail(map[string]string{"upid": "unable to parse worker upid"})
	}
	for _, t := range s.state.tasks {
		if t.upid != raw || t.node != c.r.PathValue("node") {
			continue
		}
		if !t.done {
			t.fault, t.effect = "received interrupt", nil
			if t.typ == proxmox.BackupTaskType {
				t.fault = "interrupted by signal"
			}
			s.finishTask(t, time.Now())
		}
		return ok(nil)
	}
	return paramFail(map[string]string{"upid": "no such task"})
}

// withLog gives the task just started by a handler (the newest one) the log lines log and,
// when it has none, its start time (end minus the current task duration): for tasks started
// by helpers that take no log. It returns a unchanged; a refusal (no task) changes nothing.
// Server.mu is held.
func (s *Server) withLog(a answer, log func(frac float64) []string) answer {
	if n := len(s.state.tasks); n > 0 && a.status == http.StatusOK {
		t := s.state.tasks[n-1]
		t.log = log
		if t.begun.IsZero() {
			t.begun = t.end.Add(-max(s.taskDur, 0))
		}
	}
	return a
}

// fraction is how much of t's run has passed at now (0–1); a task that ended keeps the
// fraction it ended at.
func (t *task) fraction(now time.Time) float64 {
	if t.done {
		now = t.ended
	}
	run := t.end.Sub(t.begun)
	if t.begun.IsZero() || run <= 0 {
		if t.done {
			return 1
		}
		return 0
	}
	return min(max(float64(now.Sub(t.begun))/float64(run), 0), 1)
}

// logLines is t's log at now: its worker's lines and, once it has ended, PVE's last line
// ("TASK OK", "TASK WARNINGS: n" or "TASK ERROR: <exit status>").
func (t *task) logLines(now time.Time) []string {
	var out []string
	if t.log != nil {
		out = t.log(t.fraction(now))
	}
	if t.done {
		switch {
		case t.exit == taskOK:
			out = append(out, "TASK OK")
		case strings.HasPrefix(t.exit, "WARNINGS:"):
			out = append(out, "TASK "+t.exit)
		default:
			out = append(out, "TASK ERROR: "+t.exit)
		}
	}
	return out
}

// getTaskLog is GET /nodes/{node}/tasks/{upid}/log with start (default 0) and limit (default
// 50, 0: to the end), as PVE's read_task_log (PVE::Tools::dump_logfile) answers: the lines
// after the first start, at most limit of them, each {n, t} with n counting from 1, and the
// log's line count as "total" beside "data". An empty log is the one line {n: 1, t: "no
// content"} (total 1); an unknown task's is {n: 1, t: "unable to open file - No such file or
// directory"}.
func (s *Server) getTaskLog(c *call) answer {
	raw := c.r.PathValue("upid")
	if _, err := proxmox.ParseUPID(raw); err != nil {
		return paramFail(map[string]string{"upid": "unable to parse worker upid"})
	}
	start, limit := 0, 50 // the schema checked both: integers of at least 0
	for _, p := range []struct {
		name string
		into *int
	}{{"start", &start}, {"limit", &limit}} {
		if c.params.Has(p.name) {
			*p.into = perlInt(c.params.Get(p.name))
		}
	}
	var t *task
	for _, cand := range s.state.tasks {
		if cand.upid == raw && cand.node == c.r.PathValue("node") {
			t = cand
			break
		}
	}
	if t == nil {
		return okTotal([]map[string]any{{"n": 1, "t": "unable to open file - No such file or directory"}}, 1)
	}
	t.logReads++
	lines := t.logLines(time.Now())
	if len(lines) == 0 {
		return okTotal([]map[string]any{{"n": 1, "t": "no content"}}, 1)
	}
	out := []map[string]any{}
	for i := start; i < len(lines) && (limit == 0 || i < start+limit); i++ {
		out = append(out, map[string]any{"n": i + 1, "t": lines[i]})
		if i+1 <= t.logServedTo {
			t.logRereads++
		}
		t.logServedTo = max(t.logServedTo, i+1)
	}
	t.logLinesServed += len(out)
	return okTotal(out, len(lines))
}

// okTotal is ok(data) with PVE's "total" result attribute beside "data".
func okTotal(data any, total int) answer {
	body, err := json.Marshal(map[string]any{"data": data, "total": total})
	if err != nil {
		return fail(http.StatusInternalServerError, "sim: cannot encode answer: "+err.Error())
	}
	return answer{status: http.StatusOK, reason: "OK", body: body}
}

// TaskStat is what the simulator knows of one task, for tests and benchmarks.
type TaskStat struct {
	UPID string
	Node string
	Type string // worker type, "qmstart"
	// Begun is when the task started; End when it ends or ended (by its duration, or
	// earlier when a node reboot cut it short).
	Begun, End time.Time
	Running    bool
	// StatusPolls counts GET …/status requests for it; LogReads GET …/log requests;
	// LogLinesServed the lines those answered (PVE's "no content" placeholder not counted),
	// LogRereads how many of them had been answered before; LogLines the lines its log
	// holds now.
	StatusPolls, LogReads, LogLinesServed, LogRereads, LogLines int
}

// TaskStats returns every task started so far, oldest first (tasks whose time has come are
// ended first).
func (s *Server) TaskStats() []TaskStat {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.advance(now)
	out := make([]TaskStat, 0, len(s.state.tasks))
	for _, t := range s.state.tasks {
		end := t.end
		if t.done && t.ended.Before(end) {
			end = t.ended
		}
		out = append(out, TaskStat{
			UPID: t.upid, Node: t.node, Type: t.typ, Begun: t.begun, End: end, Running: !t.done,
			StatusPolls: t.statusPolls, LogReads: t.logReads, LogLinesServed: t.logLinesServed, LogRereads: t.logRereads,
			LogLines: len(t.logLines(now)),
		})
	}
	return out
}

// progressLog is a worker's log: head, then the progress lines line(1)…line(steps), the i-th
// once i/steps of the run has passed, then tail once the run is complete. Lines only ever
// grow, as task.log requires.
func progressLog(head []string, steps int, line func(i int) string, tail []string) func(frac float64) []string {
	return func(frac float64) []string {
		out := slices.Clone(head)
		n := min(int(frac*float64(steps)), steps)
		for i := 1; i <= n; i++ {
			out = append(out, line(i))
		}
		if frac >= 1 {
			out = append(out, tail...)
		}
		return out
	}
}

// taskLogBytes is PVE::Format::render_bytes(v, 1): "0.0 B", "1.2 GiB".
func taskLogBytes(v int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	f, u := float64(v), 0
	for f > 1023 && u < len(units)-1 {
		f /= 1024
		u++
	}
	return fmt.Sprintf("%.1f %s", f, units[u])
}

// taskLogDuration is PVE::Format::render_duration: "0s", "10s", "1m 5s", "1h 3s".
func taskLogDuration(d time.Duration) string {
	rest := int64(d.Round(time.Second) / time.Second)
	if rest <= 0 {
		return "0s"
	}
	var parts []string
	for _, u := range []struct {
		unit string
		secs int64
	}{{"w", 7 * 24 * 3600}, {"d", 24 * 3600}, {"h", 3600}, {"m", 60}, {"s", 1}} {
		if v := rest / u.secs; v > 0 {
			parts = append(parts, strconv.FormatInt(v, 10)+u.unit)
			rest -= v * u.secs
		}
	}
	return strings.Join(parts, " ")
}
