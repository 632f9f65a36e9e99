package harness

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// Timeline records when a run's requests reach the places the harness can see from outside
// the runner: the simulators' handlers (arrival and return), the Redis proxy (arrival of each
// command), and the broker (each step and result event and each acknowledgement, seen by a
// subscriber). At concurrency 1 the requests of one command never interleave with another's,
// so the time between consecutive marks is the time a command spends on that step of its
// path. A nil *Timeline records nothing. Safe for concurrent use.
type Timeline struct {
	mu    sync.Mutex
	marks []TimelineMark
}

// TimelineMark is one recorded moment.
type TimelineMark struct {
	At   time.Time
	What string
}

// Mark records what happening now.
func (t *Timeline) Mark(what string) {
	if t == nil {
		return
	}
	now := time.Now()
	t.mu.Lock()
	t.marks = append(t.marks, TimelineMark{At: now, What: what})
	t.mu.Unlock()
}

// Marks returns the marks so far in time order.
func (t *Timeline) Marks() []TimelineMark {
	t.mu.Lock()
	marks := slices.Clone(t.marks)
	t.mu.Unlock()
	slices.SortStableFunc(marks, func(a, b TimelineMark) int { return a.At.Compare(b.At) })
	return marks
}

// Transition is the time between consecutive marks From and To, over every time To followed
// From.
type Transition struct {
	From, To string
	// Gaps are the times between them, in the order they happened.
	Gaps []time.Duration
	// Offsets are, for each gap, how long after the latest start mark (see [Transitions]) From
	// was marked; empty for gaps before the first start mark.
	Offsets []time.Duration
}

// Transitions groups the gaps between consecutive marks by their pair of marks, in the order
// of a command's path: by the median time from the latest start mark (e.g. the previous
// command's acknowledgement) to the pair's first mark. Pairs never seen after a start mark
// come last, most frequent first. A mark may occur more than once on the path (two Redis
// round trips); its pairs are still told apart by what they lead to.
func Transitions(marks []TimelineMark, start string) []Transition {
	byPair := map[[2]string]*Transition{}
	var started time.Time
	for i := 1; i < len(marks); i++ {
		if marks[i-1].What == start {
			started = marks[i-1].At
		}
		key := [2]string{marks[i-1].What, marks[i].What}
		tr := byPair[key]
		if tr == nil {
			tr = &Transition{From: key[0], To: key[1]}
			byPair[key] = tr
		}
		tr.Gaps = append(tr.Gaps, marks[i].At.Sub(marks[i-1].At))
		if !started.IsZero() {
			tr.Offsets = append(tr.Offsets, marks[i-1].At.Sub(started))
		}
	}
	out := make([]Transition, 0, len(byPair))
	offset := make(map[[2]string]time.Duration, len(byPair))
	for key, tr := range byPair {
		out = append(out, *tr)
		if len(tr.Offsets) > 0 {
			offset[key] = MedianDuration(tr.Offsets)
		}
	}
	slices.SortFunc(out, func(a, b Transition) int {
		ka, kb := [2]string{a.From, a.To}, [2]string{b.From, b.To}
		oa, aok := offset[ka]
		ob, bok := offset[kb]
		switch {
		case aok && bok && oa != ob:
			return cmp.Compare(oa, ob)
		case aok != bok:
			if aok {
				return -1
			}
			return 1
		case len(a.Gaps) != len(b.Gaps):
			return len(b.Gaps) - len(a.Gaps)
		case a.From != b.From:
			return cmp.Compare(a.From, b.From)
		}
		return cmp.Compare(a.To, b.To)
	})
	return out
}
