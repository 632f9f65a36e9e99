package store

import (
	"context"
	"strings"
)

// WatchFreed calls freed with the name of every guard (a [Claim.BusyKey]) that Complete,
// Release or Suspend gives back anywhere, on any replica sharing this Redis, and with
// [Store.WatchName] of every command whose outcome FinishUnstarted stores (cancelled or
// expired), until ctx ends. It listens on Redis Pub/Sub and subscribes again by itself after a
// lost connection; a name announced while it is not subscribed is not reported, nor is a guard
// whose holder's lease merely expired, so a waiter must also look again on its own after a
// while. freed is called from one goroutine, one name at a time, and must not block.
func (s *Store) WatchFreed(ctx context.Context, freed func(key string)) {
	prefix := globEscaper.Replace(s.opts.Prefix)
	sub := s.rdb.PSubscribe(ctx, prefix+":slots:*", prefix+":lock:*", prefix+":cmd:*")
	defer sub.Close()
	ch := sub.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			freed(m.Channel)
		}
	}
}

// WatchName is the name [Store.WatchFreed] reports when c's outcome is stored without it
// having run.
func (s *Store) WatchName(c CommandKey) string { return s.cmdKey(c) }

// globEscaper escapes the characters special in a Redis glob pattern.
var globEscaper = strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)
