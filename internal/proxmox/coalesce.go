package proxmox

import (
	"context"
	"sync"
)

// coalescer shares one read among the callers that ask for it at the same time, without ever
// answering a caller with a read that started before it asked: a caller arriving while a read
// is in flight waits for the next one, which starts when the current one ends and serves
// every caller that queued behind it. Under a burst of N callers this makes a handful of reads
// instead of N, each as fresh as a read of the caller's own. Safe for concurrent use; the zero
// value is ready.
type coalescer[T any] struct {
	mu      sync.Mutex
	running *flight[T] // the latest read started; nil when none runs
	queued  *flight[T] // the read to start when running ends; nil when nobody waits for one
}

// flight is one shared read; val and err are set before done is closed.
type flight[T any] struct {
	done    chan struct{}
	val     T
	err     error
	waiters int // callers queued for it (guarded by the coalescer's mu)
}

// do returns the result of a call of read that started after do was called. read runs in the
// goroutine of one of the callers, with that caller's context values but not its
// cancellation (the others still wait for the result); a caller whose ctx ends stops waiting
// and gets ctx.Err(). The value is shared by every caller of the same read: callers must not
// modify it.
func (c *coalescer[T]) do(ctx context.Context, read func(context.Context) (T, error)) (T, error) {
	c.mu.Lock()
	if c.running == nil {
		f := &flight[T]{done: make(chan struct{})}
		c.running = f
		c.mu.Unlock()
		c.run(ctx, f, read)
		return f.val, f.err
	}
	if c.queued == nil {
		c.queued = &flight[T]{done: make(chan struct{})}
	}
	c.queued.waiters++
	before, mine := c.running, c.queued
	c.mu.Unlock()

	var zero T
	select {
	case <-before.done:
	case <-ctx.Done():
		return zero, ctx.Err()
	}
	// The read this caller waited behind has ended: the first of its queue to get here runs
	// the queued read for all of them.
	c.mu.Lock()
	if c.queued == mine {
		c.queued = nil
		c.running = mine
		c.mu.Unlock()
		c.run(ctx, mine, read)
		return mine.val, mine.err
	}
	c.mu.Unlock()
	select {
	case <-mine.done:
		return mine.val, mine.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// run performs f's read and publishes its result.
func (c *coalescer[T]) run(ctx context.Context, f *flight[T], read func(context.Context) (T, error)) {
	f.val, f.err = read(context.WithoutCancel(ctx))
	c.mu.Lock()
	if c.running == f {
		c.running = nil
	}
	c.mu.Unlock()
	close(f.done)
}
