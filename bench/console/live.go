package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/proxbus/proxbus/bench/internal/harness"
)

// sseResult is what a Go client reading a live commands stream saw.
type sseResult struct {
	updates []sseUpdate
	delays  []time.Duration // first event published → row in the stream, per live command; sorted
}

// sseUpdate is one "rows" event of a live stream.
type sseUpdate struct {
	at          time.Time
	bytes, rows int
}

// rates returns the updates a second, rows per update and bytes a second of the updates
// that came in [from, to).
func (r sseResult) rates(from, to time.Time) (perSec, rowsPer, bytesPerSec float64) {
	n, rows, bytes := 0, 0, 0
	for _, u := range r.updates {
		if !u.at.Before(from) && u.at.Before(to) {
			n, rows, bytes = n+1, rows+u.rows, bytes+u.bytes
		}
	}
	sec := to.Sub(from).Seconds()
	return float64(n) / sec, float64(rows) / max(float64(n), 1), float64(bytes) / sec
}

// livePath returns the live stream of the list page at path, as the page names it (with
// since= the version it was rendered at).
func livePath(ctx context.Context, cl client, path string) (string, error) {
	page, err := cl.get(ctx, path)
	if err != nil {
		return "", err
	}
	m := liveRe.FindSubmatch(page)
	if m == nil {
		return "", fmt.Errorf("%s names no live stream", path)
	}
	return html.UnescapeString(string(m[1])), nil
}

// readSSE reads the live stream at path until ctx ends, timing each live command's first
// row (ids "c-<prefix>-…") from the publication of its first event.
func readSSE(ctx context.Context, cl client, path, prefix string, fs *firsts) (sseResult, error) {
	var res sseResult
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cl.base+path, nil)
	if err != nil {
		return res, err
	}
	req.Header.Set("Authorization", "Bearer "+cl.token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := cl.hc.Do(req)
	if err != nil {
		return res, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return res, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	seen := map[string]bool{}
	br := bufio.NewReaderSize(resp.Body, 1<<20)
	event := ""
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			slices.Sort(res.delays)
			if ctx.Err() != nil || errors.Is(err, io.EOF) {
				return res, nil
			}
			return res, fmt.Errorf("live stream: %w", err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			event = line[len("event: "):]
		case strings.HasPrefix(line, "data: ") && event == "rows":
			now := time.Now()
			var ev struct {
				Rows []struct {
					ID   string `json:"id"`
					HTML string `json:"html"`
				} `json:"rows"`
			}
			if err := json.Unmarshal([]byte(line[len("data: "):]), &ev); err != nil {
				return res, fmt.Errorf("live stream: rows: %w", err)
			}
			res.updates = append(res.updates, sseUpdate{at: now, bytes: len(line) + len("event: rows\n\n\n"), rows: len(ev.Rows)})
			for _, r := range ev.Rows {
				ref := strings.TrimPrefix(r.ID, "c-")
				if r.HTML == "" || seen[ref] || !strings.HasPrefix(ref, prefix+"-") {
					continue
				}
				seen[ref] = true
				if t, ok := fs.get(ref); ok {
					res.delays = append(res.delays, now.Sub(t))
				}
			}
		}
	}
}

// browserResult is what responsive.mjs reports (all times in milliseconds).
type browserResult struct {
	Rows           int       `json:"rows"`             // rows in the table at the end
	DOMContentLoad float64   `json:"domContentLoaded"` // navigation start → DOMContentLoaded
	Load           float64   `json:"load"`             // navigation start → load
	Lag            []float64 `json:"lag"`              // setInterval(50) drift samples, sorted
	LongTasks      []float64 `json:"longTasks"`        // durations
	Frames         []float64 `json:"frames"`           // requestAnimationFrame gaps, sorted
	Updates        []float64 `json:"updates"`          // time in the page's rows handler, per update, sorted
	RowsApplied    int       `json:"rowsApplied"`
	Inputs         int       `json:"inputs"`     // clicks and key presses made
	SlowInputs     []float64 `json:"slowInputs"` // Event Timing durations ≥ 16 ms (input → next paint)
	Interactions   []float64 `json:"interactions"`
	FilterClick    float64   `json:"filterClick"` // click on Filter → the filtered page's load
	FilterRows     int       `json:"filterRows"`
	Work           struct {
		Task, Script, Layout, Style float64
		Layouts, Styles             int
	} `json:"work"` // the renderer's main thread over the window (DevTools Performance metrics)
	Seconds float64 `json:"seconds"`
}

// browser runs responsive.mjs in headless Chromium.
type browser struct {
	node, script string
	extraCSS     string // added to the page when set (PROXBUS_BENCH_EXTRA_CSS)
	traceDir     string // where to write a Chromium trace of each window when set
}

// playwrightCore is where responsive.mjs loads playwright-core from unless
// PROXBUS_PLAYWRIGHT_CORE names another directory holding it.
const playwrightCore = "e2e/browser/node_modules/playwright-core"

// findBrowser returns the browser to use, or why there is none.
func findBrowser() (*browser, string) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, "no node on PATH"
	}
	if _, err := os.Stat("/usr/bin/chromium"); err != nil {
		return nil, "no /usr/bin/chromium"
	}
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Dir(file)
	script := filepath.Join(dir, "responsive.mjs")
	if _, err := os.Stat(script); err != nil {
		return nil, "no " + script
	}
	core := os.Getenv("PROXBUS_PLAYWRIGHT_CORE")
	if core == "" {
		core = filepath.Join(dir, "..", "..", playwrightCore)
	}
	if _, err := os.Stat(filepath.Join(core, "package.json")); err != nil {
		return nil, "no playwright-core at " + filepath.Clean(core) + " (npm ci in e2e/browser, or set PROXBUS_PLAYWRIGHT_CORE)"
	}
	return &browser{node: node, script: script}, ""
}

// run opens url in the browser, tells ready once the page is loaded and measured, and
// measures for d after that.
func (b *browser) run(ctx context.Context, url, token, name string, d time.Duration, ready chan<- struct{}) (browserResult, error) {
	var res browserResult
	cmd := exec.CommandContext(ctx, b.node, b.script, url, fmt.Sprint(d.Milliseconds()))
	trace := ""
	if b.traceDir != "" {
		trace = filepath.Join(b.traceDir, "console-"+name+".trace.json")
	}
	cmd.Env = append(os.Environ(), "PROXBUS_BENCH_TOKEN="+token, "PROXBUS_BENCH_EXTRA_CSS="+b.extraCSS, "PROXBUS_BENCH_TRACE="+trace)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return res, err
	}
	if err := cmd.Start(); err != nil {
		return res, fmt.Errorf("node %s: %w", b.script, err)
	}
	var once sync.Once
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 16<<20)
	var last string
	for sc.Scan() {
		line := sc.Text()
		if line == `{"ready":true}` {
			once.Do(func() { close(ready) })
			continue
		}
		last = line
	}
	if err := cmd.Wait(); err != nil {
		return res, fmt.Errorf("node %s: %w", b.script, err)
	}
	if err := json.Unmarshal([]byte(last), &res); err != nil {
		return res, fmt.Errorf("node %s: its report: %w", b.script, err)
	}
	return res, nil
}

// window is one live run: new commands at a rate while a Go client, and the browser when
// there is one, watch a list page.
type window struct {
	page     string    // the list page watched
	from, to time.Time // when the first command began and the last event was published
	cpu      cpuUse
	cmds     int
	evs      int
	sse      sseResult
	browser  *browserResult
}

// fq formats the p-th percentile of sorted float milliseconds.
func fq(sorted []float64, p float64) string {
	if len(sorted) == 0 {
		return "–"
	}
	rank := int(float64(len(sorted))*p/100+0.999999) - 1
	return fmt.Sprintf("%.0f ms", sorted[min(max(rank, 0), len(sorted)-1)])
}

func sum(xs []float64) float64 {
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t
}

func printLive(ws []window, rate float64, d time.Duration, browserNote string) {
	fmt.Printf("\n%.0f new commands/s for %s (each 4–6 events, 50–300 ms apart), on top of the history:\n\n", rate, d)
	head := "| | "
	sep := "|---|"
	for _, w := range ws {
		head += "`" + w.page + "` | "
		sep += "---:|"
	}
	fmt.Println(strings.TrimSuffix(head, " "))
	fmt.Println(sep)
	row := func(name string, f func(w window) string) {
		line := "| " + name + " |"
		for _, w := range ws {
			line += " " + f(w) + " |"
		}
		fmt.Println(line)
	}
	row("commands / events published", func(w window) string { return fmt.Sprintf("%d / %d", w.cmds, w.evs) })
	row("SSE: first event → row, p50 / p99 / max", func(w window) string {
		s := w.sse.delays
		if len(s) == 0 {
			return "–"
		}
		return fmt.Sprintf("%s / %s / %s", ms(harness.Percentile(s, 50)), ms(harness.Percentile(s, 99)), ms(s[len(s)-1]))
	})
	row("CPU: bench process / machine (of 2 cores)", func(w window) string {
		return fmt.Sprintf("%.2f / %.2f cores", w.cpu.self, w.cpu.machine)
	})
	row("SSE: rows missing", func(w window) string { return fmt.Sprint(w.cmds - len(w.sse.delays)) })
	row("SSE: updates/s, rows/update, KB/s", func(w window) string {
		perSec, rowsPer, bytesPerSec := w.sse.rates(w.from, w.to)
		return fmt.Sprintf("%.1f, %.0f, %.0f", perSec, rowsPer, bytesPerSec/1e3)
	})
	if browserNote != "" {
		fmt.Printf("\nBrowser part skipped: %s.\n", browserNote)
		return
	}
	brow := func(name string, f func(b *browserResult) string) {
		row(name, func(w window) string {
			if w.browser == nil {
				return "–"
			}
			return f(w.browser)
		})
	}
	brow("browser: page load (DOMContentLoaded / load)", func(b *browserResult) string {
		return fmt.Sprintf("%.0f / %.0f ms", b.DOMContentLoad, b.Load)
	})
	brow("browser: rows in the table", func(b *browserResult) string { return fmt.Sprint(b.Rows) })
	brow("browser: event-loop lag p50 / p99 / max", func(b *browserResult) string {
		return fq(b.Lag, 50) + " / " + fq(b.Lag, 99) + " / " + fq(b.Lag, 100)
	})
	brow("browser: long tasks (count, total)", func(b *browserResult) string {
		return fmt.Sprintf("%d, %.0f ms of %.0f s", len(b.LongTasks), sum(b.LongTasks), b.Seconds)
	})
	brow("browser: main thread busy (script / layout / style)", func(b *browserResult) string {
		w := b.Work
		return fmt.Sprintf("%.0f %% (%.0f / %.0f / %.0f ms; %d layouts)", 100*w.Task/(1000*b.Seconds), w.Script, w.Layout, w.Style, w.Layouts)
	})
	brow("browser: frame gap p99 / max", func(b *browserResult) string { return fq(b.Frames, 99) + " / " + fq(b.Frames, 100) })
	brow("browser: rows handler per update p50 / max", func(b *browserResult) string {
		return fq(b.Updates, 50) + " / " + fq(b.Updates, 100) + fmt.Sprintf(" (%d updates)", len(b.Updates))
	})
	brow("browser: click/type → next paint over 16 ms", func(b *browserResult) string {
		worst := "–"
		if len(b.SlowInputs) > 0 {
			worst = fmt.Sprintf("max %.0f ms", slices.Max(b.SlowInputs))
		}
		return fmt.Sprintf("%d of %d events, %s", len(b.SlowInputs), b.Inputs, worst)
	})
	brow("browser: click+type round trip p50 / max", func(b *browserResult) string {
		return fq(b.Interactions, 50) + " / " + fq(b.Interactions, 100)
	})
	brow("browser: Filter click → filtered page loaded", func(b *browserResult) string {
		return fmt.Sprintf("%.0f ms (%d rows)", b.FilterClick, b.FilterRows)
	})
}
