package simpve

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// activeMaxFinished is how many ended tasks a node's active list keeps beside its running ones
// (pve-common src/PVE/RESTEnvironment.pm, active_workers: $MAX_FINISHED = 25, minus the
// running tasks). That list is what the node broadcasts to the cluster (pve-cluster
// src/PVE/Cluster.pm, broadcast_tasklist) and what GET /cluster/tasks answers.
const activeMaxFinished = 25

// taskEntry is one task as PVE's task lists answer it (pve-manager PVE/API2/Tasks.pm,
// node_tasks, whose entries are PVE::Tools::upid_decode plus upid, endtime and status; a token
// task's user is split into user and tokenid by $convert_token_task).
func (t *task) entry() map[string]any {
	u, _ := proxmox.ParseUPID(t.upid)
	m := map[string]any{
		"upid": t.upid, "node": t.node, "pid": u.PID, "pstart": u.PStart, "starttime": u.StartTime.Unix(),
		"type": t.typ, "id": u.ID, "user": t.user,
	}
	if user, tok, found := strings.Cut(t.user, "!"); found {
		m["user"], m["tokenid"] = user, tok
	}
	if t.done {
		m["endtime"] = t.ended.Unix()
		m["status"] = t.exit
	}
	return m
}

// byStartDesc orders tasks newest start first, as active_workers sorts its list.
func byStartDesc(a, b *task) int {
	if c := b.begun.Compare(a.begun); c != 0 {
		return c
	}
	return strings.Compare(b.upid, a.upid)
}

// nodeActive rewrites node's active file and returns it, as active_workers does at each task's
// start and end: the tasks the file held and those started since, running ones first, then up
// to activeMaxFinished minus their number of the ended ones, each part newest start first. An
// ended task the file drops never comes back. Server.mu is held.
func (s *Server) nodeActive(node string) []*task {
	if s.state.active == nil {
		s.state.active = map[string][]*task{}
	}
	file := s.state.active[node]
	for _, t := range s.state.tasks {
		if t.node == node && !t.listed {
			t.listed = true
			file = append(file, t)
		}
	}
	var running, ended []*task
	for _, t := range file {
		if t.done {
			ended = append(ended, t)
		} else {
			running = append(running, t)
		}
	}
	slices.SortFunc(running, byStartDesc)
	slices.SortFunc(ended, byStartDesc)
	file = append(running, ended[:min(len(ended), max(activeMaxFinished-len(running), 0))]...)
	s.state.active[node] = file
	return file
}

// nodeTasks is node's running and ended tasks, in start order. Server.mu is held.
func (s *Server) nodeTasks(node string) (running, ended []*task) {
	for _, t := range s.state.tasks {
		switch {
		case t.node != node:
		case t.done:
			ended = append(ended, t)
		default:
			running = append(running, t)
		}
	}
	return running, ended
}

// getClusterTasks is GET /cluster/tasks (pve-manager PVE/API2/Cluster.pm, tasks): every
// node's broadcast active list (PVE::Cluster::get_tasklist), which a node sends at each task's
// start and end (pve-common RESTEnvironment.pm, fork_worker and the worker reaper call
// active_workers and broadcast_tasklist) and pvestatd every 10 s. The simulator answers the
// lists as they are now: PVE's cluster file system delivers a broadcast within milliseconds.
// Entries are as in the node lists, without pid's start (active_workers deletes pstart). A
// token without Sys.Audit sees none: the list holds a token's tasks with the user split off,
// which never equals the token's own id.
func (s *Server) getClusterTasks(c *call) answer {
	out := []map[string]any{}
	if !c.token.has(privSysAudit) {
		return ok(out)
	}
	for _, n := range s.state.nodes {
		if n.status != "online" {
			continue
		}
		for _, t := range s.nodeActive(n.name) {
			m := t.entry()
			delete(m, "pstart")
			out = append(out, m)
		}
	}
	return ok(out)
}

// getNodeTasks is GET /nodes/{node}/tasks (pve-manager PVE/API2/Tasks.pm, node_tasks) with
// source archive (default: the ended tasks of /var/log/pve/tasks/index, read backwards, so
// the latest end first), active (the running tasks of the active file: an ended task is
// archived by the same active_workers call that notes its end, and skipped as "saved") or all
// (active, then archive); a token without Sys.Audit on the node sees the tasks it started;
// filters userfilter, typefilter, vmid, errors, statusfilter, since and
// until (on the start time), then start and limit (default 50); "total" counts every task
// the filters let through.
func (s *Server) getNodeTasks(c *call) answer {
	p := c.params
	node := c.r.PathValue("node")
	if _, found := s.state.node(node); !found {
		return unknownNode(node)
	}
	seeAll := c.token.has(privSysAudit) // else a token sees the tasks it started
	start, limit := 0, 50
	if p.Has("start") {
		start = perlInt(p.Get("start"))
	}
	if p.Has("limit") {
		limit = perlInt(p.Get("limit"))
	}
	source := cmp.Or(p.Get("source"), "archive")
	status := map[string]bool{"ok": true, "warning": true, "error": true, "unknown": true}
	if p.Get("errors") == "1" {
		status["ok"] = false
	} else if p.Has("statusfilter") {
		status = map[string]bool{}
		for _, f := range strings.FieldsFunc(p.Get("statusfilter"), func(r rune) bool { return r == ',' || r == ';' || r == ' ' }) {
			status[strings.ToLower(f)] = true
		}
	}
	count := 0
	out := []map[string]any{}
	keep := func(t *task) {
		u, _ := proxmox.ParseUPID(t.upid)
		switch {
		case !seeAll && t.user != c.tokenID:
		case p.Has("userfilter") && !strings.Contains(strings.ToLower(t.user), strings.ToLower(p.Get("userfilter"))):
		case p.Has("typefilter") && t.typ != p.Get("typefilter"):
		case p.Has("vmid") && u.ID != p.Get("vmid"):
		case p.Has("since") && u.StartTime.Unix() < int64(perlInt(p.Get("since"))):
		case p.Has("until") && u.StartTime.Unix() > int64(perlInt(p.Get("until"))):
		case !status[statusType(t)]:
		default:
			count++
			if count <= start || limit <= 0 {
				return
			}
			m := t.entry()
			if !t.done {
				m["status"] = "RUNNING"
			}
			out = append(out, m)
			limit--
		}
	}
	running, ended := s.nodeTasks(node)
	if source == "active" || source == "all" {
		slices.SortFunc(running, byStartDesc)
		for _, t := range running {
			keep(t)
		}
	}
	if source != "active" {
		slices.SortStableFunc(ended, func(a, b *task) int { return b.ended.Compare(a.ended) })
		for _, t := range ended {
			keep(t)
		}
	}
	return okTotal(out, count)
}

// statusType is PVE::Tools::upid_normalize_status_type of t's status: ok, warning, error, or
// unknown (also for a running task, whose status is undefined).
func statusType(t *task) string {
	switch {
	case !t.done:
		return "unknown"
	case t.exit == taskOK:
		return "ok"
	case strings.HasPrefix(t.exit, "WARNINGS:"):
		return "warning"
	default:
		return "error"
	}
}

// HandTask is a task started outside proxbus, as the GUI, a backup job or HA would start it.
type HandTask struct {
	Node string // node that runs it (required)
	Type string // worker type, e.g. "qmstart", "vzdump" (required)
	VMID int64  // the guest it works on; 0: none (the UPID's id is then empty)
	// User is who started it; "" is "root@pam".
	User string
	// Duration is how long it runs; 0 is the server's task duration.
	Duration time.Duration
	// Exit is the exit status it ends with; "" is "OK".
	Exit string
}

// StartTask starts h's task by hand and returns its UPID. It changes no guest: it only shows
// in the task lists and answers its status and log, as any task does.
func (s *Server) StartTask(h HandTask) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.advance(now)
	s.state.pid++
	id := ""
	if h.VMID != 0 {
		id = strconv.FormatInt(h.VMID, 10)
	}
	user := cmp.Or(h.User, "root@pam")
	u := proxmox.UPID{Node: h.Node, PID: s.state.pid, PStart: 0x00123456 + s.state.pid,
		StartTime: now.Truncate(time.Second).UTC(), Type: h.Type, ID: id, User: user}
	d := cmp.Or(h.Duration, s.taskDur)
	t := &task{upid: u.String(), node: h.Node, typ: h.Type, vmid: h.VMID, user: user, end: now.Add(max(d, 0)),
		fault: h.Exit, begun: now}
	s.state.tasks = append(s.state.tasks, t)
	if d <= 0 {
		s.finishTask(t, now)
	}
	return t.upid
}
