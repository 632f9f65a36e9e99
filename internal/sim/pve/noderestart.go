package simpve

import (
	"fmt"
	"net/http"
	"time"
)

// nodeUnreachable is pveproxy's answer for a node it cannot reach.
func nodeUnreachable() answer { return fail(595, "No route to host") }

// nodeDown reports the answer for a request addressed to an offline node; Server.mu is held.
func (s *Server) nodeDown(name string) (answer, bool) {
	if n, found := s.state.node(name); found && n.status != "online" {
		return nodeUnreachable(), true
	}
	return answer{}, false
}

// nodeCommand is POST /nodes/{node}/status: command=reboot makes the node unreachable for
// the reboot duration; its guests are stopped and its running tasks end unexpectedly.
// PVE answers null.
func (s *Server) nodeCommand(c *call) answer {
	name := c.r.PathValue("node")
	n, found := s.state.node(name)
	if !found {
		return unknownNode(name)
	}
	if c.params.Get("command") == "shutdown" { // the schema allows reboot and shutdown
		return fail(http.StatusInternalServerError, "sim/pve: node shutdown is not simulated")
	}
	now := time.Now()
	for _, t := range s.state.tasks {
		if t.node == name && !t.done {
			t.fault = "unexpected status"
			s.finishTask(t, now)
		}
	}
	for _, g := range s.state.guests {
		if g.node == name {
			g.stop()
		}
	}
	if s.rebootDur > 0 {
		n.status, n.downUntil = "offline", now.Add(s.rebootDur)
	}
	return ok(nil)
}

// getNetwork is GET /nodes/{node}/network: eno1/eno2 and the bridges vmbr0/vmbr1 on every node.
func (s *Server) getNetwork(c *call) answer {
	name := c.r.PathValue("node")
	if _, found := s.state.node(name); !found {
		return unknownNode(name)
	}
	typ := c.params.Get("type") // one of the schema's enumeration, or none
	idx := 1
	for i, n := range s.state.nodes {
		if n.name == name {
			idx = i + 1
		}
	}
	ifaces := []map[string]any{
		{"iface": "eno1", "type": "eth", "method": "manual", "method6": "manual", "active": 1, "exists": 1, "families": []string{"inet"}, "priority": 3},
		{"iface": "eno2", "type": "eth", "method": "manual", "method6": "manual", "active": 1, "exists": 1, "families": []string{"inet"}, "priority": 4},
		{"iface": "vmbr0", "type": "bridge", "method": "static", "method6": "manual", "active": 1, "autostart": 1,
			"bridge_ports": "eno1", "bridge_stp": "off", "bridge_fd": "0", "bridge_vlan_aware": 1, "bridge_vids": "2-4094",
			"address": fmt.Sprintf("10.0.0.%d", 10+idx), "netmask": "24", "cidr": fmt.Sprintf("10.0.0.%d/24", 10+idx),
			"gateway": "10.0.0.1", "families": []string{"inet"}, "priority": 5},
		{"iface": "vmbr1", "type": "bridge", "method": "manual", "method6": "manual", "active": 1, "autostart": 1,
			"bridge_ports": "eno2", "bridge_stp": "off", "bridge_fd": "0", "bridge_vlan_aware": 1, "bridge_vids": "2-4094",
			"families": []string{"inet"}, "priority": 6},
	}
	out := []map[string]any{}
	for _, it := range ifaces {
		t, _ := it["type"].(string)
		switch typ {
		case "", "include_sdn":
		case "any_bridge", "any_local_bridge":
			if t != "bridge" && t != "OVSBridge" {
				continue
			}
		default:
			if t != typ {
				continue
			}
		}
		out = append(out, it)
	}
	return ok(out)
}
