package store

import "github.com/redis/go-redis/v9"

// scripts holds the Lua scripts of one Store. Each state change is exactly one of them.
// Numbers computed in Lua are formatted with %d so that millisecond timestamps never turn
// into floating-point notation.
type scripts struct {
	claim, checkpoint, suspend, renew, complete, completeReplay, release, updateResult *redis.Script
	saveRepair, getRepair, deleteRepair, pendingRepairs, claimRepair, reschedule       *redis.Script
	lockScripts
}

func newScripts() scripts {
	return scripts{
		claim:          redis.NewScript(claimLua),
		checkpoint:     redis.NewScript(checkpointLua),
		suspend:        redis.NewScript(suspendLua),
		renew:          redis.NewScript(renewLua),
		complete:       redis.NewScript(completeLua),
		completeReplay: redis.NewScript(completeReplayLua),
		release:        redis.NewScript(releaseLua),
		updateResult:   redis.NewScript(updateResultLua),
		saveRepair:     redis.NewScript(saveRepairLua),
		getRepair:      redis.NewScript(getRepairLua),
		deleteRepair:   redis.NewScript(deleteRepairLua),
		pendingRepairs: redis.NewScript(pendingRepairsLua),
		claimRepair:    redis.NewScript(claimRepairLua),
		reschedule:     redis.NewScript(rescheduleLua),
		lockScripts:    newLockScripts(),
	}
}

// claimLua: KEYS[1] identity, KEYS[2] fence, KEYS[3] idem (optional).
// ARGV: now_ms, lease_ms, dedupe_ms, owner, fingerprint, cmd_hash, source, id.
// Returns {state, token, journal_id, journal_url, dispatched, result, orig_source, orig_id}.
const claimLua = `
local now = tonumber(ARGV[1])
local lease_ms = tonumber(ARGV[2])
local owner, fp, chash, src, id = ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local idem = KEYS[3]
local c = redis.call('HMGET', KEYS[1], 'state', 'owner', 'lease', 'journal_id', 'journal_url', 'dispatched', 'result')
if c[1] == 'done' then
  return {'done', '', '', '', '', c[7] or '', '', ''}
end
local resumed = false
if c[1] == 'running' then
  if (tonumber(c[3]) or 0) > now and c[2] ~= owner then
    return {'busy', '', '', '', '', '', '', ''}
  end
  resumed = true
end
if idem then
  local r = redis.call('HMGET', idem, 'state', 'cmd', 'fp', 'lease', 'result', 'src', 'id')
  local live = r[1] == 'done' or (tonumber(r[4]) or 0) > now
  if r[1] == 'running' and r[2] ~= chash and not live then
    -- The key's command lost its lease. If it had begun its work (journal entry or dispatch),
    -- its own redelivery resumes it: the twin keeps waiting instead of starting over.
    local other = string.sub(KEYS[1], 1, #KEYS[1] - #chash) .. r[2]
    local o = redis.call('HMGET', other, 'state', 'dispatched', 'journal_id')
    if o[1] == 'running' and (o[2] == '1' or (o[3] and o[3] ~= '' and o[3] ~= '0')) then
      live = true
    end
  end
  if r[1] and r[2] ~= chash and live then
    local osrc, oid = r[6] or '', r[7] or ''
    if r[3] ~= fp then
      return {'idem_reused', '', '', '', '', '', osrc, oid}
    end
    if r[1] == 'done' then
      return {'idem_replay', '', '', '', '', r[5] or '', osrc, oid}
    end
    return {'idem_inflight', '', '', '', '', '', osrc, oid}
  end
end
local token = string.format('%d', redis.call('INCR', KEYS[2]))
local deadline = string.format('%d', now + lease_ms)
if not resumed then
  redis.call('DEL', KEYS[1])
end
redis.call('HSET', KEYS[1], 'state', 'running', 'owner', owner, 'token', token, 'lease', deadline,
  'fp', fp, 'src', src, 'id', id, 'idem', idem or '')
redis.call('PEXPIRE', KEYS[1], ARGV[3])
if idem then
  redis.call('DEL', idem)
  redis.call('HSET', idem, 'state', 'running', 'cmd', chash, 'fp', fp, 'owner', owner, 'token', token,
    'lease', deadline, 'src', src, 'id', id)
  redis.call('PEXPIRE', idem, ARGV[3])
end
local state = 'claimed'
if resumed then state = 'resumed' end
return {state, token, c[4] or '', c[5] or '', c[6] or '', '', '', ''}
`

// checkpointLua: KEYS[1] identity. ARGV: owner, token, journal_id, journal_url, dispatched
// (empty = keep). Returns 1, or 0 when the lease is lost.
const checkpointLua = `
local c = redis.call('HMGET', KEYS[1], 'state', 'owner', 'token')
if c[1] ~= 'running' or c[2] ~= ARGV[1] or c[3] ~= ARGV[2] then
  return 0
end
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'journal_id', ARGV[3]) end
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'journal_url', ARGV[4]) end
if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'dispatched', ARGV[5]) end
return 1
`

// suspendLua: KEYS[1] identity. ARGV: owner, token, journal_id, journal_url, dispatched.
// Writes the progress exactly and ends the lease now. Returns 1, or 0 when the lease is lost.
const suspendLua = `
local c = redis.call('HMGET', KEYS[1], 'state', 'owner', 'token')
if c[1] ~= 'running' or c[2] ~= ARGV[1] or c[3] ~= ARGV[2] then
  return 0
end
redis.call('HSET', KEYS[1], 'journal_id', ARGV[3], 'journal_url', ARGV[4], 'dispatched', ARGV[5], 'lease', '0')
return 1
`

// renewLua: KEYS[1] identity, KEYS[2] idem (optional). ARGV: owner, token, now_ms, lease_ms,
// dedupe_ms, cmd_hash. Returns 1, or 0 when the lease is lost.
const renewLua = `
local c = redis.call('HMGET', KEYS[1], 'state', 'owner', 'token', 'fp', 'src', 'id')
if c[1] ~= 'running' or c[2] ~= ARGV[1] or c[3] ~= ARGV[2] then
  return 0
end
local deadline = string.format('%d', tonumber(ARGV[3]) + tonumber(ARGV[4]))
redis.call('HSET', KEYS[1], 'lease', deadline)
redis.call('PEXPIRE', KEYS[1], ARGV[5])
if KEYS[2] then
  local r = redis.call('HMGET', KEYS[2], 'state', 'cmd')
  if not r[1] then
    redis.call('HSET', KEYS[2], 'state', 'running', 'cmd', ARGV[6], 'fp', c[4] or '', 'owner', ARGV[1],
      'token', ARGV[2], 'lease', deadline, 'src', c[5] or '', 'id', c[6] or '')
    redis.call('PEXPIRE', KEYS[2], ARGV[5])
  elseif r[1] == 'running' and r[2] == ARGV[6] then
    redis.call('HSET', KEYS[2], 'owner', ARGV[1], 'token', ARGV[2], 'lease', deadline)
    redis.call('PEXPIRE', KEYS[2], ARGV[5])
  end
end
return 1
`

// completeLua: KEYS[1] identity, KEYS[2] idem (optional). ARGV: owner, token, result,
// dedupe_ms, window_ms, cmd_hash. Returns 1, or 0 when the lease is lost. A repeated Complete
// by the same owner and token (a retry after a lost answer) succeeds again.
const completeLua = `
local c = redis.call('HMGET', KEYS[1], 'state', 'owner', 'token', 'fp', 'src', 'id')
if (c[1] ~= 'running' and c[1] ~= 'done') or c[2] ~= ARGV[1] or c[3] ~= ARGV[2] then
  return 0
end
redis.call('HSET', KEYS[1], 'state', 'done', 'result', ARGV[3], 'idem', KEYS[2] or '')
redis.call('HDEL', KEYS[1], 'lease')
redis.call('PEXPIRE', KEYS[1], ARGV[4])
if KEYS[2] then
  local r = redis.call('HMGET', KEYS[2], 'state', 'cmd')
  if not r[1] or r[2] == ARGV[6] then
    redis.call('DEL', KEYS[2])
    redis.call('HSET', KEYS[2], 'state', 'done', 'cmd', ARGV[6], 'fp', c[4] or '', 'owner', ARGV[1],
      'token', ARGV[2], 'result', ARGV[3], 'src', c[5] or '', 'id', c[6] or '')
    redis.call('PEXPIRE', KEYS[2], ARGV[5])
  end
end
return 1
`

// completeReplayLua: KEYS[1] identity. ARGV: now_ms, result, dedupe_ms, source, id.
// Returns 1 (written or already done), or 0 when a live claim holds the identity.
const completeReplayLua = `
local c = redis.call('HMGET', KEYS[1], 'state', 'lease')
if c[1] == 'done' then
  return 1
end
if c[1] == 'running' and (tonumber(c[2]) or 0) > tonumber(ARGV[1]) then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'state', 'done', 'result', ARGV[2], 'src', ARGV[4], 'id', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`

// releaseLua: KEYS[1] identity, KEYS[2] idem (optional). ARGV: owner, token, cmd_hash.
// Returns 1, or 0 when the identity belongs to another owner or is done.
const releaseLua = `
local c = redis.call('HMGET', KEYS[1], 'state', 'owner', 'token')
if c[1] then
  if c[1] ~= 'running' or c[2] ~= ARGV[1] or c[3] ~= ARGV[2] then
    return 0
  end
  redis.call('DEL', KEYS[1])
end
if KEYS[2] then
  local r = redis.call('HMGET', KEYS[2], 'state', 'cmd', 'token')
  if r[1] == 'running' and r[2] == ARGV[3] and r[3] == ARGV[2] then
    redis.call('DEL', KEYS[2])
  end
end
return 1
`

// updateResultLua: KEYS[1] identity. ARGV: result, cmd_hash. The idem key is the one the
// identity record names. Returns 1, or 0 when the command is not done.
const updateResultLua = `
local c = redis.call('HMGET', KEYS[1], 'state', 'idem')
if c[1] ~= 'done' then
  return 0
end
redis.call('HSET', KEYS[1], 'result', ARGV[1])
if c[2] and c[2] ~= '' then
  local r = redis.call('HMGET', c[2], 'state', 'cmd')
  if r[1] == 'done' and r[2] == ARGV[2] then
    redis.call('HSET', c[2], 'result', ARGV[1])
  end
end
return 1
`

// saveRepairLua: KEYS[1] repair, KEYS[2] repairs zset. ARGV: data, attempts, last_error,
// next_ms, member.
const saveRepairLua = `
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'data', ARGV[1], 'attempts', ARGV[2], 'last_error', ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[5])
return 1
`

// getRepairLua: KEYS[1] repair, KEYS[2] repairs zset. ARGV: member.
// Returns {data, attempts, last_error, next_ms} or nil.
const getRepairLua = `
local r = redis.call('HMGET', KEYS[1], 'data', 'attempts', 'last_error')
if not r[1] then
  return false
end
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
return {r[1], r[2] or '0', r[3] or '', score or '0'}
`

// deleteRepairLua: KEYS[1] repair, KEYS[2] repairs zset. ARGV: member.
const deleteRepairLua = `
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
`

// pendingRepairsLua: KEYS[1] repairs zset. ARGV: repair key prefix.
// Returns a list of {data, attempts, last_error, next_ms}, ordered by next_ms.
const pendingRepairsLua = `
local m = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local out = {}
for i = 1, #m, 2 do
  local r = redis.call('HMGET', ARGV[1] .. m[i], 'data', 'attempts', 'last_error')
  if r[1] then
    table.insert(out, {r[1], r[2] or '0', r[3] or '', m[i + 1]})
  end
end
return out
`

// claimRepairLua: KEYS[1] repairs zset. ARGV: now_ms, lease_ms, repair key prefix.
// Moves the earliest due member to now+lease and returns {data, attempts, last_error,
// next_ms}, or nil when nothing is due. Members whose record vanished are dropped.
const claimRepairLua = `
local now = tonumber(ARGV[1])
for _ = 1, 16 do
  local m = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 1)
  if #m == 0 then
    return false
  end
  local r = redis.call('HMGET', ARGV[3] .. m[1], 'data', 'attempts', 'last_error')
  if r[1] then
    local nextms = string.format('%d', now + tonumber(ARGV[2]))
    redis.call('ZADD', KEYS[1], nextms, m[1])
    return {r[1], r[2] or '0', r[3] or '', nextms}
  end
  redis.call('ZREM', KEYS[1], m[1])
end
return false
`

// rescheduleLua: KEYS[1] repair, KEYS[2] repairs zset. ARGV: member, next_ms, last_error.
// Returns 1, or 0 when the repair does not exist.
const rescheduleLua = `
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HINCRBY', KEYS[1], 'attempts', 1)
redis.call('HSET', KEYS[1], 'last_error', ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
return 1
`

// ---- Per-resource leases and per-endpoint slots (guestlock.go, slots.go) ----

// lockScripts holds the scripts of resource leases and endpoint slots.
type lockScripts struct {
	acquireResource, renewResource, releaseResource *redis.Script
	acquireSlot, renewSlot                          *redis.Script
}

func newLockScripts() lockScripts {
	return lockScripts{
		acquireResource: redis.NewScript(acquireResourceLua),
		renewResource:   redis.NewScript(renewResourceLua),
		releaseResource: redis.NewScript(releaseResourceLua),
		acquireSlot:     redis.NewScript(acquireSlotLua),
		renewSlot:       redis.NewScript(renewSlotLua),
	}
}

// acquireResourceLua: KEYS[1] lock, KEYS[2] fence. ARGV: now_ms, lease_ms, owner, key_ttl_ms.
// Returns {1, owner, token} when the caller holds the lease now (new, taken over from an
// expired holder with a new token, or already its own: deadline extended, token kept), or
// {0, owner, token} of the live holder.
const acquireResourceLua = `
local now = tonumber(ARGV[1])
local deadline = string.format('%d', now + tonumber(ARGV[2]))
local c = redis.call('HMGET', KEYS[1], 'owner', 'token', 'lease')
if c[1] and (tonumber(c[3]) or 0) > now then
  if c[1] ~= ARGV[3] then
    return {0, c[1], c[2] or '0'}
  end
  redis.call('HSET', KEYS[1], 'lease', deadline)
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  return {1, c[1], c[2] or '0'}
end
local token = string.format('%d', redis.call('INCR', KEYS[2]))
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'owner', ARGV[3], 'token', token, 'lease', deadline)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {1, ARGV[3], token}
`

// renewResourceLua: KEYS[1] lock. ARGV: owner, token, now_ms, lease_ms, key_ttl_ms.
// Returns 1, or 0 when the lock is gone or held by another owner or token.
const renewResourceLua = `
local c = redis.call('HMGET', KEYS[1], 'owner', 'token')
if c[1] ~= ARGV[1] or c[2] ~= ARGV[2] then
  return 0
end
redis.call('HSET', KEYS[1], 'lease', string.format('%d', tonumber(ARGV[3]) + tonumber(ARGV[4])))
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
`

// releaseResourceLua: KEYS[1] lock. ARGV: owner, token.
// Returns 1 (deleted, or already gone), or 0 when another owner or token holds the lock
// (left alone).
const releaseResourceLua = `
local c = redis.call('HMGET', KEYS[1], 'owner', 'token')
if not c[1] then
  return 1
end
if c[1] ~= ARGV[1] or c[2] ~= ARGV[2] then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
`

// acquireSlotLua: KEYS[1] slots zset. ARGV: now_ms, lease_ms, max, holder, key_ttl_ms.
// Drops holders whose deadline is <= now, then adds (or, for a present holder, extends) holder
// when it is present or fewer than max are left. Returns 1, or 0 when all slots are taken.
const acquireSlotLua = `
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZSCORE', KEYS[1], ARGV[4]) or redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], string.format('%d', now + tonumber(ARGV[2])), ARGV[4])
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  return 1
end
return 0
`

// renewSlotLua: KEYS[1] slots zset. ARGV: holder, now_ms, lease_ms, key_ttl_ms.
// Returns 1, or 0 when holder is no longer in the set (released or dropped after expiry).
const renewSlotLua = `
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', string.format('%d', tonumber(ARGV[2]) + tonumber(ARGV[3])), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`
