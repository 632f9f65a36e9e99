package netbox

import (
	"context"
	"sync"
	"time"
)

// EndpointLookup reads a ProxmoxEndpoint; *Client and *EndpointCache implement it.
type EndpointLookup interface {
	Endpoint(ctx context.Context, id int64) (Endpoint, error)
}

// EndpointCache caches Endpoint lookups for at most TTL. Only successful answers are cached:
// errors are never cached, so the gate fails closed and the next call asks again. Concurrent
// misses for one id share one lookup. It is safe for concurrent use.
type EndpointCache struct {
	lookup EndpointLookup
	ttl    time.Duration
	now    func() time.Time

	mu       sync.Mutex
	entries  map[int64]cachedEndpoint
	inflight map[int64]*lookupCall
}

type cachedEndpoint struct {
	ep      Endpoint
	expires time.Time
}

// lookupCall is one in-flight lookup; done is closed when ep and err are set.
type lookupCall struct {
	done chan struct{}
	ep   Endpoint
	err  error
	// leaderDone is true when the lookup failed because the leading caller's ctx ended.
	leaderDone bool
}

// NewEndpointCache wraps l. A ttl <= 0 caches nothing (misses are still shared); now is the
// clock (time.Now when nil), injectable for tests.
func NewEndpointCache(l EndpointLookup, ttl time.Duration, now func() time.Time) *EndpointCache {
	if now == nil {
		now = time.Now
	}
	return &EndpointCache{
		lookup:   l,
		ttl:      ttl,
		now:      now,
		entries:  make(map[int64]cachedEndpoint),
		inflight: make(map[int64]*lookupCall),
	}
}

// Endpoint returns the cached endpoint when its answer is younger than the TTL, else looks it
// up (joining a lookup already in flight for id). It returns the lookup's error unchanged, or
// ctx's error when ctx ends while waiting for another caller's lookup.
func (c *EndpointCache) Endpoint(ctx context.Context, id int64) (Endpoint, error) {
	for {
		c.mu.Lock()
		if e, ok := c.entries[id]; ok && c.now().Before(e.expires) {
			c.mu.Unlock()
			return e.ep, nil
		}
		if call, ok := c.inflight[id]; ok {
			c.mu.Unlock()
			select {
			case <-call.done:
			case <-ctx.Done():
				return Endpoint{}, ctx.Err()
			}
			// The leader's own deadline or cancellation is not ours: ask again.
			if call.err != nil && call.leaderDone && ctx.Err() == nil {
				continue
			}
			return call.ep, call.err
		}
		call := &lookupCall{done: make(chan struct{})}
		c.inflight[id] = call
		c.mu.Unlock()

		call.ep, call.err = c.lookup.Endpoint(ctx, id)
		call.leaderDone = call.err != nil && ctx.Err() != nil

		c.mu.Lock()
		delete(c.inflight, id)
		if call.err == nil && c.ttl > 0 {
			c.entries[id] = cachedEndpoint{ep: call.ep, expires: c.now().Add(c.ttl)}
		} else {
			delete(c.entries, id)
		}
		c.mu.Unlock()
		close(call.done)
		return call.ep, call.err
	}
}

// Forget drops id from the cache so the next call asks NetBox.
func (c *EndpointCache) Forget(id int64) {
	c.mu.Lock()
	delete(c.entries, id)
	c.mu.Unlock()
}
