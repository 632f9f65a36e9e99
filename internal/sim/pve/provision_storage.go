package simpve

import (
	"fmt"
	"strings"
)

// fileStorageTypes are the storage types that hold volumes as files ("<vmid>/vm-…-disk-N.fmt").
var fileStorageTypes = map[string]bool{"dir": true, "nfs": true, "cifs": true, "cephfs": true, "glusterfs": true, "btrfs": true}

// storageShared reports whether storage config m is shared (its type, or "shared 1").
func storageShared(m map[string]string) bool { return sharedTypes[m["type"]] || m["shared"] == "1" }

// storageEnabledOn is PVE's storage_check_enabled for node n: "" when storage id exists, is
// not disabled and n is in its nodes list, else PVE's message.
func (c *cluster) storageEnabledOn(id, n string) string {
	m, found := c.storages[id]
	switch {
	case !found:
		return fmt.Sprintf("storage '%s' does not exist", id)
	case m["disable"] == "1":
		return fmt.Sprintf("storage '%s' is disabled", id)
	case !storageOnNode(m, n):
		return fmt.Sprintf("storage '%s' is not available on node '%s'", id, n)
	}
	return ""
}

// storageStatusOn is storage id's status on node n in /cluster/resources: "available"
// unless set otherwise with SetStorageStatus or the node is offline ("unknown").
func (c *cluster) storageStatusOn(id, n string) string {
	if nd, found := c.node(n); found && nd.status != "online" {
		return "unknown"
	}
	if st, found := c.storageStatus[id+"/"+n]; found {
		return st
	}
	return storageAvailable
}

// storageUsable is "" when a worker on node n can allocate on storage id, else the message
// the worker dies with (not enabled there, or not online).
func (c *cluster) storageUsable(id, n string) string {
	if msg := c.storageEnabledOn(id, n); msg != "" {
		return msg
	}
	if c.storageStatusOn(id, n) != storageAvailable {
		return fmt.Sprintf("storage '%s' is not online", id)
	}
	return ""
}

// storageResources are the storage entries of GET /cluster/resources as PVE builds them:
// for each storage (sorted), one entry per node where it is enabled (disabled storages and
// nodes outside its nodes list are left out); status "available" with disk/maxdisk when
// pvestatd reports it, else "unknown" without them.
func (c *cluster) storageResources() []map[string]any {
	var out []map[string]any
	for _, id := range c.storageIDs() {
		m := c.storages[id]
		for _, n := range c.nodes {
			if c.storageEnabledOn(id, n.name) != "" {
				continue
			}
			e := map[string]any{
				"id": "storage/" + n.name + "/" + id, "type": "storage", "storage": id, "node": n.name,
				"status": "unknown", "plugintype": m["type"], "content": m["content"], "shared": boolInt(storageShared(m)),
			}
			if st := c.storageStatusOn(id, n.name); st == storageAvailable {
				e["status"], e["disk"], e["maxdisk"] = st, int64(20<<30), int64(1<<40)
			} else if st != "unknown" {
				e["status"] = st
			}
			out = append(out, e)
		}
	}
	return out
}

// SetStorageStatus sets storage's status on node as /cluster/resources reports it:
// "available" (or "") for an active storage, anything else (PVE shows "unknown") for one
// pvestatd cannot reach. A storage that is not available cannot take new volumes there:
// clones, disk moves and Cloud-Init drives onto it fail in their worker with "storage 'x'
// is not online". Disable a storage or restrict it to some nodes with [Server.AddStorage]
// ("disable": "1", "nodes": "pve1,pve2").
func (s *Server) SetStorageStatus(storage, node, status string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := storage + "/" + node
	if status == "" || status == storageAvailable {
		delete(s.state.storageStatus, key)
		return
	}
	s.state.storageStatus[key] = status
}

// FailMove makes the next move_disk task of disk (e.g. "scsi0") of guest vmid end with
// exitStatus instead of "OK" (calls queue up, one per task); the disk stays where it was.
// [Server.FailTask] for the guest takes precedence.
func (s *Server) FailMove(vmid int64, disk, exitStatus string) {
	if strings.TrimSpace(exitStatus) == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := fmt.Sprintf("%d/%s", vmid, disk)
	s.state.moveFaults[key] = append(s.state.moveFaults[key], exitStatus)
}

// takeMoveFault consumes the next FailMove status for vmid's disk ("" none); Server.mu is held.
func (c *cluster) takeMoveFault(vmid int64, disk string) string {
	key := fmt.Sprintf("%d/%s", vmid, disk)
	q := c.moveFaults[key]
	if len(q) == 0 {
		return ""
	}
	if len(q) == 1 {
		delete(c.moveFaults, key)
	} else {
		c.moveFaults[key] = q[1:]
	}
	return q[0]
}
