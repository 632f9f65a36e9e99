package simpve

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// flag reads an optional PVE boolean parameter, which the schema check left "1", "0" or
// absent.
func flag(c *call, name string) bool { return c.params.Get(name) == "1" }

// getSnapshots is GET .../snapshot: every snapshot and the "current" entry.
func (s *Server) getSnapshots(_ *call, g *guest) answer {
	out := []map[string]any{}
	for _, name := range slices.Sorted(maps.Keys(g.snapshots)) {
		sn := g.snapshots[name]
		m := map[string]any{"name": sn.name, "description": sn.description, "snaptime": sn.snaptime}
		if sn.parent != "" {
			m["parent"] = sn.parent
		}
		if g.typ == proxmox.GuestQEMU {
			m["vmstate"] = boolInt(sn.vmstate)
		}
		out = append(out, m)
	}
	cur := map[string]any{"name": proxmox.CurrentSnapshot, "description": "You are here!", "running": boolInt(g.status == stateRunning), "digest": g.configJSON()["digest"]}
	if g.parent != "" {
		cur["parent"] = g.parent
	}
	return ok(append(out, cur))
}

// snapTaskType is the worker type of a snapshot action for g.
func snapTaskType(g *guest, action string) string {
	if g.typ == proxmox.GuestLXC {
		return "vz" + action
	}
	return "qm" + action
}

// createSnapshot is POST .../snapshot.
func (s *Server) createSnapshot(c *call, g *guest) answer {
	name := c.params.Get("snapname") // a pve-configid of at most 40 characters
	vmstate := flag(c, "vmstate")
	if name == proxmox.CurrentSnapshot || name == "pending" {
		return fail(http.StatusInternalServerError, fmt.Sprintf("unable to use snapshot name '%s' (reserved name)", name))
	}
	if g.task != "" {
		return g.lockTimeout()
	}
	if _, exists := g.snapshots[name]; exists { // checked by the worker: the task fails
		return s.startTask(c, g, snapTaskType(g, "snapshot"), "", fmt.Sprintf("snapshot name '%s' already used", name), nil)
	}
	desc := c.params.Get("description")
	withState := vmstate && g.typ == proxmox.GuestQEMU && g.status == stateRunning // PVE saves RAM only of a running VM
	return s.startTask(c, g, snapTaskType(g, "snapshot"), "snapshot", "", func(t time.Time) {
		g.snapshots[name] = &snapshot{name: name, description: desc, snaptime: t.Unix(), parent: g.parent, vmstate: withState, config: cloneMap(g.config)}
		g.parent = name
	})
}

// existingSnapshot finds the call's snapshot; for an unknown name it answers a task that
// fails as PVE's worker does ("snapshot 'x' does not exist"). The guest's lock is checked
// first. Server.mu is held.
func (s *Server) existingSnapshot(c *call, g *guest, action string) (*snapshot, answer, bool) {
	if g.task != "" {
		return nil, g.lockTimeout(), false
	}
	name := c.r.PathValue("snapname")
	sn, found := g.snapshots[name]
	if !found {
		return nil, s.startTask(c, g, snapTaskType(g, action), "", fmt.Sprintf("snapshot '%s' does not exist", name), nil), false
	}
	return sn, answer{}, true
}

// deleteSnapshot is DELETE .../snapshot/{snapname}: children move to the deleted one's parent.
func (s *Server) deleteSnapshot(c *call, g *guest) answer {
	sn, a, found := s.existingSnapshot(c, g, "delsnapshot")
	if !found {
		return a
	}
	return s.startTask(c, g, snapTaskType(g, "delsnapshot"), "snapshot-delete", "", func(time.Time) {
		for _, other := range g.snapshots {
			if other.parent == sn.name {
				other.parent = sn.parent
			}
		}
		if g.parent == sn.name {
			g.parent = sn.parent
		}
		delete(g.snapshots, sn.name)
	})
}

// rollbackSnapshot is POST .../snapshot/{snapname}/rollback: the config is restored and the
// guest stopped, then running again when the snapshot holds RAM or start=1.
func (s *Server) rollbackSnapshot(c *call, g *guest) answer {
	start := flag(c, "start")
	sn, a, found := s.existingSnapshot(c, g, "rollback")
	if !found {
		return a
	}
	return s.startTask(c, g, snapTaskType(g, "rollback"), "rollback", "", func(t time.Time) {
		g.config = cloneMap(sn.config)
		g.parent = sn.name
		g.stop()
		if sn.vmstate || start {
			g.start(t)
		}
	})
}
