package simnetbox

import (
	"net/http"
	"strings"
	"time"
)

// Handler returns the simulator's HTTP handler: every request is counted, then delayed,
// failed or refused as the injected faults and its credentials say, then routed.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/status/{$}", s.status)
	mux.HandleFunc("GET /api/plugins/proxbox/endpoints/proxmox/{$}", s.listEndpoints)
	mux.HandleFunc("GET /api/plugins/proxbox/endpoints/proxmox/{id}/{$}", s.getEndpoint)
	mux.HandleFunc("POST /api/extras/journal-entries/{$}", s.createEntry)
	mux.HandleFunc("GET /api/extras/journal-entries/{$}", s.listEntries)
	mux.HandleFunc("GET /api/extras/journal-entries/{id}/{$}", s.getEntry)
	mux.HandleFunc("PATCH /api/extras/journal-entries/{id}/{$}", s.patchEntry)
	mux.HandleFunc("GET /api/virtualization/virtual-machines/{$}", s.listVMs)
	mux.HandleFunc("GET /api/virtualization/virtual-machines/{id}/{$}", s.getVM)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { notFound(w) })
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		s.serve(rec, r, mux)
		s.log.Debug("simnetbox request", "method", r.Method, "path", r.URL.Path, "status", rec.status)
	})
}

// serve applies the request pipeline: count, latency, down, injected failure, auth, route.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	s.mu.Lock()
	s.requests[requestKey{r.Method, r.URL.Path}]++
	latency := s.latency
	s.mu.Unlock()

	if latency > 0 {
		t := time.NewTimer(latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}

	s.mu.Lock()
	down := s.down
	failStatus := 0
	if !down && s.failAll.n > 0 {
		s.failAll.n--
		failStatus = s.failAll.status
	}
	s.mu.Unlock()
	switch {
	case down:
		writeFault(w, http.StatusServiceUnavailable)
		return
	case failStatus != 0:
		writeFault(w, failStatus)
		return
	}

	if detail, ok := authenticate(r.Header.Get("Authorization")); !ok {
		writeJSON(w, http.StatusForbidden, map[string]string{"detail": detail})
		return
	}
	next.ServeHTTP(w, r)
}

// authenticate checks the Authorization header as NetBox 4.5+ does. It returns NetBox's
// refusal detail when the request is not authenticated.
func authenticate(header string) (string, bool) {
	scheme, cred, _ := strings.Cut(strings.TrimSpace(header), " ")
	cred = strings.TrimSpace(cred)
	switch {
	case strings.EqualFold(scheme, "Token"):
		if cred == TokenV1 {
			return "", true
		}
		return "Invalid v1 token", false
	case strings.EqualFold(scheme, "Bearer"):
		if cred == TokenV2 {
			return "", true
		}
		return "Invalid v2 token", false
	default:
		return "Authentication credentials were not provided.", false
	}
}

// statusRecorder remembers the status written, for the request log line.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

// WriteHeader records code and passes it on.
func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}
