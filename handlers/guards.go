package handlers

import (
	"github.com/proxbus/proxbus/store"
)

// defaultMaxParallel bounds commands per endpoint when the endpoints file does not.
const defaultMaxParallel = 4

// guards are what a write command asks to hold besides its claim while it runs: the exclusive
// lease on its guest or node (two commands on one guest never run at once, on any replica) and
// a slot of its endpoint (at most max_parallel commands per cluster, across replicas). The
// claim takes them in the same Redis script (store.ClaimRequest.Guards); Complete, Release and
// Suspend give them back in theirs, and the lease keeper renews them with the claim. When one
// is held elsewhere the claim answers store.GuardBusy and changes nothing: the command waits
// for it in the process's wait room ([waitRoom]) and claims again when it is given back, or is
// redelivered (after a pause that doubles with its deliveries) when the room is full or
// GuardWait has passed.
func (r *run) guards() store.Guards {
	var g store.Guards
	if key, ok := r.prep.exclusive(r.cmd.EndpointID); ok {
		g.Resource = &key
	}
	g.Slot = &store.SlotRequest{EndpointID: r.cmd.EndpointID, Max: r.maxParallel()}
	return g
}

// maxParallel is the command's endpoint's max_parallel.
func (r *run) maxParallel() int {
	if max := r.client.Endpoint().MaxParallel; max > 0 {
		return max
	}
	return defaultMaxParallel
}

// busyGuard describes the guard a GuardBusy claim names, for logs and step events.
func (r *run) busyGuard(c store.Claim) string {
	if c.BusyGuard == store.GuardSlot {
		return "the endpoint already runs max_parallel commands"
	}
	if key, ok := r.prep.exclusive(r.cmd.EndpointID); ok {
		return "another command holds " + key.String()
	}
	return "another command holds the resource"
}
