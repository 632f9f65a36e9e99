package simnetbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// The tokens every scenario accepts.
const (
	// TokenV1 is the v1 token, sent as "Authorization: Token <TokenV1>".
	TokenV1 = "0123456789abcdef0123456789abcdef01234567"
	// TokenV2 is the v2 token, sent as "Authorization: Bearer <TokenV2>".
	TokenV2 = "nbt_demo00000000.demo-secret"
)

// ScenarioDemo is the demo scenario: endpoint 1 "lab" (allow_writes true) and endpoint 2
// "lab-readonly" (allow_writes false), and the NetBox VM 1 "web-01" mirroring the PVE demo
// cluster's VM 100 (custom field proxmox_vm_id 100, cluster 1), so guest verbs on it journal on
// the VM.
const ScenarioDemo = "demo"

// ErrUnknownScenario is returned by CheckScenario for a scenario the simulator does not know.
var ErrUnknownScenario = errors.New("simnetbox: unknown scenario")

// CheckScenario returns nil for "" and "demo", else an error wrapping ErrUnknownScenario.
func CheckScenario(name string) error {
	if name == "" || name == ScenarioDemo {
		return nil
	}
	return fmt.Errorf("%w %q (want %q or empty)", ErrUnknownScenario, name, ScenarioDemo)
}

// Options configure a Server.
type Options struct {
	// Scenario is "demo" or "" (no endpoints). An unknown scenario is logged and treated as "".
	Scenario string
	// Logger receives one debug line per request (never a header value); discarded when nil.
	Logger *slog.Logger
	// Now is the clock for created/last_updated; time.Now when nil.
	Now func() time.Time
}

// Server is a simulated NetBox. All methods are safe for concurrent use.
type Server struct {
	log *slog.Logger
	now func() time.Time

	mu          sync.Mutex
	endpoints   map[int64]*endpoint
	vms         map[int64]*vm
	entries     map[int64]*Entry
	nextEntryID int64
	failPatches fault
	failAll     fault
	latency     time.Duration
	down        bool
	requests    map[requestKey]int

	srvMu   sync.Mutex
	httpSrv *http.Server
	served  chan struct{}
}

type endpoint struct {
	EndpointSpec
	Created, LastUpdated time.Time
}

// EndpointSpec is a ProxmoxEndpoint as the netbox-proxbox plugin stores it (the fields its
// API serializer renders; the token value is write-only and not kept).
type EndpointSpec struct {
	ID          int64
	Name        string
	AllowWrites bool
	// Domain is the endpoint's domain; "" renders null.
	Domain string
	// IPAddress is the NetBox IP address the endpoint points at, as NetBox renders it
	// ("192.0.2.10/24"); "" renders null.
	IPAddress string
	// Port is the API port; 0 means the plugin's default, 8006.
	Port      int
	VerifySSL bool
	// Username (USER@REALM) and TokenName name the API token USER@REALM!TOKENNAME.
	Username  string
	TokenName string
}

type vm struct {
	ID, ProxmoxVMID, ClusterID int64
	Name                       string
	Created                    time.Time
}

type fault struct {
	n, status int
}

type requestKey struct{ method, path string }

// Entry is a journal entry as the simulator stores it.
type Entry struct {
	ID          int64
	ObjectType  string
	ObjectID    int64
	Kind        string
	Comments    string
	Created     time.Time
	LastUpdated time.Time
	// Patches counts the PATCHes applied to the entry.
	Patches int
}

// New returns a server loaded with opts.Scenario. It listens nowhere until Start; Handler
// serves it in-process.
func New(opts Options) *Server {
	s := &Server{
		log:       opts.Logger,
		now:       opts.Now,
		endpoints: map[int64]*endpoint{},
		vms:       map[int64]*vm{},
		entries:   map[int64]*Entry{},
		requests:  map[requestKey]int{},
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if err := CheckScenario(opts.Scenario); err != nil {
		s.log.Error("simnetbox: unknown scenario, starting empty", "scenario", opts.Scenario)
	}
	if opts.Scenario == ScenarioDemo {
		s.AddEndpoint(1, "lab", true)
		s.AddEndpoint(2, "lab-readonly", false)
		s.AddVM(1, "web-01", 100, 1)
	}
	return s
}

// Start listens on addr ("" means 127.0.0.1:0) and serves until Close. It returns the base
// URL (http://host:port, no /api). Starting twice is an error.
func (s *Server) Start(addr string) (string, error) {
	s.srvMu.Lock()
	defer s.srvMu.Unlock()
	if s.httpSrv != nil {
		return "", errors.New("simnetbox: already started")
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("simnetbox: listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("simnetbox: serve", "err", err)
		}
	}()
	s.httpSrv, s.served = srv, done
	return "http://" + ln.Addr().String(), nil
}

// Close stops a started server and waits for its listener goroutine; requests in flight are
// cut off. Close without Start, or twice, returns nil.
func (s *Server) Close() error {
	s.srvMu.Lock()
	defer s.srvMu.Unlock()
	if s.httpSrv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.httpSrv.Shutdown(ctx)
	if err != nil {
		err = s.httpSrv.Close()
	}
	<-s.served
	s.httpSrv, s.served = nil, nil
	if err != nil {
		return fmt.Errorf("simnetbox: close: %w", err)
	}
	return nil
}

// AddEndpoint adds (or replaces) ProxmoxEndpoint id, at the domain <name>.pve.invalid with
// the token proxbus@pve!proxbus and verify_ssl true.
func (s *Server) AddEndpoint(id int64, name string, allowWrites bool) {
	s.PutEndpoint(EndpointSpec{ID: id, Name: name, AllowWrites: allowWrites, Domain: name + ".pve.invalid",
		VerifySSL: true, Username: "proxbus@pve", TokenName: "proxbus"})
}

// PutEndpoint adds ProxmoxEndpoint spec.ID, or changes it (its created time is kept, its
// last_updated is now), as creating or editing it in NetBox does.
func (s *Server) PutEndpoint(spec EndpointSpec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if spec.Port == 0 {
		spec.Port = 8006
	}
	now := s.now().UTC()
	created := now
	if old, ok := s.endpoints[spec.ID]; ok {
		created = old.Created
	}
	s.endpoints[spec.ID] = &endpoint{EndpointSpec: spec, Created: created, LastUpdated: now}
}

// DeleteEndpoint removes ProxmoxEndpoint id; unknown ids are ignored.
func (s *Server) DeleteEndpoint(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.endpoints, id)
}

// SetAllowWrites changes endpoint id's allow_writes; unknown ids are ignored.
func (s *Server) SetAllowWrites(id int64, allow bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.endpoints[id]; ok {
		e.AllowWrites = allow
		e.LastUpdated = s.now().UTC()
	}
}

// AddVM adds (or replaces) NetBox virtual machine id, with custom field proxmox_vm_id and
// cluster clusterID (0: none).
func (s *Server) AddVM(id int64, name string, proxmoxVMID int64, clusterID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vms[id] = &vm{ID: id, Name: name, ProxmoxVMID: proxmoxVMID, ClusterID: clusterID, Created: s.now().UTC()}
}

// FailPatches makes the next n PATCHes of journal entries answer status (e.g. 503) without
// applying them. n <= 0 clears the fault.
func (s *Server) FailPatches(n int, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failPatches = fault{n: max(n, 0), status: status}
}

// FailRequests makes the next n requests of any kind answer status without effect.
// n <= 0 clears the fault.
func (s *Server) FailRequests(n int, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failAll = fault{n: max(n, 0), status: status}
}

// SetLatency delays every answer by d (0: none). A request whose client goes away stops waiting.
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = d
}

// SetDown makes every request answer 503 while down is true.
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// JournalEntries returns copies of all journal entries, ordered by id.
func (s *Server) JournalEntries() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Entry, 0, len(s.entries))
	for _, e := range s.entries {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// JournalEntry returns a copy of entry id.
func (s *Server) JournalEntry(id int64) (Entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[id]
	if !ok {
		return Entry{}, false
	}
	return *e, true
}

// Requests counts the requests received (including refused and failed ones) whose method
// equals method ("" matches any) and whose path starts with pathPrefix.
func (s *Server) Requests(method, pathPrefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, c := range s.requests {
		if (method == "" || strings.EqualFold(method, k.method)) && strings.HasPrefix(k.path, pathPrefix) {
			n += c
		}
	}
	return n
}
