package simpve

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// pbsOptions are the options PBSPlugin accepts; required ones (fixed) first.
var (
	pbsRequired = []string{"server", "datastore"}
	pbsOptional = []string{"namespace", "port", "nodes", "disable", "content", "username", "password",
		"encryption-key", "master-pubkey", "prune-backups", "max-protected-backups", "fingerprint"}
	pbsContent = []string{"backup", "none"}
)

// getStorages is GET /storage: every storage the token may audit.
func (s *Server) getStorages(c *call) answer {
	out := []map[string]any{}
	if !c.token.has(privAudit) && !c.token.has("Datastore.AllocateSpace") {
		return ok(out)
	}
	digest := s.state.digest()
	for _, id := range s.state.storageIDs() {
		m, _ := s.state.storageJSONWith(id, digest)
		out = append(out, m)
	}
	return ok(out)
}

// getStorage is GET /storage/{storage}; a missing storage is PVE's 500 "does not exist".
func (s *Server) getStorage(c *call) answer {
	id := c.r.PathValue("storage")
	m, found := s.state.storageJSON(id)
	if !found {
		return fail(http.StatusInternalServerError, fmt.Sprintf("storage '%s' does not exist", id))
	}
	return ok(m)
}

// createStorage is POST /storage (its parameters passed PVE's schema checks): the
// plugin's option checks (500, as pve-storage dies), then the locked create (500 "already
// defined").
func (s *Server) createStorage(c *call) answer {
	p := c.params
	id, typ := p.Get("storage"), p.Get("type")
	if typ != "pbs" {
		return fail(http.StatusInternalServerError, fmt.Sprintf("sim/pve: creating storage of type '%s' is not simulated", typ))
	}
	cfg := proxmox.StorageConfig{"storage": id, "type": typ}
	for k := range p {
		if k == "storage" || k == "type" {
			continue
		}
		if !contains(pbsRequired, k) && !contains(pbsOptional, k) {
			return fail(http.StatusInternalServerError, fmt.Sprintf("unexpected property '%s'", k))
		}
		if v := p.Get(k); v != "" || k != "nodes" {
			cfg[k] = v
		}
	}
	for _, k := range pbsRequired {
		if _, ok := cfg[k]; !ok {
			return fail(http.StatusInternalServerError, fmt.Sprintf("missing value for required option '%s'", k))
		}
	}
	cfg["content"] = pbsContentValue(cfg["content"])
	if nodes, ok := cfg["nodes"]; ok {
		cfg["nodes"] = dedupeList(nodes)
	}
	if _, exists := s.state.storages[id]; exists {
		return fail(http.StatusInternalServerError, fmt.Sprintf("create storage failed: storage ID '%s' already defined", id))
	}
	s.state.putStorage(cfg) // drops the password: PVE keeps it in /etc/pve/priv/storage/<id>.pw
	s.state.setStorageSecret(id, p)
	return ok(map[string]any{"storage": id, "type": typ})
}

// pbsContentValue keeps the content types a PBS storage supports (others are dropped, as
// PVE warns and skips them); nothing left → "none".
func pbsContentValue(v string) string {
	var keep []string
	for _, ct := range splitList(v) {
		if contains(pbsContent, ct) && !contains(keep, ct) {
			keep = append(keep, ct)
		}
	}
	if len(keep) == 0 {
		if v == "" {
			return "backup" // the plugin's default content
		}
		return "none"
	}
	return strings.Join(keep, ",")
}

// splitList splits PVE's comma/space/semicolon separated lists.
func splitList(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ';' || r == ' ' || r == '\t' })
}

// dedupeList removes duplicate list entries, keeping the first occurrence.
func dedupeList(v string) string {
	var out []string
	for _, x := range splitList(v) {
		if !contains(out, x) {
			out = append(out, x)
		}
	}
	return strings.Join(out, ",")
}
