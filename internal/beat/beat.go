// Package beat calls functions at a steady interval, with no goroutine of their own waiting
// between calls. [Start] gives each function a timer, whose callbacks are the calls: work that
// ends before its first beat costs one timer and nothing else (lease renewals). A [Group]
// calls the functions held in its slots from one goroutine: holding a slot costs no timer at
// all (the InProgress heartbeats of a consumer's messages, started and ended thousands of
// times a second).
package beat

import (
	"sync"
	"time"
)

// Start calls f every interval, the first time one interval from now, until the returned stop
// is called or f returns false; an interval of zero or less never calls f. The next interval starts when a call returns, so calls never
// overlap. stop waits for a call in progress to return, and no call starts after stop
// returned; stop may be called more than once, also after f returned false.
func Start(interval time.Duration, f func() (again bool)) (stop func()) {
	if interval <= 0 {
		return func() {}
	}
	var (
		mu      sync.Mutex
		stopped bool
		t       *time.Timer
	)
	call := func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		if f() {
			t.Reset(interval)
		}
	}
	mu.Lock()
	t = time.AfterFunc(interval, call)
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}
