package handlers

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
)

// fastClock is a fake clock running ten times faster than the real one from start: a task of
// 0.4 s takes 4 s of it, and its progress changes every 0.2 s of it.
type fastClock struct {
	start time.Time
	real  time.Time
}

func (c fastClock) Now() time.Time { return c.start.Add(10 * time.Since(c.real)) }

// stepsOf returns the step events of command id, in publication order.
func (c *collector) stepsOf(t *testing.T, id string) []events.Step {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []events.Step
	for _, m := range c.msgs {
		if !strings.HasSuffix(m.Subject, ".step") {
			continue
		}
		var ev struct {
			Data events.Step `json:"data"`
		}
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatalf("step event %s: %v", m.Data, err)
		}
		if ev.Data.CommandID == id {
			out = append(out, ev.Data)
		}
	}
	return out
}

// TestWriteReportsTaskProgress pins the progress of a write's task: a vm.provision whose disk
// is moved (relocate_disk: the simulator's qemu-img lines for the 3.5 GiB disk) publishes
// running steps of relocate_disk with the move's UPID and a rising progress in bytes, the
// first a second after the step started and then at most one per second of the pipeline's
// (fake) clock although the progress changes five times a second of it, between the write's
// started and done steps; the other writes, whose tasks log no progress, publish none.
func TestWriteReportsTaskProgress(t *testing.T) {
	t.Parallel()
	e := newRTEnv(t)
	e.p.cfg.Now = fastClock{start: time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC), real: time.Now()}.Now
	e.pve.SetTaskDuration(400 * time.Millisecond)
	const id = "progress-provision"
	e.run(t, "vm.provision", id, `{"source":{"template_vmid":8000},"new_vmid":310,"new_name":"web-310","target_node":"pve2","storage":"local-lvm","start_after_provision":false}`, 201, ResultCreated)

	steps := e.pub.stepsOf(t, id)
	var running []events.Step
	var writeStarted, done events.Step
	for _, st := range steps {
		switch {
		case st.Status == events.StepRunning:
			running = append(running, st)
		case st.Step == stepRelocateDisk && st.Status == events.StepStarted && st.Detail != "":
			writeStarted = st
		case st.Step == stepRelocateDisk && st.Status == events.StepDone:
			done = st
		}
	}
	if len(running) < 2 || done.UPID == "" {
		t.Fatalf("%d running steps (done step %+v), want at least 2 of the move: %+v", len(running), done, steps)
	}
	for i, st := range running {
		p := st.Progress
		switch {
		case st.Step != stepRelocateDisk || st.UPID != done.UPID:
			t.Errorf("running step %d of %s (%s), want %s of the move %s", i, st.Step, st.UPID, stepRelocateDisk, done.UPID)
		case p == nil || p.Unit != events.ProgressBytes || p.Total != 3584<<20 || p.Done > p.Total:
			t.Errorf("running step %d progress %+v, want bytes of the 3.5 GiB disk", i, p)
		case st.Seq <= writeStarted.Seq || st.Seq >= done.Seq:
			t.Errorf("running step %d (seq %d) outside the write's started (%d) and done (%d)", i, st.Seq, writeStarted.Seq, done.Seq)
		case i == 0 && st.At.Sub(writeStarted.At) < time.Second:
			t.Errorf("first running step %s after the write started, want a second", st.At.Sub(writeStarted.At))
		case i > 0 && st.At.Sub(running[i-1].At) < time.Second:
			t.Errorf("running steps %d and %d %s apart, want at most one per second", i-1, i, st.At.Sub(running[i-1].At))
		case i > 0 && p.Done <= running[i-1].Progress.Done:
			t.Errorf("running step %d progress %d after %d, want it rising", i, p.Done, running[i-1].Progress.Done)
		}
	}
	t.Logf("%d running steps of the move: %+v", len(running), running)
	if raw, _ := json.Marshal(steps[0]); strings.Contains(string(raw), `"progress"`) {
		t.Errorf("a step without progress has it in its JSON: %s", raw)
	}
}
