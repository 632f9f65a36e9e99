package simpve

import (
	"fmt"
	"net/http"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// Privileges of guest and node operations.
const (
	privPowerMgmt    = "VM.PowerMgmt"
	privSnapshot     = "VM.Snapshot"
	privSysPowerMgmt = "Sys.PowerMgmt"
)

// vmPerm is the permission check of a guest method: priv on /vms/{vmid}.
func vmPerm(priv string) func(c *call) (string, string) {
	return func(c *call) (string, string) { return "/vms/" + c.r.PathValue("vmid"), priv }
}

// lookupGuest finds the guest of a /nodes/{node}/{typ}/{vmid}/… call as PVE would: the
// node must exist and hold the guest's config.
func (s *Server) lookupGuest(c *call, typ proxmox.GuestType) (*guest, answer, bool) {
	vmid := int64(perlInt(c.r.PathValue("vmid"))) // a pve-vmid: the schema checked it
	nodeName := c.r.PathValue("node")
	if _, found := s.state.node(nodeName); !found {
		return nil, unknownNode(nodeName), false
	}
	g, found := s.state.guests[vmid]
	if !found || g.typ != typ || g.node != nodeName {
		return nil, fail(http.StatusInternalServerError, fmt.Sprintf("Configuration file '%s' does not exist", confFile(typ, nodeName, vmid))), false
	}
	return g, answer{}, true
}

// unknownNode is pveproxy's answer for a node name that is not in the cluster.
func unknownNode(n string) answer {
	return fail(http.StatusInternalServerError, fmt.Sprintf("hostname lookup '%s' failed - failed to get address info for: %s: Name or service not known", n, n))
}

// guestHandler adapts a guest method: it looks the guest up first.
func (s *Server) guestHandler(typ proxmox.GuestType, fn func(c *call, g *guest) answer) func(c *call) answer {
	return func(c *call) answer {
		g, a, found := s.lookupGuest(c, typ)
		if !found {
			return a
		}
		return fn(c, g)
	}
}

// getGuestStatus is GET .../status/current.
func (s *Server) getGuestStatus(_ *call, g *guest) answer {
	n, _ := s.state.node(g.node)
	return ok(g.statusJSON(*n, time.Now()))
}

// getGuestConfig is GET .../config.
func (s *Server) getGuestConfig(_ *call, g *guest) answer { return ok(g.configJSON()) }

// notRunningMsg is PVE's refusal of an operation that needs a running guest.
func notRunningMsg(g *guest) answer {
	return fail(http.StatusInternalServerError, g.label()+" not running")
}

// restart is the effect of a reboot or reset: running again, not paused.
func restart(g *guest) func(time.Time) { return func(t time.Time) { g.start(t) } }

// powerStart is POST .../status/start (qmstart / vzstart).
func (s *Server) powerStart(c *call, g *guest) answer {
	if g.typ == proxmox.GuestLXC {
		if g.status == stateRunning {
			return fail(http.StatusInternalServerError, g.label()+" already running")
		}
		if g.task != "" {
			return g.lockTimeout()
		}
		failure := ""
		if g.template() {
			failure = "you can't start a CT if it's a template"
		}
		return s.startTask(c, g, "vzstart", "", failure, func(t time.Time) { g.start(t) })
	}
	if g.task != "" {
		return g.lockTimeout()
	}
	failure := ""
	switch {
	case g.status == stateRunning:
		failure = g.label() + " already running"
	case g.template():
		failure = "you can't start a vm if it's a template"
	}
	return s.startTask(c, g, "qmstart", "", failure, func(t time.Time) { g.start(t) })
}

// powerStop is POST .../status/stop: immediate; for a stopped VM a no-op task, for a
// stopped container PVE's refusal.
func (s *Server) powerStop(c *call, g *guest) answer {
	if g.typ == proxmox.GuestLXC && g.status != stateRunning {
		return notRunningMsg(g)
	}
	if g.task != "" {
		return g.lockTimeout()
	}
	typ := "qmstop"
	if g.typ == proxmox.GuestLXC {
		typ = "vzstop"
	}
	return s.startTask(c, g, typ, "", "", func(time.Time) { g.stop() })
}

// powerShutdown is POST .../status/shutdown: a paused VM cannot shut down.
func (s *Server) powerShutdown(c *call, g *guest) answer {
	if g.typ == proxmox.GuestLXC && g.status != stateRunning {
		return notRunningMsg(g)
	}
	if g.paused {
		return fail(http.StatusInternalServerError, "VM is paused - cannot shutdown")
	}
	if g.task != "" {
		return g.lockTimeout()
	}
	typ := "qmshutdown"
	if g.typ == proxmox.GuestLXC {
		typ = "vzshutdown"
	}
	return s.startTask(c, g, typ, "", "", func(time.Time) { g.stop() })
}

// powerReboot is POST .../status/reboot. PVE's container reboot says "VM", not "CT".
func (s *Server) powerReboot(c *call, g *guest) answer {
	if g.paused {
		return fail(http.StatusInternalServerError, "VM is paused - cannot shutdown")
	}
	if g.status != stateRunning {
		return fail(http.StatusInternalServerError, fmt.Sprintf("VM %d not running", g.vmid))
	}
	if g.task != "" {
		return g.lockTimeout()
	}
	typ := "qmreboot"
	if g.typ == proxmox.GuestLXC {
		typ = "vzreboot"
	}
	return s.startTask(c, g, typ, "", "", restart(g))
}

// qemuRunning is a QEMU power method that needs a running VM (reset, suspend, resume).
func (s *Server) qemuRunning(typ string, effect func(g *guest) func(time.Time)) func(c *call, g *guest) answer {
	return func(c *call, g *guest) answer {
		if g.status != stateRunning {
			return notRunningMsg(g)
		}
		if g.task != "" {
			return g.lockTimeout()
		}
		return s.startTask(c, g, typ, "", "", effect(g))
	}
}

// pause and unpause are the effects of suspend and resume.
func pause(g *guest) func(time.Time)   { return func(time.Time) { g.paused = true } }
func unpause(g *guest) func(time.Time) { return func(time.Time) { g.paused = false } }
