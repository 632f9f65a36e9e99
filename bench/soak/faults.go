package main

import (
	"bytes"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// faults is the soak's fault switchboard for the simulators, applied by HTTP middleware in
// front of their handlers (so the simulators' own files stay untouched). All fields are
// safe for concurrent use.
type faults struct {
	mu            sync.Mutex
	lostRate      float64       // PVE: share of write answers dropped after the write applied
	spike         time.Duration // PVE: latency added to every request while > 0
	patchFailRate float64       // NetBox: share of journal PATCHes answered 503 without effect

	lostAnswers  atomic.Int64
	spiked       atomic.Int64
	patchFailed  atomic.Int64
	pveWrites    atomic.Int64
	netboxPatchs atomic.Int64
	writes       writeLog
}

func (f *faults) setLostRate(p float64) { f.mu.Lock(); f.lostRate = p; f.mu.Unlock() }
func (f *faults) setSpike(d time.Duration) {
	f.mu.Lock()
	f.spike = d
	f.mu.Unlock()
}
func (f *faults) setPatchFailRate(p float64) { f.mu.Lock(); f.patchFailRate = p; f.mu.Unlock() }

func (f *faults) snapshot() (lost float64, spike time.Duration, patch float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lostRate, f.spike, f.patchFailRate
}

// isWrite reports whether a PVE request changes state.
func isWrite(method string) bool {
	return method == http.MethodPost || method == http.MethodPut || method == http.MethodDelete
}

// pve wraps the PVE simulator: latency spikes on every request, and "lost answers": a write
// is applied by the simulator and then the connection is closed without a response.
func (f *faults) pve(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lost, spike, _ := f.snapshot()
		if spike > 0 {
			f.spiked.Add(1)
			select {
			case <-time.After(spike):
			case <-r.Context().Done():
				return
			}
		}
		if !isWrite(r.Method) {
			next.ServeHTTP(w, r)
			return
		}
		f.pveWrites.Add(1)
		rec := writeRec{At: time.Now(), Method: r.Method, Path: strings.TrimPrefix(r.URL.Path, "/api2/json"), Params: readResourceParams(r)}
		if lost <= 0 || rand.Float64() >= lost {
			cw := &capture{ResponseWriter: w}
			next.ServeHTTP(cw, r)
			rec.Status, rec.UPID = cw.status, upidOf(cw.body.Bytes())
			f.writes.add(rec)
			return
		}
		dw := newDiscardWriter()
		next.ServeHTTP(dw, r) // applied …
		f.lostAnswers.Add(1)
		rec.Status, rec.UPID, rec.Lost = dw.status, upidOf(dw.body.Bytes()), true
		f.writes.add(rec)
		dropConn(w) // … and the answer is lost
	})
}

// netbox wraps the NetBox simulator: journal PATCHes fail with 503 at the configured rate.
func (f *faults) netbox(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch && strings.HasPrefix(r.URL.Path, "/api/extras/journal-entries/") {
			f.netboxPatchs.Add(1)
			_, _, p := f.snapshot()
			if p > 0 && rand.Float64() < p {
				f.patchFailed.Add(1)
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte("<html><body><h1>503 Service Unavailable</h1></body></html>\n"))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// dropConn closes the client's connection without an answer.
func dropConn(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	w.WriteHeader(http.StatusBadGateway)
}

// discardWriter is a ResponseWriter that keeps nothing. It is not a Hijacker, so the
// simulator writes its answer through it with the standard status line.
type discardWriter struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func newDiscardWriter() *discardWriter { return &discardWriter{h: http.Header{}} }

func (d *discardWriter) Header() http.Header { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) {
	if d.status == 0 {
		d.status = http.StatusOK
	}
	return d.body.Write(b)
}
func (d *discardWriter) WriteHeader(s int) { d.status = s }
