package console

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
)

// TestLayout pins how steps become the bars of a timeline.
func TestLayout(t *testing.T) {
	t.Parallel()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	st := func(seq int, name string, status events.StepStatus, ms int) events.Step {
		return events.Step{Seq: seq, Step: name, Status: status, Attempt: 1, At: at(ms)}
	}
	tests := []struct {
		name     string
		steps    []events.Step
		resultMS int // -1: no result, now is 1000 ms
		want     string
	}{
		{"a started step is a bar to its end",
			[]events.Step{st(1, "clone", events.StepStarted, 0), st(2, "clone", events.StepDone, 100)}, 100,
			"clone done 0-100"},
		{"a step that ends without starting is an instant",
			[]events.Step{st(1, "import", events.StepSkipped, 10)}, 10,
			"import skipped 10-10"},
		{"a second started step of one step updates it",
			[]events.Step{st(1, "relocate_disk", events.StepStarted, 0), st(2, "relocate_disk", events.StepStarted, 5), st(3, "relocate_disk", events.StepDone, 50)}, 50,
			"relocate_disk done 0-50"},
		{"running steps update the bar",
			[]events.Step{st(1, "move", events.StepStarted, 0), st(2, "move", events.StepRunning, 40), st(3, "move", events.StepDone, 90)}, 90,
			"move done 0-90"},
		{"waits of one stage are one bar until the next event",
			[]events.Step{st(1, "claim", events.StepWaiting, 0), st(2, "claim", events.StepWaiting, 200), st(3, "claim", events.StepWaiting, 400), st(4, "start_vm", events.StepStarted, 600), st(5, "start_vm", events.StepDone, 700)}, 700,
			"claim waiting 0-600 ×3 | start_vm done 600-700"},
		{"an open step ends now while there is no result",
			[]events.Step{st(1, "backup", events.StepStarted, 0)}, -1,
			"backup running 0-1000 open"},
		{"an open step ends at the result",
			[]events.Step{st(1, "confirm", events.StepStarted, 0)}, 300,
			"confirm running 0-300 open"},
		{"attempts are bars of their own",
			[]events.Step{st(1, "dispatch", events.StepStarted, 0), {Seq: 2, Step: "dispatch", Status: events.StepRetrying, Attempt: 1, At: at(10)},
				{Seq: 3, Step: "dispatch", Status: events.StepStarted, Attempt: 2, At: at(20)}, {Seq: 4, Step: "dispatch", Status: events.StepDone, Attempt: 2, At: at(30)}}, 30,
			"dispatch retrying 0-10 | dispatch retrying 10-20 | dispatch done 20-30"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := Command{First: t0, Steps: tt.steps}
			if tt.resultMS >= 0 {
				c.Result, c.ResultAt = &events.Result{Status: 200}, at(tt.resultMS)
			}
			tl := layout(c, at(1000))
			var got []string
			for _, b := range tl.Bars {
				s := fmt.Sprintf("%s %s %d-%d", b.Step, b.Status, b.Start.Sub(t0).Milliseconds(), b.End.Sub(t0).Milliseconds())
				if b.Waits > 1 {
					s += fmt.Sprintf(" ×%d", b.Waits)
				}
				if b.Open {
					s += " open"
				}
				got = append(got, s)
				if b.Left < 0 || b.Width < minBarWidth || b.Left+b.Width > 100.0001 {
					t.Errorf("bar %s placed at %.2f%% width %.2f%%: off the axis", b.Step, b.Left, b.Width)
				}
			}
			if g := strings.Join(got, " | "); g != tt.want {
				t.Errorf("bars:\n got %s\nwant %s", g, tt.want)
			}
		})
	}
}

// TestLayoutPlacesBarsOnTheAxis: a bar's left edge and width are its share of the span.
func TestLayoutPlacesBarsOnTheAxis(t *testing.T) {
	t.Parallel()
	c := Command{First: t0, Steps: []events.Step{
		{Seq: 1, Step: "a", Status: events.StepStarted, Attempt: 1, At: t0},
		{Seq: 2, Step: "a", Status: events.StepDone, Attempt: 1, At: t0.Add(250 * time.Millisecond)},
		{Seq: 3, Step: "b", Status: events.StepStarted, Attempt: 1, At: t0.Add(250 * time.Millisecond)},
		{Seq: 4, Step: "b", Status: events.StepDone, Attempt: 1, At: t0.Add(time.Second)},
	}, Result: &events.Result{Status: 200}, ResultAt: t0.Add(time.Second)}
	tl := layout(c, t0.Add(time.Hour))
	if b := tl.Bars[1]; b.Left != 25 || b.Width != 75 {
		t.Errorf("second bar at %.2f%% width %.2f%%, want 25%% and 75%%", b.Left, b.Width)
	}
	if len(tl.Ticks) != 5 || tl.Ticks[4].Label != "+1s" {
		t.Errorf("ticks = %+v", tl.Ticks)
	}
}

func TestShortDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0: "0s", 850 * time.Millisecond: "850ms", 3210 * time.Millisecond: "3.2s", 42 * time.Second: "42s",
		125 * time.Second: "2m05s", 62 * time.Minute: "1h02m",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestNetboxPage pins the journal link: NetBox's web page of the entry, not its API.
func TestNetboxPage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"http://netbox/api/extras/journal-entries/7/", "http://netbox/extras/journal-entries/7/"},
		{"https://nb.example:8443/netbox/api/extras/journal-entries/7/", "https://nb.example:8443/netbox/extras/journal-entries/7/"},
		{"http://netbox/extras/journal-entries/7/", "http://netbox/extras/journal-entries/7/"},
		{"javascript:alert(1)//api/x", "javascript:alert(1)//api/x"},
	} {
		if got := netboxPage(tc.in); got != tc.want {
			t.Errorf("netboxPage(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
