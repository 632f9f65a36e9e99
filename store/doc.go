// Package store keeps proxbus's shared state in Redis: command identity records, the
// Idempotency-Key window with request fingerprints, single-flight claims across replicas with
// leases and fencing tokens, the pending journal repairs (contract §5 and §6), and a command's
// guards: the per-resource lease (one command per guest or node at a time) and the
// per-endpoint slot (max_parallel), which exist only as part of a claim ([ClaimRequest.Guards]).
//
// Every state change is one Lua script (EVALSHA, falling back to EVAL), so replicas never race
// between a read and a write: claim, dispatching, renew, suspend (also for [Store.Yield]), complete,
// complete-replay, release, update-result and record-failure for commands; save, get, delete, pending, claim
// and reschedule for repairs. The guards have no scripts of their own: the claim script takes
// them, renew renews them, and complete, release and suspend give them back.
// A write command costs three round trips on its happy path: [Store.Claim] decides identity and
// Idempotency-Key and takes the command's guards in one script, [Store.Dispatching] marks its
// Proxmox write right before it leaves (one per write), [Store.Complete] stores the result and
// gives the guards back; a long command adds one [Store.Renew] (claim, key and guards) per
// third of its lease. "Now" is passed to the scripts in milliseconds from
// [Options.Now], so leases follow the caller's clock; key lifetimes use PEXPIRE.
// The store stores opaque result bytes handed to it by callers (who redact them first) and
// never logs.
//
// # Key names
//
// Operators rely on these names; they are part of the documented interface. <prefix> is
// [Options.Prefix] ("proxbus" by default); sha256hex is the lower-case hex SHA-256.
//
//	<prefix>:cmd:<sha256hex(source + "\n" + id)>                    hash  command identity (TTL DedupeTTL)
//	    state=running|done, owner, token, lease (deadline, ms since epoch), fp, src, id, idem
//	    (its idempotency key name), result (when done); while suspended ([Store.Suspend]):
//	    suspended=1, journal_id, journal_url, dispatched=0|1 (a running record without
//	    suspended=1 belongs to an owner that may be working or may have crashed: its progress
//	    is unknown and is read back from the NetBox journal)
//	<prefix>:idem:<sha256hex(endpoint id (decimal) + "|" + verb + "|" + resource + "|" + key)>
//	                                                                hash  Idempotency-Key record
//	    state=running|done, cmd (owning command's hash), fp, owner, token, lease, src, id, result
//	    (TTL DedupeTTL while running, the lease field decides liveness; Window once done)
//	<prefix>:fence                                                  string  fencing-token counter (INCR, no TTL)
//	<prefix>:failures:<sha256hex(source + "\n" + id)>              string  failed attempts of the command (INCR;
//	                                                                        TTL DedupeTTL from the last failure)
//	<prefix>:repair:<sha256hex(source + "\n" + id)>                 hash  pending journal repair (no TTL)
//	    data (JSON of the repair), attempts, last_error
//	<prefix>:repairs                                                zset  repair members (the command hash)
//	                                                                      scored by next attempt (ms since epoch)
//	<prefix>:lock:<endpoint id>:<kind>:<id>                         hash  per-resource lease; kind guest (id = vmid)
//	                                                                      or node (id = node name)
//	    owner, token (the holding claim's owner and fencing token), lease (deadline, ms since
//	    epoch; the claim's deadline), cmd (the holding command's hash)
//	    (TTL DedupeTTL; the deadline decides, except that a holder whose lease expired while
//	    it may have written — its record running and not suspended, or suspended after a
//	    dispatch — keeps the lease until its own redelivery resumed it)
//	<prefix>:slots:<endpoint id>                                    zset  max_parallel slot holders (claim owners)
//	                                                                      scored by deadline (ms since epoch;
//	                                                                      TTL 2×LeaseTTL)
//
// A key whose command lost its lease is taken over by a twin only when that command had
// certainly not begun its work (it suspended before its journal entry); when it stopped
// without suspending (a crash) or suspended after its journal entry, the twin keeps waiting
// for the command's own redelivery to resume it, so a key never runs its write twice.
//
// Redis holds all of this in memory: run it with persistence (AOF) or replication. A Redis
// that restarts empty forgets finished commands, keys, leases and pending repairs.
//
// The scripts span several keys (and a few derive a key name from a stored record), so every
// key must be on one primary: a standalone Redis, a Sentinel-managed primary, or, on a Redis
// Cluster, one slot: there the prefix must hold a hash tag (default "{proxbus}", so
// "{proxbus}:cmd:…"), which puts every key, the fencing counter and the repairs and approvals
// indexes with them, in the slot of that tag (its primary's replicas fail over as one).
//
// # Replication
//
// Redis replicates asynchronously: a primary that dies can take its newest changes with it.
// With [Options.MinReplicas] every change is followed, on the same connection, by WAIT for
// that many replicas; a change they do not acknowledge in time is reported as
// [ErrNotReplicated] and the caller acts as if the store had failed (a claim is given back and
// nothing is done on it; a result is not published until a later delivery finds it stored).
// What remains: a change WAIT confirmed is lost only when every replica that has it is lost
// too, or when the failover promotes a replica without it (Sentinel and Cluster promote the
// most up-to-date replica they can reach); a change made on a primary that is then lost before
// WAIT answers was reported as failed and is made again or resumed.
package store
