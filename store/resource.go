package store

import (
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
// endpoint. A command holds it through [Guards.Resource].
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

// lockKeyTTL is the Redis TTL of resource lease and slot keys: twice LeaseTTL, so that the
// deadline (on the callers' clock) decides and the TTL only collects keys nobody gave back.
func (s *Store) lockKeyTTL() time.Duration { return 2 * s.opts.LeaseTTL }
