package proxmox

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// blockingReads is a read function whose calls are numbered from 1 and each wait for a
// release; started receives the number of every call as it starts.
type blockingReads struct {
	calls   atomic.Int64
	started chan int64
	release chan struct{}
}

func newBlockingReads() *blockingReads {
	return &blockingReads{started: make(chan int64, 16), release: make(chan struct{})}
}

func (b *blockingReads) read(ctx context.Context) (int64, error) {
	n := b.calls.Add(1)
	b.started <- n
	<-b.release
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	return n, nil
}

// waitFor waits until started delivers want (in a synctest bubble the timeout passes as soon
// as every goroutine is blocked).
func (b *blockingReads) waitFor(t *testing.T, want int64) {
	t.Helper()
	select {
	case got := <-b.started:
		if got != want {
			t.Fatalf("read %d started, want %d", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("read %d never started", want)
	}
}

// TestCoalescerNeverAnswersWithAnOlderRead pins freshness and sharing: callers arriving while
// read 1 runs are not answered by it; they all share read 2, which starts after read 1 ends.
func TestCoalescerNeverAnswersWithAnOlderRead(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testCoalescerNeverAnswersWithAnOlderRead)
}

func testCoalescerNeverAnswersWithAnOlderRead(t *testing.T) {
	var co coalescer[int64]
	b := newBlockingReads()
	first := make(chan int64, 1)
	go func() { v, _ := co.do(context.Background(), b.read); first <- v }()
	b.waitFor(t, 1)

	const late = 8
	var wg sync.WaitGroup
	results := make(chan int64, late)
	for range late {
		wg.Go(func() {
			v, err := co.do(context.Background(), b.read)
			if err != nil {
				t.Errorf("do: %v", err)
			}
			results <- v
		})
	}
	// Let every late caller queue behind read 1 (they block until it ends).
	synctest.Wait()
	if n := co.queuedWaiters(); n != late {
		t.Fatalf("%d callers queued behind read 1, want %d", n, late)
	}
	b.release <- struct{}{} // read 1 ends
	if v := <-first; v != 1 {
		t.Fatalf("first caller got read %d, want 1", v)
	}
	b.waitFor(t, 2)
	close(b.release) // read 2 (and any later one) ends
	wg.Wait()
	close(results)
	for v := range results {
		if v != 2 {
			t.Errorf("a late caller got read %d, want 2 (never the read that began before it asked)", v)
		}
	}
	if n := b.calls.Load(); n != 2 {
		t.Errorf("%d reads for 1+%d callers, want 2", n, late)
	}
}

// TestCoalescerCancellation pins that a waiter's cancelled context ends only its own wait,
// and that the reading caller's cancellation does not fail the callers sharing its read.
func TestCoalescerCancellation(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testCoalescerCancellation)
}

func testCoalescerCancellation(t *testing.T) {
	var co coalescer[int64]
	b := newBlockingReads()
	runnerCtx, cancelRunner := context.WithCancel(context.Background())
	runner := make(chan error, 1)
	go func() { _, err := co.do(runnerCtx, b.read); runner <- err }()
	b.waitFor(t, 1)

	waiterCtx, cancelWaiter := context.WithCancel(context.Background())
	waiter := make(chan error, 1)
	go func() { _, err := co.do(waiterCtx, b.read); waiter <- err }()
	synctest.Wait()
	if n := co.queuedWaiters(); n != 1 {
		t.Fatalf("%d callers queued behind the read, want 1", n)
	}
	cancelWaiter()
	if err := <-waiter; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v, want context.Canceled", err)
	}
	cancelRunner() // the read itself goes on: it does not carry the runner's cancellation
	close(b.release)
	if err := <-runner; err != nil {
		t.Fatalf("runner: %v, want the read's own result", err)
	}
}

// TestCoalescerSharesErrors pins that a failed read fails every caller sharing it, and the
// next caller reads anew.
func TestCoalescerSharesErrors(t *testing.T) {
	t.Parallel()
	var co coalescer[int]
	boom := errors.New("unreachable")
	calls := 0
	if _, err := co.do(context.Background(), func(context.Context) (int, error) { calls++; return 0, boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
	v, err := co.do(context.Background(), func(context.Context) (int, error) { calls++; return 7, nil })
	if err != nil || v != 7 || calls != 2 {
		t.Fatalf("after a failure: %d, %v after %d reads; want 7 from a new read", v, err, calls)
	}
}

// queuedWaiters returns how many callers wait for the queued read.
func (c *coalescer[T]) queuedWaiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.queued == nil {
		return 0
	}
	return c.queued.waiters
}
