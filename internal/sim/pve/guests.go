package simpve

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// Guest run states as the simulator keeps them. A paused QEMU VM is "running" with
// qmpstatus "paused".
const (
	stateRunning = "running"
	stateStopped = "stopped"
)

// guest is one QEMU VM or LXC container; guarded by Server.mu.
type guest struct {
	vmid      int64
	typ       proxmox.GuestType
	node      string
	config    map[string]string // the config file's keys and values (name/hostname, memory, …)
	status    string            // stateRunning or stateStopped
	paused    bool              // QEMU: qmpstatus paused
	startedAt time.Time         // when it last started (uptime)
	task      string            // UPID of the task holding the guest's lock; "" when free
	lock      string            // config lock shown while a snapshot task runs ("snapshot", …)
	snapshots map[string]*snapshot
	parent    string // the snapshot "current" descends from
}

// snapshot is one node of a guest's snapshot tree.
type snapshot struct {
	name, description string
	snaptime          int64
	parent            string
	vmstate           bool
	config            map[string]string // the configuration when it was taken
}

// name is the guest's name: "name" for QEMU, "hostname" for LXC.
func (g *guest) name() string {
	if g.typ == proxmox.GuestLXC {
		return g.config["hostname"]
	}
	return g.config["name"]
}

func (g *guest) template() bool { return g.config["template"] == "1" }

// label is "VM 100" or "CT 101", as PVE's messages name guests.
func (g *guest) label() string {
	if g.typ == proxmox.GuestLXC {
		return fmt.Sprintf("CT %d", g.vmid)
	}
	return fmt.Sprintf("VM %d", g.vmid)
}

// confFile is the guest's config path as PVE's "does not exist" message names it.
func confFile(typ proxmox.GuestType, node string, vmid int64) string {
	if typ == proxmox.GuestLXC {
		return fmt.Sprintf("nodes/%s/lxc/%d.conf", node, vmid)
	}
	return fmt.Sprintf("nodes/%s/qemu-server/%d.conf", node, vmid)
}

// lockFile is the flock PVE takes for guest operations.
func (g *guest) lockFile() string {
	if g.typ == proxmox.GuestLXC {
		return fmt.Sprintf("/run/lock/lxc/pve-config-%d.lock", g.vmid)
	}
	return fmt.Sprintf("/var/lock/qemu-server/lock-%d.conf", g.vmid)
}

// lockTimeout is PVE's answer when another task holds the guest's lock.
func (g *guest) lockTimeout() answer {
	return fail(http.StatusInternalServerError, fmt.Sprintf("can't lock file '%s' - got timeout", g.lockFile()))
}

// cpus is the guest's vCPU count as /cluster/resources' maxcpu.
func (g *guest) cpus(n node) int {
	if v, err := strconv.Atoi(g.config["vcpus"]); err == nil && v > 0 {
		return v
	}
	cores, err := strconv.Atoi(g.config["cores"])
	if err != nil || cores < 1 {
		if g.typ == proxmox.GuestLXC {
			return n.maxCPU
		}
		cores = 1
	}
	sockets, err := strconv.Atoi(g.config["sockets"])
	if err != nil || sockets < 1 || g.typ == proxmox.GuestLXC {
		sockets = 1
	}
	return cores * sockets
}

// memBytes is the configured memory (MiB in the config; QEMU's may be "current=N").
func (g *guest) memBytes() int64 {
	v := strings.TrimPrefix(g.config["memory"], "current=")
	if i := strings.IndexByte(v, ','); i >= 0 {
		v = v[:i]
	}
	mb, err := strconv.ParseInt(v, 10, 64)
	if err != nil || mb <= 0 {
		mb = 512
		if g.typ == proxmox.GuestQEMU {
			mb = 2048
		}
	}
	return mb << 20
}

// uptime is seconds since start for a running guest.
func (g *guest) uptime(now time.Time) int64 {
	if g.status != stateRunning || g.startedAt.IsZero() {
		return 0
	}
	return int64(now.Sub(g.startedAt) / time.Second)
}

// start, stop, pause and resume change the run state.
func (g *guest) start(now time.Time) { g.status, g.paused, g.startedAt = stateRunning, false, now }
func (g *guest) stop()               { g.status, g.paused, g.startedAt = stateStopped, false, time.Time{} }

// qmpStatus is QEMU's query-status answer.
func (g *guest) qmpStatus() string {
	switch {
	case g.status != stateRunning:
		return "stopped"
	case g.paused:
		return "paused"
	}
	return "running"
}

// guestIDs returns the vmids sorted as strings, the order the simulator lists them (a
// client must sort numerically itself).
func (c *cluster) guestIDs() []int64 {
	ids := slices.Collect(maps.Keys(c.guests))
	slices.SortFunc(ids, func(a, b int64) int {
		return strings.Compare(strconv.FormatInt(a, 10), strconv.FormatInt(b, 10))
	})
	return ids
}

// node returns the node named n.
func (c *cluster) node(n string) (*node, bool) {
	for i := range c.nodes {
		if c.nodes[i].name == n {
			return &c.nodes[i], true
		}
	}
	return nil, false
}

// resourceJSON is the guest's /cluster/resources entry.
func (g *guest) resourceJSON(n node, now time.Time) map[string]any {
	status := g.status
	if n.status != "online" {
		status = "unknown"
	}
	m := map[string]any{
		"id": string(g.typ) + "/" + strconv.FormatInt(g.vmid, 10), "type": string(g.typ), "vmid": g.vmid,
		"name": g.name(), "node": g.node, "status": status, "template": boolInt(g.template()),
		"maxcpu": g.cpus(n), "maxmem": g.memBytes(), "maxdisk": int64(32 << 30),
		"cpu": 0, "mem": 0, "disk": 0, "uptime": g.uptime(now),
		"netin": 0, "netout": 0, "diskread": 0, "diskwrite": 0,
	}
	if status == stateRunning {
		m["cpu"] = 0.03
		m["mem"] = g.memBytes() / 4
	}
	if t := g.config["tags"]; t != "" {
		m["tags"] = t
	}
	if g.lock != "" {
		m["lock"] = g.lock
	}
	return m
}

// statusJSON is GET .../status/current.
func (g *guest) statusJSON(n node, now time.Time) map[string]any {
	m := map[string]any{
		"vmid": g.vmid, "name": g.name(), "status": g.status, "uptime": g.uptime(now),
		"cpus": g.cpus(n), "maxmem": g.memBytes(), "mem": 0, "cpu": 0, "maxdisk": int64(32 << 30),
		"netin": 0, "netout": 0, "diskread": 0, "diskwrite": 0,
		"ha": map[string]any{"managed": 0},
	}
	if g.template() {
		m["template"] = 1
	}
	if g.lock != "" {
		m["lock"] = g.lock
	}
	if t := g.config["tags"]; t != "" {
		m["tags"] = t
	}
	if g.typ == proxmox.GuestQEMU {
		m["qmpstatus"] = g.qmpStatus()
		if g.config["agent"] != "" && g.config["agent"] != "0" {
			m["agent"] = 1
		}
		if g.status == stateRunning {
			m["pid"] = 10000 + g.vmid
			m["running-qemu"] = "10.0.2"
			m["running-machine"] = "pc-i440fx-10.0+pve0"
		}
	} else {
		m["type"] = "lxc"
		m["maxswap"] = int64(512 << 20)
		m["disk"] = int64(1 << 30)
	}
	if g.status == stateRunning {
		m["mem"] = g.memBytes() / 4
		m["cpu"] = 0.03
	}
	return m
}

// Config keys PVE's schema types as integer/number/boolean: returned as JSON numbers.
var (
	qemuNumericKeys = map[string]bool{
		"acpi": true, "allow-ksm": true, "autostart": true, "balloon": true, "ciupgrade": true, "cores": true,
		"cpulimit": true, "cpuunits": true, "freeze": true, "keephugepages": true, "kvm": true, "localtime": true,
		"migrate_downtime": true, "migrate_speed": true, "numa": true, "onboot": true, "protection": true,
		"reboot": true, "shares": true, "smp": true, "snaptime": true, "sockets": true, "tablet": true,
		"tdf": true, "template": true, "vcpus": true,
	}
	lxcNumericKeys = map[string]bool{
		"console": true, "cores": true, "cpulimit": true, "cpuunits": true, "debug": true, "memory": true,
		"onboot": true, "protection": true, "swap": true, "template": true, "tty": true, "unprivileged": true,
	}
)

// configJSON is GET .../config: the config with numbers typed as PVE's schema says, the
// snapshot parent and a digest.
func (g *guest) configJSON() map[string]any {
	numeric := qemuNumericKeys
	if g.typ == proxmox.GuestLXC {
		numeric = lxcNumericKeys
	}
	out := make(map[string]any, len(g.config)+2)
	h := sha1.New()
	for _, k := range slices.Sorted(maps.Keys(g.config)) {
		v := g.config[k]
		h.Write([]byte(k + ": " + v + "\n"))
		if numeric[k] {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				if f == float64(int64(f)) {
					out[k] = int64(f)
				} else {
					out[k] = f
				}
				continue
			}
		}
		out[k] = v
	}
	if g.lock != "" {
		out["lock"] = g.lock
	}
	if g.parent != "" {
		out["parent"] = g.parent
	}
	out["digest"] = hex.EncodeToString(h.Sum(nil))
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
