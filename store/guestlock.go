package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Resource kinds of a [ResourceKey].
const (
	// KindGuest is a VM or container; the ResourceKey ID is its vmid in decimal.
	KindGuest = "guest"
	// KindNode is a cluster node; the ResourceKey ID is the node name.
	KindNode = "node"
)

// ResourceKey names one Proxmox resource whose commands must never run at once: a guest
// (Kind [KindGuest], ID the vmid) or a node (Kind [KindNode], ID the node name) of one
// endpoint.
type ResourceKey struct {
	EndpointID int64
	Kind, ID   string
}

// GuestResource returns the key of guest vmid on endpointID.
func GuestResource(endpointID int64, vmid int) ResourceKey {
	return ResourceKey{EndpointID: endpointID, Kind: KindGuest, ID: strconv.Itoa(vmid)}
}

// NodeResource returns the key of node on endpointID.
func NodeResource(endpointID int64, node string) ResourceKey {
	return ResourceKey{EndpointID: endpointID, Kind: KindNode, ID: node}
}

// String returns "endpoint/kind/id", for logs.
func (k ResourceKey) String() string {
	return strconv.FormatInt(k.EndpointID, 10) + "/" + k.Kind + "/" + k.ID
}

// validate reports ErrInvalid for a key without kind or id, or with a ':' in the kind (which
// would make key names ambiguous).
func (k ResourceKey) validate() error {
	if k.Kind == "" || k.ID == "" || strings.Contains(k.Kind, ":") {
		return fmt.Errorf("resource %q: %w", k.String(), ErrInvalid)
	}
	return nil
}

// ResourceLease is a held (or, from a failed [Store.AcquireResource], observed) lease on a
// resource. Token is the fencing token: it grows with every new lease on any resource, so a
// later holder of the same resource always has a greater token.
type ResourceLease struct {
	Key   ResourceKey
	Owner string
	Token int64
}

// AcquireResource takes the lease on k for owner, with a deadline of now+LeaseTTL. Owner must
// be unique per holder (per command attempt, not per replica): acquiring again with the owner
// that already holds the live lease succeeds, extends it and keeps its token.
//
// It returns the lease and true when the caller holds it now; a lease whose deadline passed
// (a dead or stalled holder) is taken over with a new, greater token. When another owner holds
// a live lease it returns that holder's lease, false and a nil error: the caller delays its
// command and tries again. ErrInvalid (Redis untouched) for an empty kind, id or owner; the
// wrapped client error when Redis fails.
func (s *Store) AcquireResource(ctx context.Context, k ResourceKey, owner string) (ResourceLease, bool, error) {
	if err := k.validate(); err != nil {
		return ResourceLease{}, false, fmt.Errorf("store: acquire resource: %w", err)
	}
	if owner == "" {
		return ResourceLease{}, false, fmt.Errorf("store: acquire resource: empty owner: %w", ErrInvalid)
	}
	vals, err := s.scripts.acquireResource.Run(ctx, s.rdb, []string{s.lockKey(k), s.fenceKey()},
		s.nowMillis(), millis(s.opts.LeaseTTL), owner, millis(s.lockKeyTTL())).Slice()
	if err != nil {
		return ResourceLease{}, false, fmt.Errorf("store: acquire resource %s: %w", k, err)
	}
	if len(vals) != 3 {
		return ResourceLease{}, false, fmt.Errorf("store: acquire resource %s: unexpected answer %v", k, vals)
	}
	ok, _ := vals[0].(int64)
	holder, _ := vals[1].(string)
	tok, _ := vals[2].(string)
	token, err := strconv.ParseInt(tok, 10, 64)
	if err != nil {
		return ResourceLease{}, false, fmt.Errorf("store: acquire resource %s: token %q: %w", k, tok, err)
	}
	return ResourceLease{Key: k, Owner: holder, Token: token}, ok == 1, nil
}

// RenewResource extends l's lease to now+LeaseTTL. A lease whose deadline passed is renewed
// too as long as nobody took it over. It returns ErrLeaseLost when the lease is gone (released,
// or its key expired) or another owner or token holds it: the caller must stop before its next
// Proxmox write.
func (s *Store) RenewResource(ctx context.Context, l ResourceLease) error {
	if err := l.Key.validate(); err != nil {
		return fmt.Errorf("store: renew resource: %w", err)
	}
	return owned("renew resource " + l.Key.String())(s.scripts.renewResource.Run(ctx, s.rdb,
		[]string{s.lockKey(l.Key)}, l.Owner, l.Token, s.nowMillis(), millis(s.opts.LeaseTTL),
		millis(s.lockKeyTTL())).Int64())
}

// ReleaseResource ends l's lease so that the next command on the resource may start at once.
// It is idempotent: a lease already released or expired away returns nil. It never releases
// another owner's lease: when another owner or token holds the resource now, nothing changes
// and ErrLeaseLost is returned (worth a warning: l's holder ran past its deadline).
func (s *Store) ReleaseResource(ctx context.Context, l ResourceLease) error {
	if err := l.Key.validate(); err != nil {
		return fmt.Errorf("store: release resource: %w", err)
	}
	return owned("release resource " + l.Key.String())(s.scripts.releaseResource.Run(ctx, s.rdb,
		[]string{s.lockKey(l.Key)}, l.Owner, l.Token).Int64())
}

// lockKeyTTL is the Redis TTL of lease and slot keys: twice LeaseTTL, so that the deadline
// (on the callers' clock) decides and the TTL only collects keys nobody released.
func (s *Store) lockKeyTTL() time.Duration { return 2 * s.opts.LeaseTTL }
