package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/proxbus/proxbus/events"
)

// spinnerFrames are drawn in turn on the spinner line.
var spinnerFrames = [...]string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// spinnerTick is how often the spinner line is redrawn.
const spinnerTick = 100 * time.Millisecond

// clearLine returns the cursor to the line's start and erases the line (ANSI EL).
const clearLine = "\r\x1b[K"

// progress prints the steps of one command as `send` follows it: one line per step when the
// step ends (its name, status and the time from its `started` event to its end), and, on a
// terminal only, a spinner line naming the running step, rewritten in place. Off a terminal it
// writes plain lines with no control characters. Its methods are safe for concurrent use; the
// spinner goroutine it starts is stopped by [progress.Close].
type progress struct {
	w   io.Writer
	now func() time.Time

	mu      sync.Mutex
	started map[string]time.Time       // running steps by name: when they started
	amounts map[string]events.Progress // running steps' latest progress, by name
	order   []string                   // running step names, oldest first
	begun   time.Time                  // when following began (for the "waiting" spinner)
	drawn   bool                       // the spinner line is on screen
	frame   int

	stop      chan struct{} // closed by Close; nil without a spinner
	done      chan struct{} // closed when the spinner goroutine has returned
	closeOnce sync.Once
}

// newProgress returns a progress writer on w; spinner says whether w is a terminal, where a
// spinner goroutine is started at once (~100 ms ticks) until Close.
func newProgress(w io.Writer, spinner bool) *progress {
	p := &progress{w: w, now: time.Now, started: map[string]time.Time{}, amounts: map[string]events.Progress{}}
	p.begun = p.now()
	if spinner {
		p.stop, p.done = make(chan struct{}), make(chan struct{})
		go p.spin()
	}
	return p
}

func (p *progress) spin() {
	defer close(p.done)
	t := time.NewTicker(spinnerTick)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			p.drawSpinner()
			p.mu.Unlock()
		}
	}
}

// drawSpinner rewrites the spinner line; p.mu is held.
func (p *progress) drawSpinner() {
	label, since := "waiting for the result", p.begun
	if n := len(p.order); n > 0 {
		label = p.order[n-1]
		since = p.started[label]
	}
	p.frame = (p.frame + 1) % len(spinnerFrames)
	bar := ""
	if amount, ok := p.amounts[label]; ok {
		bar = " " + progressBar(amount, barWidth) + " " + formatAmount(amount)
	}
	fmt.Fprintf(p.w, "%s%s %s%s %s", clearLine, spinnerFrames[p.frame], label, bar, formatDuration(p.now().Sub(since)))
	p.drawn = true
}

// Step records one step event: a start is remembered (and shown by the spinner); any other
// status prints the step's line numbered by the event's seq, with the duration since its
// start when one was seen and the attempt when above 1. `waiting` and `running` lines report
// a step still under way (the spinner keeps it); `retrying` keeps it too, without a
// duration; every other status ends it.
func (p *progress) Step(st events.Step) {
	p.mu.Lock()
	defer p.mu.Unlock()
	at := st.At
	if at.IsZero() {
		at = p.now()
	}
	if st.Status == events.StepStarted {
		if _, running := p.started[st.Step]; !running {
			p.order = append(p.order, st.Step)
		}
		p.started[st.Step] = at
		return
	}
	if st.Status == events.StepRunning && st.Progress != nil {
		p.amounts[st.Step] = *st.Progress
		if p.stop != nil { // a terminal: the spinner line shows it as a bar
			return
		}
	}
	dur := "-"
	if start, ok := p.started[st.Step]; ok {
		switch st.Status {
		case events.StepRetrying:
		case events.StepWaiting, events.StepRunning: // still under way: the time so far
			dur = formatDuration(at.Sub(start))
		default:
			dur = formatDuration(at.Sub(start))
			delete(p.started, st.Step)
			delete(p.amounts, st.Step)
			p.order = removeString(p.order, st.Step)
		}
	}
	line := fmt.Sprintf("  step %d %-22s %-8s %8s", st.Seq, st.Step, st.Status, dur)
	if st.Attempt > 1 {
		line += fmt.Sprintf("  attempt %d", st.Attempt)
	}
	if st.Status == events.StepRunning && st.Progress != nil {
		line += "  " + formatAmount(*st.Progress)
	}
	if st.UPID != "" {
		line += "  " + st.UPID
	}
	if st.Detail != "" {
		line += " — " + st.Detail
	}
	p.println(line)
}

// Println prints one line above the spinner.
func (p *progress) Println(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.println(line)
}

func (p *progress) println(line string) {
	if p.drawn {
		fmt.Fprint(p.w, clearLine)
		p.drawn = false
	}
	fmt.Fprintln(p.w, sanitizeLine(line))
}

// Close stops the spinner (waiting for its goroutine) and erases its line. It is idempotent.
func (p *progress) Close() {
	p.closeOnce.Do(func() {
		if p.stop != nil {
			close(p.stop)
			<-p.done
		}
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, clearLine)
		p.drawn = false
	}
}

// barWidth is the number of cells of a progress bar.
const barWidth = 20

// progressBar draws how far a task is as width cells, e.g. "[██████░░░░]".
func progressBar(a events.Progress, width int) string {
	filled := 0
	if a.Total > 0 {
		filled = int(min(a.Done, a.Total) * int64(width) / a.Total)
	}
	return "[" + strings.Repeat("█", filled) + strings.Repeat("░", width-filled) + "]"
}

// formatAmount renders a task's progress for a human: "42% (1.2 GiB of 3.0 GiB)" for bytes,
// "42%" for a percentage.
func formatAmount(a events.Progress) string {
	pct := int64(0)
	if a.Total > 0 {
		pct = min(a.Done, a.Total) * 100 / a.Total
	}
	if a.Unit != events.ProgressBytes {
		return fmt.Sprintf("%d%%", pct)
	}
	return fmt.Sprintf("%d%% (%s of %s)", pct, formatBytes(a.Done), formatBytes(a.Total))
}

// formatBytes renders a byte count with binary units to one decimal: "512 B", "1.2 GiB".
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n), 0
	for f >= unit && i < 5 {
		f /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", f, "KMGTP"[i-1])
}

// formatDuration renders d for a human: milliseconds below a second, else seconds to 0.1 s.
func formatDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0ms"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	default:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
}

// sanitizeLine drops control characters a remote detail text could carry (so a line can
// never move the cursor or recolour the terminal).
func sanitizeLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return -1
		}
		return r
	}, s)
}

func removeString(list []string, s string) []string {
	out := list[:0]
	for _, v := range list {
		if v != s {
			out = append(out, v)
		}
	}
	return out
}
