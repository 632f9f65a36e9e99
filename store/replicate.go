package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ErrNotReplicated is returned by a change of the store that the primary made but fewer than
// [Options.MinReplicas] replicas acknowledged within [Options.ReplicaTimeout] (Redis's WAIT).
// The change may survive or be lost in a failover: callers treat it as a store failure (the
// command waits, nothing is dispatched on it), and every change is safe to repeat or resume.
var ErrNotReplicated = errors.New("store: change not acknowledged by enough Redis replicas")

// write runs the script of a state change: with MinReplicas set, its answer carries an error
// wrapping [ErrNotReplicated] when too few replicas acknowledged it (see [Store.replicated]).
func (s *Store) write(ctx context.Context, sc *redis.Script, keys []string, args ...any) *redis.Cmd {
	cmd, err := s.replicated(ctx, sc, keys, args...)
	if err != nil && cmd.Err() == nil {
		cmd.SetErr(err)
	}
	return cmd
}

// replicated runs the script of a state change and returns its answer, and, apart, whether
// enough replicas acknowledged it. With MinReplicas set it sends the script and a WAIT on one
// connection to the primary holding keys[0] (a pipeline: WAIT counts the writes of its own
// connection); a shortfall is an error wrapping [ErrNotReplicated]. A primary that lost its
// script cache (a new primary after a failover) is sent the script itself.
func (s *Store) replicated(ctx context.Context, sc *redis.Script, keys []string, args ...any) (*redis.Cmd, error) {
	if s.opts.MinReplicas <= 0 {
		return sc.Run(ctx, s.rdb, keys, args...), nil
	}
	primary, err := s.primaryOf(ctx, keys[0])
	if err != nil {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(fmt.Errorf("store: the primary of %s: %w", keys[0], err))
		return cmd, nil
	}
	cmd, wait := s.evalAndWait(ctx, primary, sc, false, keys, args)
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		cmd, wait = s.evalAndWait(ctx, primary, sc, true, keys, args)
	}
	if cmd.Err() != nil {
		return cmd, nil
	}
	switch n, err := wait.Int64(); {
	case err != nil:
		return cmd, fmt.Errorf("%w: WAIT: %w", ErrNotReplicated, err)
	case n < int64(s.opts.MinReplicas):
		return cmd, fmt.Errorf("%w: %d of %d within %s", ErrNotReplicated, n, s.opts.MinReplicas, s.opts.ReplicaTimeout)
	}
	return cmd, nil
}

// evalAndWait sends sc (by its SHA, or whole with full) and WAIT in one pipeline to primary.
func (s *Store) evalAndWait(ctx context.Context, primary redis.Cmdable, sc *redis.Script, full bool, keys []string, args []any) (*redis.Cmd, *redis.Cmd) {
	pipe := primary.Pipeline()
	var cmd *redis.Cmd
	if full {
		cmd = sc.Eval(ctx, pipe, keys, args...)
	} else {
		cmd = sc.EvalSha(ctx, pipe, keys, args...)
	}
	wait := pipe.Do(ctx, "WAIT", s.opts.MinReplicas, s.opts.ReplicaTimeout.Milliseconds())
	_, _ = pipe.Exec(ctx) // each command carries its own error
	return cmd, wait
}

// primaryOf is the client of the primary that holds key: the cluster node serving its slot,
// or the one primary of a standalone or Sentinel-managed Redis.
func (s *Store) primaryOf(ctx context.Context, key string) (redis.Cmdable, error) {
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		return cc.MasterForKey(ctx, key)
	}
	return s.rdb, nil
}

// read runs a script that changes nothing.
func (s *Store) read(ctx context.Context, sc *redis.Script, keys []string, args ...any) *redis.Cmd {
	return sc.Run(ctx, s.rdb, keys, args...)
}

// hashTag is the hash tag of a key name (the part between its first "{" and the next "}",
// when not empty): Redis Cluster places keys with the same tag in one slot.
func hashTag(key string) (string, bool) {
	_, rest, ok := strings.Cut(key, "{")
	if !ok {
		return "", false
	}
	tag, _, ok := strings.Cut(rest, "}")
	return tag, ok && tag != ""
}
