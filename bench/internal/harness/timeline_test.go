package harness

import (
	"fmt"
	"testing"
	"time"
)

// marksAt builds marks from (microseconds, what) pairs.
func marksAt(t *testing.T, pairs ...any) []TimelineMark {
	t.Helper()
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	var out []TimelineMark
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, TimelineMark{At: base.Add(time.Duration(pairs[i].(int)) * time.Microsecond), What: pairs[i+1].(string)})
	}
	return out
}

func TestTransitions(t *testing.T) {
	t.Parallel()
	// Two commands: ack, claim (redis), journal, a step the subscriber sees after the next
	// request in the second command, complete (redis again), result, ack.
	marks := marksAt(t,
		0, "boot", 5, "ack",
		10, "redis", 30, "post", 40, "step", 45, "get", 60, "redis", 90, "result", 100, "ack",
		110, "redis", 132, "post", 150, "get", 151, "step", 170, "redis", 198, "result", 210, "ack",
	)
	got := Transitions(marks, "ack")
	type row struct {
		from, to string
		gaps     string
	}
	want := []row{
		{"ack", "redis", "[5µs 10µs]"},
		{"redis", "post", "[20µs 22µs]"},
		{"post", "step", "[10µs]"},
		{"post", "get", "[18µs]"},
		{"step", "get", "[5µs]"},
		{"get", "redis", "[15µs]"},
		{"get", "step", "[1µs]"},
		{"step", "redis", "[19µs]"},
		{"redis", "result", "[30µs 28µs]"},
		{"result", "ack", "[10µs 12µs]"},
		{"boot", "ack", "[5µs]"}, // before the first start mark: last
	}
	if len(got) != len(want) {
		t.Fatalf("got %d transitions %+v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.From != w.from || g.To != w.to || fmt.Sprint(g.Gaps) != w.gaps {
			t.Errorf("transition %d = %s → %s %v, want %s → %s %s", i, g.From, g.To, g.Gaps, w.from, w.to, w.gaps)
		}
	}
}

func TestTimelineNilAndOrder(t *testing.T) {
	t.Parallel()
	var none *Timeline
	none.Mark("ignored") // a nil timeline records nothing and does not panic
	tl := &Timeline{}
	tl.Mark("a")
	tl.Mark("b")
	got := tl.Marks()
	if len(got) != 2 || got[0].What != "a" || got[1].What != "b" || got[1].At.Before(got[0].At) {
		t.Errorf("marks = %+v, want a then b in time order", got)
	}
}
