package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Failures returns how many attempts of command c have failed so far (0 when none has, or the
// count expired with the command's identity after DedupeTTL). Only failed attempts are
// counted: a command that waits (a busy guest, a twin in flight, a dependency down) spends
// none. Replicas share the count.
func (s *Store) Failures(ctx context.Context, c CommandKey) (int, error) {
	n, err := s.rdb.Get(ctx, s.failuresKey(c)).Int()
	switch {
	case errors.Is(err, redis.Nil):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("store: failures: %w", err)
	}
	return n, nil
}

// RecordFailure counts one more failed attempt of command c and returns the new count. The
// count lives as long as a command identity (DedupeTTL from the last failure).
func (s *Store) RecordFailure(ctx context.Context, c CommandKey) (int, error) {
	n, err := s.write(ctx, s.scripts.recordFailure, []string{s.failuresKey(c)}, millis(s.opts.DedupeTTL)).Int()
	if err != nil {
		return 0, fmt.Errorf("store: record failure: %w", err)
	}
	return n, nil
}
