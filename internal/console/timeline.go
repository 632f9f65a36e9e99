package console

import (
	"fmt"
	"time"

	"github.com/proxbus/proxbus/events"
)

// bar is one span of a command's timeline: a step from its start to its end, or a wait.
type bar struct {
	Step    string
	Attempt int
	// Status is the step's final state (done, error, skipped), running while it has none,
	// or waiting/retrying for a wait.
	Status     string
	Start, End time.Time
	// Open is set while the span has not ended: its end is now.
	Open     bool
	UPID     string
	Detail   string
	Progress *events.Progress
	// Waits counts the waiting or retrying steps a wait bar stands for.
	Waits int
	// Left and Width place the bar on the axis, in percent.
	Left, Width float64
}

// Duration is how long the span lasted (so far).
func (b bar) Duration() time.Duration { return b.End.Sub(b.Start) }

// timeline is a command's steps laid out on a time axis from Start to End.
type timeline struct {
	Start, End time.Time
	Bars       []bar
	Ticks      []tick
}

// tick is a label of the time axis at Left percent.
type tick struct {
	Left  float64
	Label string
}

// minBarWidth keeps an instant step visible on the axis (percent).
const minBarWidth = 0.4

// layout builds c's timeline as of now. A started step is a bar until the done, error or
// skipped step of the same name and attempt (a running step updates its progress, a second
// started step its detail); a step
// that ends without having started is an instant bar; consecutive waiting or retrying steps
// of one stage are one wait bar, lasting until the command's next event (and ending the
// stage's open bar of that attempt). Spans still open end
// at the result's time, or now while there is none.
func layout(c Command, now time.Time) timeline {
	end := now
	if c.Result != nil {
		end = c.ResultAt
	}
	var bars []bar
	open := map[[2]any]int{} // step and attempt → index of its open bar
	wait := -1               // index of the wait bar the next event ends
	for _, s := range c.Steps {
		if wait >= 0 {
			if b := &bars[wait]; (s.Status == events.StepWaiting || s.Status == events.StepRetrying) && b.Step == s.Step && b.Status == string(s.Status) {
				b.Waits++
				b.Detail = s.Detail
				continue
			}
			bars[wait].End, bars[wait].Open = s.At, false
			wait = -1
		}
		key := [2]any{s.Step, s.Attempt}
		switch s.Status {
		case events.StepStarted:
			if i, ok := open[key]; ok { // a step that reports its parts (one disk after another)
				if s.Detail != "" {
					bars[i].Detail = s.Detail
				}
				continue
			}
			open[key] = len(bars)
			bars = append(bars, bar{Step: s.Step, Attempt: s.Attempt, Status: string(events.StepRunning), Start: s.At, Open: true, UPID: s.UPID, Detail: s.Detail})
		case events.StepRunning:
			i, ok := open[key]
			if !ok {
				i = len(bars)
				open[key] = i
				bars = append(bars, bar{Step: s.Step, Attempt: s.Attempt, Status: string(events.StepRunning), Start: s.At, Open: true})
			}
			b := &bars[i]
			b.Progress = s.Progress
			if s.UPID != "" {
				b.UPID = s.UPID
			}
		case events.StepWaiting, events.StepRetrying:
			if i, ok := open[key]; ok { // the step's attempt stopped here
				delete(open, key)
				bars[i].Status, bars[i].End, bars[i].Open = string(s.Status), s.At, false
			}
			wait = len(bars)
			bars = append(bars, bar{Step: s.Step, Attempt: s.Attempt, Status: string(s.Status), Start: s.At, Open: true, Detail: s.Detail, Waits: 1})
		default: // done, error, skipped
			i, ok := open[key]
			if !ok {
				i = len(bars)
				bars = append(bars, bar{Step: s.Step, Attempt: s.Attempt, Start: s.At})
			}
			delete(open, key)
			b := &bars[i]
			b.Status, b.End, b.Open = string(s.Status), s.At, false
			if s.UPID != "" {
				b.UPID = s.UPID
			}
			if s.Detail != "" {
				b.Detail = s.Detail
			}
		}
	}
	tl := timeline{Start: c.First, End: end}
	for i := range bars {
		if bars[i].Open {
			bars[i].End = maxTime(bars[i].Start, end)
		}
		tl.End = maxTime(tl.End, bars[i].End)
	}
	if len(c.Steps) > 0 && c.Steps[0].At.Before(tl.Start) {
		tl.Start = c.Steps[0].At
	}
	span := tl.End.Sub(tl.Start)
	for i := range bars {
		b := &bars[i]
		if span > 0 {
			b.Left = 100 * float64(b.Start.Sub(tl.Start)) / float64(span)
			b.Width = 100 * float64(b.End.Sub(b.Start)) / float64(span)
		}
		b.Width = max(b.Width, minBarWidth)
		b.Left = min(b.Left, 100-b.Width)
	}
	tl.Bars = bars
	tl.Ticks = ticks(span)
	return tl
}

// ticks labels the axis of a span at its start, quarters and end.
func ticks(span time.Duration) []tick {
	out := make([]tick, 0, 5)
	for i := range 5 {
		d := span * time.Duration(i) / 4
		out = append(out, tick{Left: float64(i) * 25, Label: "+" + shortDuration(d)})
	}
	return out
}

// shortDuration formats d for people: 0s, 850ms, 3.2s, 2m05s, 1h02m.
func shortDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	}
	d = d.Round(time.Minute)
	return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
}
