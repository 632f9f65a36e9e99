package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/proxbus/proxbus/bench/internal/harness"
)

// timedHandler records how long each request spent in the handler it wraps: from the call
// of ServeHTTP to its return, that is until the last byte was written to the connection.
type timedHandler struct {
	next http.Handler
	last atomic.Int64 // nanoseconds of the newest request that ended
}

func (t *timedHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	t.next.ServeHTTP(w, r)
	t.last.Store(int64(time.Since(start)))
}

// client asks the console with the read token.
type client struct {
	base, token string
	hc          *http.Client
}

func (c client) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return body, nil
}

var (
	heldRe  = regexp.MustCompile(`id="held">(\d+)<`)
	totalRe = regexp.MustCompile(`id="total">(\d+)<`)
	liveRe  = regexp.MustCompile(`data-live="([^"]*)"`)
	rowMark = []byte(`<tr id="c-`)
)

// count reads the number in the element matching re of a page, -1 when it has none.
func count(page []byte, re *regexp.Regexp) int {
	m := re.FindSubmatch(page)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// waitHeld polls the list until it holds held commands of which finished have succeeded.
func waitHeld(ctx context.Context, c client, held, finished int) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for {
		page, err := c.get(ctx, "/ui/commands?limit=1")
		if err != nil {
			return err
		}
		if count(page, heldRe) == held {
			page, err = c.get(ctx, "/ui/commands?status=done&limit=1")
			if err != nil {
				return err
			}
			if count(page, totalRe) == finished {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the console did not hold %d commands (%d succeeded) in time: %w", held, finished, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// renderCase is one page whose render time is measured.
type renderCase struct {
	path string
	rows int // rows the page must hold
}

// renderResult is what the requests of one case gave.
type renderResult struct {
	renderCase
	bytes            int
	handler, clients []time.Duration // sorted
	allocPerReq      uint64
}

// measureRender asks for c.path requests times, one at a time after two warm-up requests,
// and times each in the handler (th) and at the client (request sent to last byte read).
func measureRender(ctx context.Context, cl client, th *timedHandler, rc renderCase, requests int) (renderResult, error) {
	res := renderResult{renderCase: rc}
	for range 2 {
		if _, err := cl.get(ctx, rc.path); err != nil {
			return res, err
		}
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range requests {
		start := time.Now()
		page, err := cl.get(ctx, rc.path)
		if err != nil {
			return res, err
		}
		res.clients = append(res.clients, time.Since(start))
		res.handler = append(res.handler, time.Duration(th.last.Load()))
		if n := bytes.Count(page, rowMark); n != rc.rows {
			return res, fmt.Errorf("%s: %d rows rendered, want %d", rc.path, n, rc.rows)
		}
		res.bytes = len(page)
	}
	runtime.ReadMemStats(&after)
	res.allocPerReq = (after.TotalAlloc - before.TotalAlloc) / uint64(requests)
	slices.Sort(res.handler)
	slices.Sort(res.clients)
	return res, nil
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + " ms"
}

func printRender(results []renderResult) {
	fmt.Println("| page | rows | body | handler p50 | p99 | max | client p50 | allocated per request |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		fmt.Printf("| `%s` | %d | %.2f MB | %s | %s | %s | %s | %.1f MB |\n", r.path, r.rows, float64(r.bytes)/1e6,
			ms(harness.Percentile(r.handler, 50)), ms(harness.Percentile(r.handler, 99)), ms(r.handler[len(r.handler)-1]),
			ms(harness.Percentile(r.clients, 50)), float64(r.allocPerReq)/1e6)
	}
}
