package harness

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// HTTPCounter is an http.Handler middleware that counts requests by method and path pattern
// (every path segment that starts with a digit becomes "{n}", so /api/extras/journal-entries/17/
// counts as /api/extras/journal-entries/{n}/). Safe for concurrent use.
type HTTPCounter struct {
	timeline *Timeline
	mu       sync.Mutex
	counts   map[string]int
}

// NewHTTPCounter returns an empty counter. With a timeline it also marks each request's
// arrival ("GET /path in") and the return of its handler ("GET /path out").
func NewHTTPCounter(tl *Timeline) *HTTPCounter {
	return &HTTPCounter{timeline: tl, counts: map[string]int{}}
}

// Wrap returns next with every request counted before it is served.
func (c *HTTPCounter) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Method + " " + pattern(r.URL.Path)
		c.timeline.Mark(key + " in")
		c.mu.Lock()
		c.counts[key]++
		c.mu.Unlock()
		next.ServeHTTP(w, r)
		c.timeline.Mark(key + " out")
	})
}

// Snapshot returns a copy of the counts so far.
func (c *HTTPCounter) Snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

// Reset forgets every count.
func (c *HTTPCounter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.counts)
}

func pattern(path string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if p != "" && p[0] >= '0' && p[0] <= '9' {
			parts[i] = "{n}"
		}
	}
	return strings.Join(parts, "/")
}

// Total sums counts.
func Total(counts map[string]int) int {
	n := 0
	for _, v := range counts {
		n += v
	}
	return n
}

// FormatCounts renders counts sorted by key, one "key=n" per item, each divided by per
// (when per > 0, shown with one decimal as a per-command figure).
func FormatCounts(counts map[string]int, per int) string {
	var b strings.Builder
	for i, k := range slices.Sorted(maps.Keys(counts)) {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k)
		b.WriteString("=")
		if per > 0 {
			fmt.Fprintf(&b, "%.2f", float64(counts[k])/float64(per))
		} else {
			fmt.Fprintf(&b, "%d", counts[k])
		}
	}
	return b.String()
}
