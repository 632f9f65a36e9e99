package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Repair is a terminal journal update that failed and is kept until it succeeds (contract
// §6): no TTL, across restarts, beyond the Idempotency-Key window.
type Repair struct {
	Command    CommandKey `json:"command"`
	EndpointID int64      `json:"endpoint_id"`
	JournalID  int64      `json:"journal_id"`
	JournalURL string     `json:"journal_url"`
	Kind       string     `json:"kind"`
	Comments   string     `json:"comments"` // already redacted by the caller
	Ref        string     `json:"ref"`      // event subject ref of the command
	Verb       string     `json:"verb"`
	CreatedAt  time.Time  `json:"created_at"`
	Attempts   int        `json:"attempts"`
	NextAt     time.Time  `json:"next_at"`
	LastError  string     `json:"last_error,omitempty"`
}

// repairData is the stored JSON of a repair: everything but the fields that change on each
// attempt (attempts and last_error are hash fields, the next attempt is the zset score).
type repairData struct {
	Command    CommandKey `json:"command"`
	EndpointID int64      `json:"endpoint_id"`
	JournalID  int64      `json:"journal_id"`
	JournalURL string     `json:"journal_url"`
	Kind       string     `json:"kind"`
	Comments   string     `json:"comments"`
	Ref        string     `json:"ref"`
	Verb       string     `json:"verb"`
	CreatedAt  time.Time  `json:"created_at"`
}

// SaveRepair inserts or replaces the repair of r.Command, due at r.NextAt (zero → now);
// a zero r.CreatedAt is set to now. It never expires.
func (s *Store) SaveRepair(ctx context.Context, r Repair) error {
	if r.Command.Source == "" || r.Command.ID == "" {
		return fmt.Errorf("%w: repair needs a command source and id", ErrInvalid)
	}
	now := s.opts.Now()
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now
	}
	next := r.NextAt
	if next.IsZero() {
		next = now
	}
	data, err := json.Marshal(repairData{
		Command: r.Command, EndpointID: r.EndpointID, JournalID: r.JournalID, JournalURL: r.JournalURL,
		Kind: r.Kind, Comments: r.Comments, Ref: r.Ref, Verb: r.Verb, CreatedAt: r.CreatedAt.UTC(),
	})
	if err != nil {
		return fmt.Errorf("store: save repair: %w", err)
	}
	err = s.write(ctx, s.scripts.saveRepair, []string{s.repairKey(r.Command), s.repairsKey()},
		data, r.Attempts, r.LastError, next.UnixMilli(), r.Command.Hash()).Err()
	if err != nil {
		return fmt.Errorf("store: save repair: %w", err)
	}
	return nil
}

// Repair returns the pending repair of c, or ErrNotFound.
func (s *Store) Repair(ctx context.Context, c CommandKey) (Repair, error) {
	raw, err := s.read(ctx, s.scripts.getRepair, []string{s.repairKey(c), s.repairsKey()}, c.Hash()).StringSlice()
	if errors.Is(err, redis.Nil) {
		return Repair{}, fmt.Errorf("store: repair: %w", ErrNotFound)
	}
	if err != nil {
		return Repair{}, fmt.Errorf("store: repair: %w", err)
	}
	r, err := decodeRepair(raw)
	if err != nil {
		return Repair{}, fmt.Errorf("store: repair: %w", err)
	}
	return r, nil
}

// DeleteRepair removes the repair of c; deleting an absent repair is not an error.
func (s *Store) DeleteRepair(ctx context.Context, c CommandKey) error {
	err := s.write(ctx, s.scripts.deleteRepair, []string{s.repairKey(c), s.repairsKey()}, c.Hash()).Err()
	if err != nil {
		return fmt.Errorf("store: delete repair: %w", err)
	}
	return nil
}

// PendingRepairs returns every pending repair, ordered by NextAt (earliest first).
func (s *Store) PendingRepairs(ctx context.Context) ([]Repair, error) {
	raw, err := s.read(ctx, s.scripts.pendingRepairs, []string{s.repairsKey()}, s.repairPrefix()).Slice()
	if err != nil {
		return nil, fmt.Errorf("store: pending repairs: %w", err)
	}
	out, err := decodeRecords(raw, decodeRepair)
	if err != nil {
		return nil, fmt.Errorf("store: pending repairs: %w", err)
	}
	return out, nil
}

// decodeRecords decodes a script's list of records, each a list of fields, with decode.
func decodeRecords[T any](raw []any, decode func([]string) (T, error)) ([]T, error) {
	out := make([]T, 0, len(raw))
	for _, item := range raw {
		fields, err := stringSlice(item)
		if err != nil {
			return nil, err
		}
		r, err := decode(fields)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// ClaimDueRepair takes the earliest repair due now (NextAt ≤ now) and, in the same atomic
// step, moves its next attempt to now+lease, so no other replica takes it while this one
// works on it. It returns the repair (with the new NextAt) and true, or false when nothing is
// due. The caller then deletes the repair on success or reschedules it on failure; if it
// crashes, the repair becomes due again after lease (at least 1 ms).
func (s *Store) ClaimDueRepair(ctx context.Context, lease time.Duration) (Repair, bool, error) {
	raw, err := s.write(ctx, s.scripts.claimRepair, []string{s.repairsKey()},
		s.nowMillis(), millis(lease), s.repairPrefix()).StringSlice()
	if errors.Is(err, redis.Nil) {
		return Repair{}, false, nil
	}
	if err != nil {
		return Repair{}, false, fmt.Errorf("store: claim due repair: %w", err)
	}
	r, err := decodeRepair(raw)
	if err != nil {
		return Repair{}, false, fmt.Errorf("store: claim due repair: %w", err)
	}
	return r, true, nil
}

// RescheduleRepair records a failed attempt of r.Command's repair: Attempts is incremented,
// LastError set to lastErr (which the caller has redacted) and the next attempt moved to next
// (zero → now). Only r.Command is read from r. ErrNotFound when the repair no longer exists
// (another replica finished it).
func (s *Store) RescheduleRepair(ctx context.Context, r Repair, next time.Time, lastErr string) error {
	if next.IsZero() {
		next = s.opts.Now()
	}
	n, err := s.write(ctx, s.scripts.reschedule, []string{s.repairKey(r.Command), s.repairsKey()},
		r.Command.Hash(), next.UnixMilli(), lastErr).Int64()
	if err != nil {
		return fmt.Errorf("store: reschedule repair: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("store: reschedule repair: %w", ErrNotFound)
	}
	return nil
}

// decodeRepair builds a Repair from a script answer {data, attempts, last_error, next_ms}.
func decodeRepair(raw []string) (Repair, error) {
	if len(raw) != 4 {
		return Repair{}, fmt.Errorf("unexpected repair record of %d fields", len(raw))
	}
	var d repairData
	if err := json.Unmarshal([]byte(raw[0]), &d); err != nil {
		return Repair{}, fmt.Errorf("decode repair: %w", err)
	}
	attempts, err := strconv.Atoi(raw[1])
	if err != nil {
		return Repair{}, fmt.Errorf("decode repair attempts: %w", err)
	}
	next, err := strconv.ParseFloat(raw[3], 64)
	if err != nil {
		return Repair{}, fmt.Errorf("decode repair schedule: %w", err)
	}
	return Repair{
		Command: d.Command, EndpointID: d.EndpointID, JournalID: d.JournalID, JournalURL: d.JournalURL,
		Kind: d.Kind, Comments: d.Comments, Ref: d.Ref, Verb: d.Verb, CreatedAt: d.CreatedAt,
		Attempts: attempts, NextAt: time.UnixMilli(int64(next)).UTC(), LastError: raw[2],
	}, nil
}

// stringSlice converts one element of a nested script answer to []string.
func stringSlice(v any) ([]string, error) {
	items, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("unexpected script answer %T", v)
	}
	out := make([]string, len(items))
	for i, it := range items {
		s, ok := it.(string)
		if !ok {
			return nil, fmt.Errorf("unexpected script answer field %T", it)
		}
		out[i] = s
	}
	return out, nil
}
