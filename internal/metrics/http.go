package metrics

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ProxmoxTransport wraps next so that every Proxmox request is measured under the endpoint
// label endpoint (the endpoint's id) and the operation op(r) names (it must return a bounded
// vocabulary, e.g. proxmox.APIOperation).
func (m *Metrics) ProxmoxTransport(endpoint string, op func(*http.Request) string, next http.RoundTripper) http.RoundTripper {
	return measured{next: next, now: m.now, op: op, observe: func(operation, code string, d time.Duration, kind string) {
		m.proxmoxDuration.WithLabelValues(endpoint, operation, code).Observe(d.Seconds())
		if kind != "" {
			m.proxmoxErrors.WithLabelValues(endpoint, operation, kind).Inc()
		}
	}}
}

// NetBoxTransport wraps next so that every NetBox request is measured by operation:
// [NetBoxOperation] unless op is given.
func (m *Metrics) NetBoxTransport(op func(*http.Request) string, next http.RoundTripper) http.RoundTripper {
	if op == nil {
		op = NetBoxOperation
	}
	return measured{next: next, now: m.now, op: op, observe: func(operation, code string, d time.Duration, kind string) {
		m.netboxDuration.WithLabelValues(operation, code).Observe(d.Seconds())
		if kind != "" {
			m.netboxErrors.WithLabelValues(operation, kind).Inc()
		}
	}}
}

// measured is a RoundTripper that times each request.
type measured struct {
	next    http.RoundTripper
	now     func() time.Time
	op      func(*http.Request) string
	observe func(operation, code string, d time.Duration, kind string)
}

func (t measured) RoundTrip(r *http.Request) (*http.Response, error) {
	next := t.next
	if next == nil {
		next = http.DefaultTransport
	}
	start := t.now()
	resp, err := next.RoundTrip(r)
	d := t.now().Sub(start)
	op := t.op(r)
	switch {
	case err != nil:
		t.observe(op, "error", d, errorKind(r.Context(), err))
	case resp.StatusCode >= 500:
		t.observe(op, statusClass(resp.StatusCode), d, "status_5xx")
	default:
		t.observe(op, statusClass(resp.StatusCode), d, "")
	}
	return resp, err
}

func statusClass(code int) string {
	if code < 100 || code > 599 {
		return "other"
	}
	return strconv.Itoa(code/100) + "xx"
}

func errorKind(ctx context.Context, err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(ctx.Err(), context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return "timeout"
	default:
		return "transport"
	}
}

// NetBoxOperation names a NetBox API request with a bounded vocabulary: its method and URL
// path with every segment that is not a lower-case word (ids, names) replaced by "{id}",
// e.g. "PATCH /api/virtualization/virtual-machines/{id}/". The query string never appears.
func NetBoxOperation(r *http.Request) string {
	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	if r.URL == nil {
		return method + " other"
	}
	path := r.URL.Path
	i := strings.Index(path, "/api/")
	if i < 0 {
		return method + " other"
	}
	segs := strings.Split(path[i+1:], "/")
	for j, s := range segs {
		if s != "" && !isWord(s) {
			segs[j] = "{id}"
		}
	}
	return method + " /" + strings.Join(segs, "/")
}

// isWord reports whether s is a lower-case API word (letters, '-', '_'), not an id.
func isWord(s string) bool {
	if len(s) > 48 {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && r != '-' && r != '_' {
			return false
		}
	}
	return true
}
