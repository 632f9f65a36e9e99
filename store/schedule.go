package store

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Schedule is what proxbus keeps of a scheduled command (contract §11) besides its NATS
// message schedule: what schedule.add allowed it to fire, checked at each firing, how it was
// made (for listings that may not read the commands stream), and its last firing. It lives
// until schedule.remove.
type Schedule struct {
	Name string
	// Verb, EndpointID and DataSHA256 (hex of the data's bytes) are what the schedule may fire.
	Verb       string
	EndpointID int64
	DataSHA256 string
	// Actor made the schedule at MadeAt.
	Actor  string
	MadeAt time.Time
	// Pattern is its Nats-Schedule ("@every 6h", a cron expression, …) in time zone TZ, Window
	// its window and Data the fired commands' data (never a secret: schedule.add refuses them).
	Pattern, TZ string
	Window      time.Duration
	Data        []byte
	// LastID is the id of the last firing seen, LastAt its firing time; Next is the next
	// firing the server announced with it (zero when none).
	LastID       string
	LastAt, Next time.Time
}

func (s *Store) scheduleKey(name string) string { return s.opts.Prefix + ":schedule:" + name }
func (s *Store) schedulesKey() string           { return s.opts.Prefix + ":schedules" }

// PutSchedule records sc's definition (all but the last firing), forgetting the last firing
// of an earlier schedule of that name.
func (s *Store) PutSchedule(ctx context.Context, sc Schedule) error {
	key := s.scheduleKey(sc.Name)
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, key)
		p.HSet(ctx, key, "verb", sc.Verb, "endpoint", sc.EndpointID, "data_sha256", sc.DataSHA256, "actor", sc.Actor,
			"made_at", sc.MadeAt.UnixMilli(), "pattern", sc.Pattern, "tz", sc.TZ, "window", int64(sc.Window), "data", sc.Data)
		p.SAdd(ctx, s.schedulesKey(), sc.Name)
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: put schedule: %w", err)
	}
	return nil
}

// DropSchedule forgets the schedule named name; it is not an error when there is none.
func (s *Store) DropSchedule(ctx context.Context, name string) error {
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, s.scheduleKey(name))
		p.SRem(ctx, s.schedulesKey(), name)
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: drop schedule: %w", err)
	}
	return nil
}

// Schedules returns every schedule, sorted by name.
func (s *Store) Schedules(ctx context.Context) ([]Schedule, error) {
	names, err := s.rdb.SMembers(ctx, s.schedulesKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("store: schedules: %w", err)
	}
	sort.Strings(names)
	out := make([]Schedule, 0, len(names))
	for _, name := range names {
		sc, ok, err := s.LookupSchedule(ctx, name)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, sc)
		}
	}
	return out, nil
}

// LookupSchedule returns the schedule named name, and false when there is none.
func (s *Store) LookupSchedule(ctx context.Context, name string) (Schedule, bool, error) {
	m, err := s.rdb.HGetAll(ctx, s.scheduleKey(name)).Result()
	if err != nil {
		return Schedule{}, false, fmt.Errorf("store: schedule: %w", err)
	}
	if m["verb"] == "" {
		return Schedule{}, false, nil
	}
	sc := Schedule{Name: name, Verb: m["verb"], DataSHA256: m["data_sha256"], Actor: m["actor"], LastID: m["last_id"],
		Pattern: m["pattern"], TZ: m["tz"], Data: []byte(m["data"])}
	sc.EndpointID, _ = strconv.ParseInt(m["endpoint"], 10, 64)
	window, _ := strconv.ParseInt(m["window"], 10, 64)
	sc.Window = time.Duration(window)
	sc.MadeAt, sc.LastAt, sc.Next = unixMilli(m["made_at"]), unixMilli(m["last_at"]), unixMilli(m["next"])
	return sc, true, nil
}

// recordFiringLua: KEYS[1] schedule. ARGV: last_id, last_at_ms, next_ms. Records a firing
// of a schedule that exists, and never an older firing over a newer one.
const recordFiringLua = `
if redis.call('HGET', KEYS[1], 'verb') == false then return 0 end
local last = tonumber(redis.call('HGET', KEYS[1], 'last_at') or '0')
if last > tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], 'last_id', ARGV[1], 'last_at', ARGV[2], 'next', ARGV[3])
return 1`

// RecordFiring records the firing id of schedule name, fired at at, announcing next (zero:
// none), unless the schedule is gone or a later firing was recorded.
func (s *Store) RecordFiring(ctx context.Context, name, id string, at, next time.Time) error {
	nextMS := int64(0)
	if !next.IsZero() {
		nextMS = next.UnixMilli()
	}
	if err := s.rdb.Eval(ctx, recordFiringLua, []string{s.scheduleKey(name)}, id, at.UnixMilli(), nextMS).Err(); err != nil {
		return fmt.Errorf("store: record firing: %w", err)
	}
	return nil
}

// unixMilli reads a time stored as Unix milliseconds; zero for "", "0" or garbage.
func unixMilli(v string) time.Time {
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
