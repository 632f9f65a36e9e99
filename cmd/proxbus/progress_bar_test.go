package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/testenv"
)

// TestProgressOfLongTasks pins how send shows a long task's `running` steps (contract §3
// progress): off a terminal a plain line per event with the amount; on a terminal a bar on
// the spinner line, rewritten in place, gone once the step ends.
func TestProgressOfLongTasks(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	gib := int64(1 << 30)
	running := func(seq int, done int64, at time.Duration) events.Step {
		return events.Step{Seq: seq, Step: "relocate_disk", Status: events.StepRunning, At: t0.Add(at),
			Progress: &events.Progress{Done: done, Total: 4 * gib, Unit: events.ProgressBytes}}
	}

	var buf bytes.Buffer
	plain := newProgress(&buf, false)
	plain.Step(events.Step{Seq: 1, Step: "relocate_disk", Status: events.StepStarted, At: t0})
	plain.Step(running(2, gib, time.Second))
	plain.Step(events.Step{Seq: 3, Step: "vm_backup", Status: events.StepRunning, At: t0.Add(2 * time.Second),
		Progress: &events.Progress{Done: 42, Total: 100, Unit: events.ProgressPercent}})
	plain.Close()
	for _, want := range []string{
		"  step 2 relocate_disk          running      1.0s  25% (1.0 GiB of 4.0 GiB)",
		"  step 3 vm_backup              running         -  42%",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("plain output lacks %q:\n%s", want, buf.String())
		}
	}

	w := &testenv.Buffer{}
	term := newProgress(w, true)
	term.Step(events.Step{Seq: 1, Step: "relocate_disk", Status: events.StepStarted, At: time.Now()})
	term.Step(running(2, 3*gib, time.Second))
	term.mu.Lock()
	term.drawSpinner()
	term.mu.Unlock()
	if got := w.String(); !strings.Contains(got, "relocate_disk [███████████████░░░░░] 75% (3.0 GiB of 4.0 GiB)") || strings.Contains(got, "step 2") {
		t.Errorf("terminal: %q, want the bar on the spinner line and no step line", got)
	}
	term.Step(events.Step{Seq: 3, Step: "relocate_disk", Status: events.StepDone, At: time.Now()})
	term.mu.Lock()
	term.drawSpinner()
	term.mu.Unlock()
	term.Close()
	if after := w.String(); strings.Count(after, "[███") != 1 || !strings.Contains(after, "step 3 relocate_disk") {
		t.Errorf("terminal after the step ended: %q, want the bar gone", after)
	}
}
