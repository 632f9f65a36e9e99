// Package store keeps proxbus's shared state in Redis: command identity records, the
// Idempotency-Key window with request fingerprints, single-flight claims across replicas with
// leases and fencing tokens, the pending journal repairs (contract §5 and §6), per-resource
// leases (one command per guest or node at a time) and per-endpoint slots (max_parallel).
//
// Every state change is one Lua script (EVALSHA, falling back to EVAL), so replicas never race
// between a read and a write. "Now" is passed to the scripts in milliseconds from
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
//	    (its idempotency key name), journal_id, journal_url, dispatched=1, result (when done)
//	<prefix>:idem:<sha256hex(endpoint id (decimal) + "|" + verb + "|" + resource + "|" + key)>
//	                                                                hash  Idempotency-Key record
//	    state=running|done, cmd (owning command's hash), fp, owner, token, lease, src, id, result
//	    (TTL DedupeTTL while running, the lease field decides liveness; Window once done)
//	<prefix>:fence                                                  string  fencing-token counter (INCR, no TTL)
//	<prefix>:repair:<sha256hex(source + "\n" + id)>                 hash  pending journal repair (no TTL)
//	    data (JSON of the repair), attempts, last_error
//	<prefix>:repairs                                                zset  repair members (the command hash)
//	                                                                      scored by next attempt (ms since epoch)
//	<prefix>:lock:<endpoint id>:<kind>:<id>                         hash  per-resource lease; kind guest (id = vmid)
//	                                                                      or node (id = node name)
//	    owner, token (fencing, from <prefix>:fence), lease (deadline, ms since epoch)
//	    (TTL 2×LeaseTTL, renewed with the lease; the deadline decides)
//	<prefix>:slots:<endpoint id>                                    zset  max_parallel slot holders scored by deadline
//	                                                                      (ms since epoch; TTL 2×LeaseTTL)
//
// A key whose command lost its lease is taken over by a twin only when that command had not
// begun its work (no journal entry, no dispatch marker); otherwise the twin keeps waiting for
// the command's own redelivery to resume it, so a key never runs its write twice.
//
// Redis holds all of this in memory: run it with persistence (AOF) or replication. A Redis
// that restarts empty forgets finished commands, keys, leases and pending repairs.
//
// The scripts span several keys (and a few derive a key name from a stored record), so the
// store needs a single Redis primary (standalone or Sentinel); Redis Cluster is not supported.
package store
