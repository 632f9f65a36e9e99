package simpve

import (
	"time"
)

// Version reported by GET /version.
const (
	SimVersion = "9.2.0"
	SimRelease = "9.2"
	SimRepoID  = "5a1b2c3d4e5f6a7b"
)

func (s *Server) getVersion(*call) answer {
	return ok(map[string]any{"version": SimVersion, "release": SimRelease, "repoid": SimRepoID})
}

func (s *Server) getNodes(*call) answer {
	out := make([]map[string]any, 0, len(s.state.nodes))
	for _, n := range s.state.nodes {
		out = append(out, nodeJSON(n))
	}
	return ok(out)
}

func nodeJSON(n node) map[string]any {
	m := map[string]any{
		"node": n.name, "status": n.status, "type": "node", "id": "node/" + n.name, "level": "",
		"maxcpu": n.maxCPU, "maxmem": n.maxMem, "maxdisk": int64(100 << 30),
	}
	if n.status == "online" {
		m["cpu"] = 0.02
		m["mem"] = n.maxMem / 8
		m["disk"] = int64(12 << 30)
		m["uptime"] = 864000
	}
	return m
}

func (s *Server) getClusterResources(c *call) answer {
	typ := c.params.Get("type") // one of the schema's enumeration, or none
	out := []map[string]any{}
	if typ == "" || typ == "node" {
		for _, n := range s.state.nodes {
			out = append(out, nodeJSON(n))
		}
	}
	if typ == "" || typ == "vm" {
		now := time.Now()
		for _, id := range s.state.guestIDs() {
			g := s.state.guests[id]
			n, found := s.state.node(g.node)
			if !found {
				continue
			}
			out = append(out, g.resourceJSON(*n, now))
		}
	}
	if typ == "" || typ == "storage" {
		out = append(out, s.state.storageResources()...)
	}
	return ok(out)
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
