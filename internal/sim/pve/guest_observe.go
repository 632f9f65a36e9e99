package simpve

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// GuestState is a guest as the simulator holds it, for test assertions.
type GuestState struct {
	VMID     int64
	Name     string
	Node     string
	Type     proxmox.GuestType
	Status   string // "running", "stopped" or (QEMU) "paused"
	Template bool
	Lock     string // the config lock shown while a snapshot task runs ("snapshot", …)
	Busy     bool   // a task holds the guest's lock
	// Snapshots maps each snapshot name to its parent ("" for a root); Parent is the
	// snapshot "current" descends from.
	Snapshots map[string]string
	Parent    string
	// VMState lists the snapshots that hold the VM's RAM.
	VMState []string
	Config  map[string]string // a copy of the configuration
}

// Guest returns guest vmid's current state (tasks whose time has come are ended first)
// and whether it exists.
func (s *Server) Guest(vmid int64) (GuestState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(time.Now())
	g, found := s.state.guests[vmid]
	if !found {
		return GuestState{}, false
	}
	st := GuestState{
		VMID: g.vmid, Name: g.name(), Node: g.node, Type: g.typ, Status: g.status, Template: g.template(),
		Lock: g.lock, Busy: g.task != "", Snapshots: map[string]string{}, Parent: g.parent, Config: cloneMap(g.config),
	}
	if g.paused {
		st.Status = "paused"
	}
	for _, name := range slices.Sorted(maps.Keys(g.snapshots)) {
		sn := g.snapshots[name]
		st.Snapshots[name] = sn.parent
		if sn.vmstate {
			st.VMState = append(st.VMState, name)
		}
	}
	return st, true
}

// GuestSpec seeds a guest with [Server.AddGuest].
type GuestSpec struct {
	VMID    int64
	Type    proxmox.GuestType // GuestQEMU (default) or GuestLXC
	Node    string
	Name    string            // stored as "name" (QEMU) or "hostname" (LXC)
	Status  string            // "running", "stopped" (default) or "paused" (QEMU)
	Config  map[string]string // further configuration keys ("template": "1", "memory", …)
	Created time.Time         // start time of a running guest (uptime); zero: now
}

// AddGuest adds or replaces a guest directly (no validation, no request logged, no task).
func (s *Server) AddGuest(spec GuestSpec) {
	typ := spec.Type
	if typ == "" {
		typ = proxmox.GuestQEMU
	}
	cfg := cloneMap(spec.Config)
	if typ == proxmox.GuestLXC {
		cfg["hostname"] = spec.Name
	} else {
		cfg["name"] = spec.Name
	}
	g := &guest{vmid: spec.VMID, typ: typ, node: spec.Node, config: cfg, status: stateStopped, snapshots: map[string]*snapshot{}}
	if spec.Status == stateRunning || spec.Status == "paused" {
		at := spec.Created
		if at.IsZero() {
			at = time.Now()
		}
		g.start(at)
		g.paused = spec.Status == "paused" && typ == proxmox.GuestQEMU
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state.guests[g.vmid] = g
}

// TaskInfo is one task the simulator ran, for test assertions.
type TaskInfo struct {
	UPID       string
	Node       string
	Type       string // worker type, "qmstart", "vzsnapshot", …
	VMID       int64
	User       string
	Running    bool
	ExitStatus string // "" while running
}

// Tasks returns every task started so far, oldest first (tasks whose time has come are
// ended first).
func (s *Server) Tasks() []TaskInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(time.Now())
	out := make([]TaskInfo, 0, len(s.state.tasks))
	for _, t := range s.state.tasks {
		out = append(out, TaskInfo{UPID: t.upid, Node: t.node, Type: t.typ, VMID: t.vmid, User: t.user, Running: !t.done, ExitStatus: t.exit})
	}
	return out
}

// FailTask makes the next task started for guest vmid on node end with exitStatus instead
// of "OK" (calls queue up, one per task). A failing status leaves the guest unchanged; a
// "WARNINGS: n" status is a success: the task's effect is applied and it ends with it.
func (s *Server) FailTask(node string, vmid int64, exitStatus string) {
	if strings.TrimSpace(exitStatus) == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := faultKey(node, vmid)
	s.taskFaults[key] = append(s.taskFaults[key], exitStatus)
}

// SetTaskDuration sets how long tasks started from now on run (d <= 0: they end at once).
func (s *Server) SetTaskDuration(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.taskDur = d
}

// SetNodeRebootDuration sets how long a node reboot started from now on keeps the node
// unreachable (d <= 0: it is back at once).
func (s *Server) SetNodeRebootDuration(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rebootDur = d
}

// NodeStatus returns node's status ("online", or "offline" while rebooting) and whether
// the node exists.
func (s *Server) NodeStatus(node string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(time.Now())
	n, found := s.state.node(node)
	if !found {
		return "", false
	}
	return n.status, true
}
