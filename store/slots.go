package store

import (
	"context"
	"fmt"
	"strconv"
)

// Slot is one of the max_parallel places of an endpoint, held by Holder. Holder must be
// unique per holder (per command attempt, not per replica).
type Slot struct {
	EndpointID int64
	Holder     string
}

// AcquireSlot takes a slot on endpointID for holder, with a deadline of now+LeaseTTL, so that
// at most max holders run against the endpoint at once across all replicas. Holders whose
// deadline passed (they stopped renewing) are dropped first. A holder already in a slot keeps
// it (deadline extended) and does not take a second one.
//
// It returns the slot and true when the caller holds it, or false and a nil error when all
// max slots are taken: the caller delays its command and tries again. ErrInvalid (Redis
// untouched) for max < 1 or an empty holder; the wrapped client error when Redis fails.
func (s *Store) AcquireSlot(ctx context.Context, endpointID int64, max int, holder string) (Slot, bool, error) {
	if max < 1 || holder == "" {
		return Slot{}, false, fmt.Errorf("store: acquire slot: max %d, holder %q: %w", max, holder, ErrInvalid)
	}
	sl := Slot{EndpointID: endpointID, Holder: holder}
	n, err := s.scripts.acquireSlot.Run(ctx, s.rdb, []string{s.slotsKey(endpointID)},
		s.nowMillis(), millis(s.opts.LeaseTTL), max, holder, millis(s.lockKeyTTL())).Int64()
	if err != nil {
		return Slot{}, false, fmt.Errorf("store: acquire slot on endpoint %d: %w", endpointID, err)
	}
	return sl, n == 1, nil
}

// RenewSlot extends sl's deadline to now+LeaseTTL. It returns ErrLeaseLost when sl is no
// longer held (released, or dropped after its deadline passed because another acquirer
// needed the place): the caller must stop before its next Proxmox write.
func (s *Store) RenewSlot(ctx context.Context, sl Slot) error {
	if sl.Holder == "" {
		return fmt.Errorf("store: renew slot: empty holder: %w", ErrInvalid)
	}
	return owned("renew slot on endpoint " + strconv.FormatInt(sl.EndpointID, 10))(
		s.scripts.renewSlot.Run(ctx, s.rdb, []string{s.slotsKey(sl.EndpointID)},
			sl.Holder, s.nowMillis(), millis(s.opts.LeaseTTL), millis(s.lockKeyTTL())).Int64())
}

// ReleaseSlot frees sl's place (one atomic ZREM). It is idempotent: a slot already released
// or dropped returns nil. It only ever removes sl.Holder.
func (s *Store) ReleaseSlot(ctx context.Context, sl Slot) error {
	if err := s.rdb.ZRem(ctx, s.slotsKey(sl.EndpointID), sl.Holder).Err(); err != nil {
		return fmt.Errorf("store: release slot on endpoint %d: %w", sl.EndpointID, err)
	}
	return nil
}
