package proxmox

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/proxbus/proxbus/internal/redact"
)

// Plan records the writes of a dry run (contract §4a) instead of sending them: see
// [Client.Planning]. It is safe for concurrent use.
type Plan struct {
	mu     sync.Mutex
	writes []PlannedWrite
}

// PlannedWrite is one write a dry run would send: its method, its API path below /api2/json,
// and its parameters by name, secret values replaced by [redact.Placeholder].
type PlannedWrite struct {
	Method string            `json:"method"`
	Path   string            `json:"path"`
	Params map[string]string `json:"params,omitempty"`
}

// Writes returns the writes recorded so far, in the order they were made.
func (p *Plan) Writes() []PlannedWrite {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.writes)
}

// plannedUser is the user part of the UPIDs a plan answers with: no PVE user looks like it.
const plannedUser = "proxbus-dry-run"

// IsPlannedUPID reports whether upid is one a [Plan] answered with, a task that never ran.
func IsPlannedUPID(upid string) bool {
	u, err := ParseUPID(upid)
	return err == nil && u.User == plannedUser
}

// Planning returns a copy of c whose writes (every request but GET) are recorded in p and not
// sent, each answered as Proxmox accepts one: a write that starts a task gets a UPID, and
// waiting for such a task ends at once, OK. Reads are sent as usual, so a later read of what a
// planned write would have made finds nothing.
func (c *Client) Planning(p *Plan) *Client {
	cp := *c
	cp.plan = p
	return &cp
}

// record notes r as a planned write, its secret values (scrub, the request's own, and every
// secret-named parameter) replaced.
func (p *Plan) record(r request, scrub []string) {
	w := PlannedWrite{Method: r.method, Path: r.path}
	params := url.Values{}
	for k, v := range r.query {
		params[k] = v
	}
	for k, v := range r.form {
		params[k] = v
	}
	if len(params) > 0 {
		w.Params = make(map[string]string, len(params))
		keys := make([]string, 0, len(params))
		for k := range params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		secrets := append(slices.Clone(scrub), r.secrets...)
		for _, k := range keys {
			v := strings.Join(params[k], ",")
			if redact.IsSecretName(k) || slices.Contains(secrets, v) {
				v = redact.Placeholder
			} else {
				v = redact.Values(v, secrets...)
			}
			w.Params[k] = v
		}
	}
	p.mu.Lock()
	p.writes = append(p.writes, w)
	p.mu.Unlock()
}

// plannedUPID is the UPID a planned write that starts a task is answered with: on the node its
// path names ("localhost" for cluster-wide paths), of the type and id the path suggests.
func plannedUPID(r request) string {
	parts := strings.Split(strings.Trim(r.path, "/"), "/")
	u := UPID{Node: "localhost", Type: "planned", User: plannedUser, StartTime: time.Now().Truncate(time.Second).UTC()}
	if len(parts) > 1 && parts[0] == "nodes" {
		if node, err := url.PathUnescape(parts[1]); err == nil {
			u.Node = node
		}
	}
	if len(parts) > 3 && (parts[2] == string(GuestQEMU) || parts[2] == string(GuestLXC)) {
		u.ID = parts[3]
	}
	if n := len(parts); n > 0 && r.method != http.MethodDelete {
		u.Type = strings.ReplaceAll(parts[n-1], "_", "")
	}
	return u.String()
}

// ErrPlannedShell is what a node command run in a dry run answers: it is recorded, not run,
// and nothing it would have printed is known, so the plan stops after it.
var ErrPlannedShell = errors.New("proxmox: a node command is not run in a dry run")

// NodeShell returns the shell of the node at host over the endpoint's SSH access (see
// [DialNodeShell]). In a dry run ([Client.Planning]) it returns a shell that records each
// command as a planned write (method SSH, path the host) instead of running it.
func (c *Client) NodeShell(ctx context.Context, host string) (NodeShell, error) {
	if c.plan != nil {
		return plannedShell{plan: c.plan, host: host}, nil
	}
	return DialNodeShell(ctx, c.cfg.SSH, host)
}

// plannedShell is the NodeShell of a dry run.
type plannedShell struct {
	plan *Plan
	host string
}

func (s plannedShell) Run(_ context.Context, cmd string) (string, error) {
	s.plan.mu.Lock()
	s.plan.writes = append(s.plan.writes, PlannedWrite{Method: "SSH", Path: s.host, Params: map[string]string{"command": commandName(cmd)}})
	s.plan.mu.Unlock()
	return "", ErrPlannedShell
}
