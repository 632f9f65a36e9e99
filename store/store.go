package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/proxbus/proxbus/internal/config"
)

var (
	// ErrLeaseLost is returned by lease operations when the command's record is no longer held
	// by the caller's owner and fencing token (another owner took it over, or it finished).
	ErrLeaseLost = errors.New("store: lease lost to another owner")
	// ErrGuardLost is returned by [Store.Renew] when the claim was renewed but one of its
	// guards (resource lease, endpoint slot) was taken by another command meanwhile.
	ErrGuardLost = errors.New("store: guard lost to another command")
	// ErrNotFound is returned when the record asked for does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrInvalid is returned, before Redis is touched, for a request missing a required field.
	ErrInvalid = errors.New("store: invalid request")
)

// Store is the Redis-backed state of proxbus. It is safe for concurrent use by many goroutines
// and many replicas sharing one Redis.
type Store struct {
	rdb     redis.UniversalClient
	opts    Options
	scripts scripts
}

// New returns a Store on rdb with opts (defaults filled in). It does not contact Redis; use
// [Store.Ping] to check the connection. Options that cannot work are an error wrapping
// config.ErrInvalid.
//
// On a Redis Cluster (a *redis.ClusterClient) every key must be in one slot, so the scripts,
// which span several keys, work: the prefix must hold a hash tag ("{proxbus}"); the default
// prefix becomes "{proxbus}" there, and a prefix without a tag is refused.
func New(rdb redis.UniversalClient, opts Options) (*Store, error) {
	opts = opts.WithDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if _, cluster := rdb.(*redis.ClusterClient); cluster {
		if _, ok := hashTag(opts.Prefix); !ok {
			if opts.Prefix != DefaultPrefix {
				return nil, fmt.Errorf("store: %w: on a Redis Cluster the key prefix (--redis-key-prefix) must hold a hash tag, e.g. {%s}, so that all keys share one slot (got %q)",
					config.ErrInvalid, strings.Trim(opts.Prefix, "{}"), opts.Prefix)
			}
			opts.Prefix = "{" + DefaultPrefix + "}"
		}
	}
	return &Store{rdb: rdb, opts: opts, scripts: newScripts()}, nil
}

// Options returns the options in use, with defaults filled in.
func (s *Store) Options() Options { return s.opts }

// Ping checks that Redis answers; it returns the wrapped client error otherwise.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("store: ping: %w", err)
	}
	return nil
}

// nowMillis is the store clock in milliseconds since the Unix epoch.
func (s *Store) nowMillis() int64 { return s.opts.Now().UnixMilli() }
