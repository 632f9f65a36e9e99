package simpve

import (
	"fmt"
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
}

// succeeded reports whether an exit status is a success ("OK" or "WARNINGS: n").
func succeeded(exit string) bool { return exit == taskOK || strings.HasPrefix(exit, "WARNINGS:") }

// startTask creates a task of typ for g that applies effect when it ends successfully,
// takes g's lock (and shows configLock, if any) while it runs, and answers its UPID.
// failure, when not empty, is the exit status of a check PVE runs inside the worker
// (e.g. "VM 100 already running"): the task then fails with it. An injected FailTask
// fault takes precedence. Server.mu is held.
func (s *Server) startTask(c *call, g *guest, typ, configLock, failure string, effect func(t time.Time)) answer {
	now := time.Now()
	s.state.pid++
	u := proxmox.UPID{
		Node: g.node, PID: s.state.pid, PStart: 0x00123456 + s.state.pid, StartTime: now.Truncate(time.Second).UTC(),
		Type: typ, ID: strconv.FormatInt(g.vmid, 10), User: c.tokenID,
	}
	t := &task{upid: u.String(), node: g.node, typ: typ, vmid: g.vmid, user: c.tokenID, end: now.Add(s.taskDur), effect: effect, guest: g}
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

func faultKey(node string, vmid int64) string { return node + "/" + strconv.FormatInt(vmid, 10) }

// finishTask ends t at time at: its effect is applied unless it fails. Server.mu is held.
func (s *Server) finishTask(t *task, at time.Time) {
	if t.done {
		return
	}
	t.done = true
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
		return paramFail(map[string]string{"upid": fmt.Sprintf("unable to parse worker upid '%s'", raw)})
	}
	for _, t := range s.state.tasks {
		if t.upid != raw || t.node != c.r.PathValue("node") {
			continue
		}
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
	return fail(http.StatusInternalServerError, "no such task")
}
