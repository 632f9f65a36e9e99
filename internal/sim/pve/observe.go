package simpve

import (
	"net/url"
	"strings"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// RequestRecord is one request the simulator read.
type RequestRecord struct {
	Method string
	Path   string // concrete API path below /api2/json, e.g. "/storage/pbs1"
	// Route is the schema path the request was routed to, e.g. "/storage/{storage}"; "" when
	// it matched no method proxbus uses (answered 501).
	Route  string
	Params url.Values // query and body parameters; sensitive values are "[redacted]"
	Status int        // the status answered (or that would have been, when Dropped)
	// Dropped is true when the connection was closed instead of answering.
	Dropped bool
	// At is when the simulator answered it.
	At time.Time
}

// record appends to the request log; Server.mu is held.
func (s *Server) record(rec RequestRecord) {
	s.counts[rec.Method+" "+rec.Path]++
	s.reqLog = append(s.reqLog, rec)
}

// Requests returns how many requests with this method and concrete path ("/storage/pbs1")
// the simulator has read (requests refused while unreachable are not counted).
func (s *Server) Requests(method, path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[strings.ToUpper(method)+" "+path]
}

// RequestLog returns a copy of every request read so far, oldest first.
func (s *Server) RequestLog() []RequestRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]RequestRecord, len(s.reqLog))
	for i, r := range s.reqLog {
		r.Params = cloneValues(r.Params)
		out[i] = r
	}
	return out
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// StorageConfig returns storage id's configuration as GET /storage/{storage} would (with
// "storage", "digest" and the implied "shared"), and whether it exists. It never holds a
// password.
func (s *Server) StorageConfig(id string) (proxmox.StorageConfig, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.storageStrings(id)
}

// AddStorage adds or replaces the storage cfg["storage"] directly (no validation, no
// request logged). Sensitive keys (password, encryption-key, …) are not stored.
func (s *Server) AddStorage(cfg proxmox.StorageConfig) {
	if cfg["storage"] == "" {
		s.log.Error("sim/pve: AddStorage without a storage id")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state.putStorage(cfg)
}
