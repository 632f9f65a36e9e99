package simpve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// APIPrefix is where the API is mounted, as on a real node.
const APIPrefix = "/api2/json"

// Options configure a [Server].
type Options struct {
	// Scenario selects the initial state: ScenarioDemo ("demo") or ScenarioEmpty ("": nodes
	// pve1..pve3 and the demo tokens, no storages). An unknown name is logged and treated as
	// empty; validate user input with [Scenarios].
	Scenario string
	// Logger receives one debug line per request (parameters redacted); nil discards.
	Logger *slog.Logger
	// TaskDuration is how long every task (power, snapshot) runs before it ends: 0 means
	// DefaultTaskDuration, a negative value makes tasks end as soon as they start. Change
	// it later with [Server.SetTaskDuration].
	TaskDuration time.Duration
	// TaskSpread, between 0 and 1, spreads the durations of the worker tasks the API starts
	// (power, snapshots, migrations, clones, downloads, …; a backup, a disk move and a task
	// started by hand keep TaskDuration) over TaskDuration × (1 ± TaskSpread), as a real
	// cluster's tasks of one kind vary: task
	// n (the UPID's pid) lasts TaskDuration × (1 − TaskSpread + 2 × TaskSpread × frac(n × φ)),
	// so the durations are evenly spread, their mean is TaskDuration, and no two tasks started
	// in a row last the same. 0: every task lasts TaskDuration.
	TaskSpread float64
	// NodeRebootDuration is how long a node is unreachable after POST /nodes/{node}/status
	// command=reboot: 0 means DefaultNodeRebootDuration, negative means back at once.
	// Change it later with [Server.SetNodeRebootDuration].
	NodeRebootDuration time.Duration
}

// Defaults of [Options].
const (
	DefaultTaskDuration       = 50 * time.Millisecond
	DefaultNodeRebootDuration = time.Second
)

// Server is a simulated Proxmox VE cluster. Create it with [New]; serve it either through
// [Server.Handler] (e.g. under httptest.NewServer / NewTLSServer) or with [Server.Start].
// All methods are safe for concurrent use.
type Server struct {
	log     *slog.Logger
	handler http.Handler

	mu          sync.Mutex // guards the fields below
	state       *cluster
	latency     time.Duration
	failRules   []*failRule
	dropRules   []*dropRule
	unreachable bool
	counts      map[string]int
	reqLog      []RequestRecord
	taskDur     time.Duration       // <= 0: tasks end at once
	taskSpread  float64             // Options.TaskSpread
	rebootDur   time.Duration       // <= 0: nodes come back at once
	taskFaults  map[string][]string // "node/vmid" → exit statuses of its next tasks
	imageState                      // import volumes, node filesystems and addresses (images_state.go)

	lmu     sync.Mutex // guards the listener fields below
	addr    string     // address Start bound, reused when reachable again
	srv     *http.Server
	serveWG sync.WaitGroup
	closed  bool
	done    chan struct{} // closed by Close: aborts latency sleeps
}

// New builds a simulator in the state of opts.Scenario. It does not listen yet.
func New(opts Options) *Server {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if !slices.Contains(Scenarios(), opts.Scenario) {
		log.Warn("sim/pve: unknown scenario, using the empty cluster", "scenario", opts.Scenario)
		opts.Scenario = ScenarioEmpty
	}
	s := &Server{
		log:        log,
		state:      newCluster(opts.Scenario),
		counts:     map[string]int{},
		done:       make(chan struct{}),
		taskDur:    orDefault(opts.TaskDuration, DefaultTaskDuration),
		taskSpread: min(max(opts.TaskSpread, 0), 1),
		rebootDur:  orDefault(opts.NodeRebootDuration, DefaultNodeRebootDuration),
		taskFaults: map[string][]string{},
	}
	s.handler = s.buildHandler()
	return s
}

// orDefault is d, def when d is 0.
func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Handler returns the HTTP handler serving the API under /api2/json.
func (s *Server) Handler() http.Handler { return s.handler }

// Start listens on addr (":0" picks a free port) with plain HTTP and serves until Close.
// It returns the base URL, e.g. "http://127.0.0.1:38211" (without /api2/json).
func (s *Server) Start(addr string) (string, error) {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	if s.closed {
		return "", errors.New("sim/pve: server closed")
	}
	if s.addr != "" {
		return "", errors.New("sim/pve: already started")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("sim/pve: listen: %w", err)
	}
	s.addr = ln.Addr().String()
	s.mu.Lock()
	down := s.unreachable
	s.mu.Unlock()
	if down {
		// Unreachable before serving: remember the address, refuse connections until
		// SetUnreachable(false) listens on it again.
		_ = ln.Close()
	} else {
		s.serveLocked(ln)
	}
	return "http://" + s.addr, nil
}

// serveLocked serves ln in a goroutine owned by serveWG; lmu is held.
func (s *Server) serveLocked(ln net.Listener) {
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	s.srv = srv
	s.serveWG.Add(1)
	go func() {
		defer s.serveWG.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("sim/pve: serve", "err", err)
		}
	}()
}

// stopLocked closes the listener and every connection and waits for Serve to return; lmu is held.
func (s *Server) stopLocked() {
	if s.srv == nil {
		return
	}
	_ = s.srv.Close()
	s.serveWG.Wait()
	s.srv = nil
}

// Close stops serving (listener and connections) and aborts pending latency waits. It is
// idempotent and returns nil.
func (s *Server) Close() error {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	close(s.done)
	s.stopLocked()
	return nil
}

// SetUnreachable makes the cluster unreachable (true) or reachable again (false). Nothing is
// applied while unreachable. Started with [Server.Start], the listener is closed together
// with every open connection, so clients get "connection refused" (nothing sent); it is
// reopened on the same address afterwards. Mounted through [Server.Handler], every request
// is answered by closing the connection without reading it.
func (s *Server) SetUnreachable(down bool) {
	s.mu.Lock()
	changed := s.unreachable != down
	s.unreachable = down
	s.mu.Unlock()
	if !changed {
		return
	}
	s.lmu.Lock()
	defer s.lmu.Unlock()
	if s.closed || s.addr == "" {
		return
	}
	if down {
		s.stopLocked()
		return
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		s.log.Error("sim/pve: cannot listen again", "addr", s.addr, "err", err)
		return
	}
	s.serveLocked(ln)
}

// SetLatency delays every request by d before it is handled (0 disables).
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = d
}

// wait sleeps the configured latency unless the request or the server ends first.
func (s *Server) wait(ctx context.Context) {
	s.mu.Lock()
	d := s.latency
	s.mu.Unlock()
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-s.done:
	}
}

// drop closes the client's connection without answering. A connection that cannot be
// hijacked (HTTP/2, a recorder) gets a 500 saying so instead, and false is returned.
func (s *Server) drop(w http.ResponseWriter) bool {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return true
		}
	}
	s.log.Error("sim/pve: cannot drop a connection that is not HTTP/1.x")
	fail(http.StatusInternalServerError, "sim/pve: cannot drop the connection (not HTTP/1.x)").write(w)
	return false
}

// discard reads and drops a request body (so a plain close is not mistaken for a
// half-read request by net/http).
func discard(r *http.Request) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	}
}
