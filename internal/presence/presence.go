// Package presence lets proxbus replicas announce, in the Redis they keep their store in, the
// key prefix they serve, so that a client working on the store directly (proxbus cancel,
// pending, journal pending) can tell a prefix no replica uses from one that is served.
//
// Each replica refreshes its member of the sorted set "<prefix>:replicas" (score: the Unix
// time it was last seen) every [Interval]; members not seen for [Forget] are removed.
package presence

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Timings of the announcements.
const (
	// Interval is how often a replica announces itself.
	Interval = 10 * time.Second
	// Live is how recently a replica must have announced itself to count as running.
	Live = 3 * Interval
	// Forget is how long an announcement is kept after its replica stopped.
	Forget = 24 * time.Hour
)

// ErrNotServed: no replica ever announced the key prefix in this Redis.
var ErrNotServed = errors.New("no proxbus replica serves this key prefix")

// key is the sorted set of the replicas of prefix.
func key(prefix string) string { return prefix + ":replicas" }

// Announce records once that instance serves prefix, now.
func Announce(ctx context.Context, rdb redis.Cmdable, prefix, instance string, now time.Time) error {
	k := key(prefix)
	pipe := rdb.TxPipeline()
	pipe.ZAdd(ctx, k, redis.Z{Score: float64(now.Unix()), Member: instance})
	pipe.ZRemRangeByScore(ctx, k, "-inf", strconv.FormatInt(now.Add(-Forget).Unix(), 10))
	pipe.Expire(ctx, k, Forget)
	_, err := pipe.Exec(ctx)
	return err
}

// Run announces instance on prefix every [Interval] until ctx ends; a failed announcement is
// passed to onErr (which may be nil) and retried at the next tick.
func Run(ctx context.Context, rdb redis.Cmdable, prefix, instance string, onErr func(error)) {
	t := time.NewTicker(Interval)
	defer t.Stop()
	for {
		if err := Announce(ctx, rdb, prefix, instance, time.Now()); err != nil && ctx.Err() == nil && onErr != nil {
			onErr(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Replica is one replica that announced a prefix.
type Replica struct {
	Instance string
	LastSeen time.Time
}

// Replicas are the replicas that announced prefix, the most recently seen first.
func Replicas(ctx context.Context, rdb redis.Cmdable, prefix string) ([]Replica, error) {
	zs, err := rdb.ZRevRangeWithScores(ctx, key(prefix), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("presence: %w", err)
	}
	out := make([]Replica, 0, len(zs))
	for _, z := range zs {
		name, _ := z.Member.(string)
		out = append(out, Replica{Instance: name, LastSeen: time.Unix(int64(z.Score), 0)})
	}
	return out, nil
}

// Prefixes are the key prefixes some replica announced in this Redis (up to a few hundred
// keys scanned), sorted; for naming them when a client's prefix is not among them.
func Prefixes(ctx context.Context, rdb redis.Cmdable) ([]string, error) {
	var (
		out    []string
		cursor uint64
	)
	for range 10 {
		keys, next, err := rdb.Scan(ctx, cursor, "*:replicas", 100).Result()
		if err != nil {
			return nil, fmt.Errorf("presence: %w", err)
		}
		for _, k := range keys {
			if p := strings.TrimSuffix(k, ":replicas"); !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	slices.Sort(out)
	return out, nil
}

// Check returns nil when a replica announced prefix within [Forget]; running says whether one
// did within [Live]. Otherwise it returns an error wrapping [ErrNotServed] naming the prefixes
// replicas do announce in this Redis.
func Check(ctx context.Context, rdb redis.Cmdable, prefix string, now time.Time) (running bool, err error) {
	rs, err := Replicas(ctx, rdb, prefix)
	if err != nil {
		return false, err
	}
	if len(rs) > 0 {
		return now.Sub(rs[0].LastSeen) <= Live, nil
	}
	others, err := Prefixes(ctx, rdb)
	if err != nil {
		return false, err
	}
	if len(others) == 0 {
		return false, fmt.Errorf("%w: no replica announced any prefix in this Redis (is serve running, on this Redis?)", ErrNotServed)
	}
	quoted := make([]string, len(others))
	for i, p := range others {
		quoted[i] = strconv.Quote(p)
	}
	return false, fmt.Errorf("%w: the replicas of this Redis serve %s", ErrNotServed, strings.Join(quoted, ", "))
}
