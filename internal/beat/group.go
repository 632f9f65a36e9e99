package beat

import (
	"context"
	"sync"
	"time"
)

// ticksPerInterval is how many times per interval a Group looks at its slots.
const ticksPerInterval = 4

// Group calls the functions held in its slots every interval, all from the one goroutine
// running [Group.Run], so that holding a slot costs no timer: the choice for work that is
// started and ended at a high rate and almost always ends before its first beat (a timer per
// piece of work is added to and removed from the runtime's timer heap, which at one message
// in flight cost measurably).
//
// A function held is called for the first time between 3/4 of an interval and one interval
// after [Slot.Hold], then every interval: never later than [Start] would call it, unless the
// goroutine running Run is held up. Calls never overlap, and those of different slots run one
// after another, so a function should return quickly.
type Group struct {
	interval time.Duration
	mu       sync.Mutex
	slots    map[*Slot]struct{}
}

// NewGroup returns a Group calling held functions every interval; with an interval of zero or
// less it never calls them.
func NewGroup(interval time.Duration) *Group {
	return &Group{interval: interval, slots: make(map[*Slot]struct{})}
}

// Run calls the held functions until ctx is done, then returns. Run it at most once, and keep
// it running while any function must be called: a function held while Run is not running is
// not called.
func (g *Group) Run(ctx context.Context) {
	if g.interval <= 0 {
		return
	}
	tick := time.NewTicker(max(g.interval/ticksPerInterval, time.Nanosecond))
	defer tick.Stop()
	var slots []*Slot
	for {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
		slots = g.snapshot(slots[:0])
		for _, s := range slots {
			s.tick()
		}
		clear(slots) // drop the references until the next tick
	}
}

// snapshot appends g's slots to dst.
func (g *Group) snapshot(dst []*Slot) []*Slot {
	g.mu.Lock()
	defer g.mu.Unlock()
	for s := range g.slots {
		dst = append(dst, s)
	}
	return dst
}

// Slot returns a new, empty slot of g. Close it when it is no longer used.
func (g *Group) Slot() *Slot {
	s := &Slot{g: g}
	g.mu.Lock()
	g.slots[s] = struct{}{}
	g.mu.Unlock()
	return s
}

// Slot holds at most one function that its Group calls every interval. A slot is meant to be
// reused: one per worker, holding the work of the moment. Its methods may be called from any
// goroutine.
type Slot struct {
	g  *Group
	mu sync.Mutex
	// f is the function held, nil when none; ticks counts the Group's ticks since f was held
	// or last called.
	f     func() (again bool)
	ticks int
}

// Hold makes the Group call f every interval, the first time between 3/4 of an interval and
// one interval from now, until [Slot.Release] is called or f returns false. It replaces a
// function held before.
func (s *Slot) Hold(f func() (again bool)) {
	s.mu.Lock()
	s.f, s.ticks = f, 0
	s.mu.Unlock()
}

// Release ends the calls of the function held: it waits for a call in progress to return, and
// no call starts after it returned. Releasing an empty slot is harmless.
func (s *Slot) Release() {
	s.mu.Lock()
	s.f = nil
	s.mu.Unlock()
}

// Close releases s and removes it from its Group.
func (s *Slot) Close() {
	s.Release()
	s.g.mu.Lock()
	delete(s.g.slots, s)
	s.g.mu.Unlock()
}

// tick counts one tick and calls the function held when an interval's ticks are complete.
func (s *Slot) tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return
	}
	if s.ticks++; s.ticks < ticksPerInterval {
		return
	}
	s.ticks = 0
	if !s.f() {
		s.f = nil
	}
}
