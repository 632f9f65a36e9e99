// Package health remembers which dependency of a running replica refuses it (NetBox or a
// Proxmox endpoint answering 401/403 to its token) or cannot be reached, so that /readyz can
// name it and the log says it without repeating itself: a problem is logged when it appears,
// then at most once per [LogEvery] while it lasts, and once more when it clears. Commands are
// not failed for it: they wait (contract §4 "Waiting is not failing"); this package only
// reports.
package health

import (
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// LogEvery is the least time between two log lines about one dependency's lasting problem.
const LogEvery = time.Minute

// Dependency describes one dependency to the [Tracker]: the name /readyz shows it under, how
// the log and /readyz name it, and what the operator fixes when it refuses the token.
type Dependency struct {
	// Name is the /readyz check name and the log's "dependency" value, e.g. "netbox" or
	// "proxmox/1".
	Name string
	// What names it for people, e.g. "NetBox" or "Proxmox endpoint 1 (lab)".
	What string
	// Fix says what to change when it refuses the token, e.g. "fix --netbox-token".
	Fix string
}

// Problem is why a dependency is not usable; it is the error [Tracker.Check] returns. Its
// Reason names no host, URL or secret, so it may be shown on /readyz.
type Problem struct {
	Dependency string
	Reason     string
}

// Error returns "DEPENDENCY: REASON".
func (p *Problem) Error() string { return p.Dependency + ": " + p.Reason }

// ReadyReason is the text /readyz shows for the problem.
func (p *Problem) ReadyReason() string { return p.Reason }

// Tracker holds the state of every registered dependency. It is safe for concurrent use; the
// zero value is not usable: build it with [New].
type Tracker struct {
	log *slog.Logger
	now func() time.Time

	mu   sync.Mutex
	deps map[string]*state
}

// state is one dependency's: the operations it refused (operation → HTTP status) and the
// reason it is unreachable ("" when it is not known to be).
type state struct {
	dep         Dependency
	refused     map[string]int
	unreachable string
	lastLog     time.Time
}

// New returns a tracker logging on log (nil: discard) with the clock now (nil: time.Now).
func New(log *slog.Logger, now func() time.Time) *Tracker {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	return &Tracker{log: log, now: now, deps: map[string]*state{}}
}

// Register declares d (registering a name again replaces its description and keeps its
// state). Refusals of a name never registered are recorded under the name alone.
func (t *Tracker) Register(d Dependency) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.state(d.Name).dep = d
}

// state returns name's state, creating it; t.mu is held.
func (t *Tracker) state(name string) *state {
	s, ok := t.deps[name]
	if !ok {
		s = &state{dep: Dependency{Name: name, What: name}, refused: map[string]int{}}
		t.deps[name] = s
	}
	return s
}

// Refused records that dependency name answered operation (e.g. "POST
// /api/extras/journal-entries/") with status 401 or 403: it refuses the token, or the token
// lacks a permission. It is logged when it starts and then at most once per LogEvery.
func (t *Tracker) Refused(name, operation string, status int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.state(name)
	first := len(s.refused) == 0
	s.refused[operation] = status
	now := t.now()
	if !first && now.Sub(s.lastLog) < LogEvery {
		return
	}
	s.lastLog = now
	t.log.Error(s.dep.Name+" refuses the token; commands wait", "component", "health", "dependency", s.dep.Name,
		"status", status, "operation", operation, "fix", s.dep.Fix)
}

// Accepted records a 2xx answer of dependency name to operation: the operation is no longer
// refused, and when a refusal was a 401 (the token itself refused) no operation is, since the
// token was accepted. When nothing is refused any more, one line says so.
func (t *Tracker) Accepted(name, operation string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.deps[name]
	if !ok || len(s.refused) == 0 {
		return
	}
	if slices.Contains(slices.Collect(maps.Values(s.refused)), http.StatusUnauthorized) {
		clear(s.refused)
	} else {
		delete(s.refused, operation)
	}
	if len(s.refused) == 0 {
		t.log.Info(s.dep.Name+" accepts the token again", "component", "health", "dependency", s.dep.Name)
	}
}

// Unreachable records that dependency name cannot be reached (reason names no host, e.g.
// "unreachable: connection refused"). It is logged when it starts and then at most once per
// LogEvery.
func (t *Tracker) Unreachable(name, reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.state(name)
	first := s.unreachable == ""
	s.unreachable = reason
	now := t.now()
	if !first && now.Sub(s.lastLog) < LogEvery {
		return
	}
	s.lastLog = now
	t.log.Warn(s.dep.Name+" is unreachable; its commands wait", "component", "health", "dependency", s.dep.Name, "reason", reason)
}

// Reachable clears Unreachable; when it was set, one line says so.
func (t *Tracker) Reachable(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.deps[name]
	if !ok || s.unreachable == "" {
		return
	}
	s.unreachable = ""
	t.log.Info(s.dep.Name+" is reachable again", "component", "health", "dependency", s.dep.Name)
}

// Check returns nil when dependency name is neither refusing nor unreachable, else a
// *[Problem] saying which (a refusal first: it needs the operator).
func (t *Tracker) Check(name string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.deps[name]
	switch {
	case !ok:
		return nil
	case len(s.refused) > 0:
		ops := slices.Sorted(maps.Keys(s.refused))
		status := s.refused[ops[0]]
		reason := fmt.Sprintf("token refused (HTTP %d) on %s", status, strings.Join(ops, ", "))
		if s.dep.Fix != "" {
			reason += "; " + s.dep.Fix
		}
		return &Problem{Dependency: name, Reason: reason + "; commands wait"}
	case s.unreachable != "":
		return &Problem{Dependency: name, Reason: s.unreachable + "; its commands wait"}
	}
	return nil
}

// Usable returns every dependency the tracker knows with whether it is usable ([Tracker.Check]
// returns nil), for the proxbus_dependency_up metric.
func (t *Tracker) Usable() map[string]bool {
	t.mu.Lock()
	names := slices.Collect(maps.Keys(t.deps))
	t.mu.Unlock()
	out := make(map[string]bool, len(names))
	for _, n := range names {
		out[n] = t.Check(n) == nil
	}
	return out
}

// Transport returns a RoundTripper sending through next (http.DefaultTransport when nil) that
// reports each answer of dependency name: a status refusal says is a refusal ([Tracker.Refused]),
// a 2xx an acceptance ([Tracker.Accepted]) and also that it is reachable ([Tracker.Reachable]);
// other answers and transport errors are not recorded. op names a request's operation with a
// bounded vocabulary (no ids).
func (t *Tracker) Transport(name string, op func(*http.Request) string, refusal func(status int) bool, next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return observed{t: t, name: name, op: op, refusal: refusal, next: next}
}

// observed is the RoundTripper of [Tracker.Transport].
type observed struct {
	t       *Tracker
	name    string
	op      func(*http.Request) string
	refusal func(int) bool
	next    http.RoundTripper
}

// RoundTrip sends r and records its answer's status.
func (o observed) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := o.next.RoundTrip(r)
	if err != nil || resp == nil {
		return resp, err
	}
	switch {
	case o.refusal(resp.StatusCode):
		o.t.Refused(o.name, o.op(r), resp.StatusCode)
	case resp.StatusCode >= 200 && resp.StatusCode <= 299:
		o.t.Accepted(o.name, o.op(r))
		o.t.Reachable(o.name)
	}
	return resp, err
}

// NetBoxRefusal is NetBox's refusal of a token: 401, or 403 (an invalid token, or one
// without the permission).
func NetBoxRefusal(status int) bool {
	return status == http.StatusUnauthorized || status == http.StatusForbidden
}

// ProxmoxRefusal is Proxmox's refusal of a token: 401 (403 is a missing privilege, an
// outcome of the command: proxmox_refused).
func ProxmoxRefusal(status int) bool { return status == http.StatusUnauthorized }
