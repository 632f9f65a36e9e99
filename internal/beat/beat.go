// Package beat calls a function at a steady interval with no goroutine waiting between
// calls: each call is a timer callback, so work that ends before its first beat costs one
// timer and nothing else (no goroutine to start, wake and wait for at the end).
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
