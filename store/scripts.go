package store

import "github.com/redis/go-redis/v9"

// scripts holds the Lua scripts of one Store. Each state change is exactly one of them.
// Numbers computed in Lua are formatted with %d so that millisecond timestamps never turn
// into floating-point notation.
type scripts struct {
	claim, suspend, renew, complete, completeReplay, release, updateResult       *redis.Script
	saveRepair, getRepair, deleteRepair, pendingRepairs, claimRepair, reschedule *redis.Script
	recordFailure, finishUnstarted, dispatching, requestCancel                   *redis.Script
	requestApproval, decide, dropApproval, pendingApprovals                      *redis.Script
}

func newScripts() scripts {
	return scripts{
		claim:            redis.NewScript(claimLua),
		suspend:          redis.NewScript(suspendLua),
		renew:            redis.NewScript(renewLua),
		complete:         redis.NewScript(completeLua),
		completeReplay:   redis.NewScript(completeReplayLua),
		release:          redis.NewScript(releaseLua),
		updateResult:     redis.NewScript(updateResultLua),
		saveRepair:       redis.NewScript(saveRepairLua),
		getRepair:        redis.NewScript(getRepairLua),
		deleteRepair:     redis.NewScript(deleteRepairLua),
		pendingRepairs:   redis.NewScript(pendingRepairsLua),
		claimRepair:      redis.NewScript(claimRepairLua),
		reschedule:       redis.NewScript(rescheduleLua),
		recordFailure:    redis.NewScript(recordFailureLua),
		finishUnstarted:  redis.NewScript(finishUnstartedLua),
		dispatching:      redis.NewScript(dispatchingLua),
		requestCancel:    redis.NewScript(requestCancelLua),
		requestApproval:  redis.NewScript(requestApprovalLua),
		decide:           redis.NewScript(decideLua),
		dropApproval:     redis.NewScript(dropApprovalLua),
		pendingApprovals: redis.NewScript(pendingApprovalsLua),
	}
}

// optLua is the prelude of the scripts that take optional keys: opt(ARGV[i]) is the key at
// the index ARGV[i] names, or nil for "0" (absent).
const optLua = `
local function opt(i)
  i = tonumber(i)
  if not i or i == 0 then return nil end
  return KEYS[i]
end
`

// enterLua is the part of the scripts that move a command's record to another phase (claim,
// suspend, complete, finish-unstarted, complete-replay): enter(key, phase, now_ms) sets the
// record's phase and appends "phase@now_ms" to its history, which keeps the newest
// historyLength entries.
const enterLua = `
local function enter(key, phase, now)
  local h = redis.call('HGET', key, 'history') or ''
  h = h .. phase .. '@' .. now .. ' '
  local _, n = string.gsub(h, ' ', ' ')
  while n > 16 do
    h = string.sub(h, string.find(h, ' ', 1, true) + 1)
    n = n - 1
  end
  redis.call('HSET', key, 'phase', phase, 'history', h)
end
`

// historyLength is how many phases a record's history keeps (enterLua).
const historyLength = 16

// releaseGuardsLua is the part of completeLua, releaseLua and suspendLua that gives the
// command's guards back: the resource lease while owner and token still hold it (unless
// keep_lock is set), and the owner's endpoint slot. Each guard it gives back is announced on
// the channel named like the guard's key (see [Store.WatchFreed]). It expects lock, slots,
// owner and token to be set.
const releaseGuardsLua = `
local function release_guards(keep_lock)
  if lock and not keep_lock then
    local l = redis.call('HMGET', lock, 'owner', 'token')
    if l[1] == owner and l[2] == token then
      redis.call('DEL', lock)
      redis.call('PUBLISH', lock, '')
    end
  end
  if slots and redis.call('ZREM', slots, owner) == 1 then
    redis.call('PUBLISH', slots, '')
  end
end
`

// claimLua: KEYS[1] identity, KEYS[2] fence, then the optional idem, resource lease and slots
// keys at the indices ARGV[9..11] name ("0" = absent).
// ARGV: now_ms, lease_ms, dedupe_ms, owner, fingerprint, cmd_hash, source, id, idem_i, lock_i,
// slots_i, slots_max, guard_ttl_ms, verb, resource (kept on the record when not empty).
// Returns {state, token, journal_id, journal_url, dispatched, result, orig_source, orig_id,
// progress_known, busy_guard, marks, dispatched_at, sent, resource}: progress_known is '1' when the previous
// owner suspended or marked its dispatch (the journal and dispatch fields are then exact),
// marks is '1' when the previous owner marked every dispatch before sending it (so a record
// without the mark never sent a write). Every refusal returns before the first write: a
// refused claim changes nothing.
const claimLua = optLua + enterLua + `
local now = tonumber(ARGV[1])
local lease_ms = tonumber(ARGV[2])
local owner, fp, chash, src, id = ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local idem, lock, slots = opt(ARGV[9]), opt(ARGV[10]), opt(ARGV[11])
local c = redis.call('HMGET', KEYS[1], 'state', 'owner', 'lease', 'journal_id', 'journal_url', 'dispatched', 'result', 'suspended',
  'marks', 'dispatched_at', 'sent', 'resource')
if c[1] == 'done' then
  return {'done', '', '', '', '', c[7] or '', '', '', '', '', '', '', '', ''}
end
local resumed = false
if c[1] == 'running' then
  if (tonumber(c[3]) or 0) > now and c[2] ~= owner then
    return {'busy', '', '', '', '', '', '', '', '', '', '', '', '', ''}
  end
  resumed = true
end
if idem then
  local r = redis.call('HMGET', idem, 'state', 'cmd', 'fp', 'lease', 'result', 'src', 'id')
  local live = r[1] == 'done' or (tonumber(r[4]) or 0) > now
  if r[1] == 'running' and r[2] ~= chash and not live then
    -- The key's command lost its lease. If it may have begun its work (it stopped without
    -- suspending, or suspended after its journal entry or dispatch), its own redelivery
    -- resumes it: the twin keeps waiting instead of starting over.
    local other = string.sub(KEYS[1], 1, #KEYS[1] - #chash) .. r[2]
    local o = redis.call('HMGET', other, 'state', 'dispatched', 'journal_id', 'suspended')
    if o[1] == 'running' and (o[4] ~= '1' or o[2] == '1' or (o[3] and o[3] ~= '' and o[3] ~= '0')) then
      live = true
    end
  end
  if r[1] and r[2] ~= chash and live then
    local osrc, oid = r[6] or '', r[7] or ''
    if r[3] ~= fp then
      return {'idem_reused', '', '', '', '', '', osrc, oid, '', '', '', '', '', ''}
    end
    if r[1] == 'done' then
      return {'idem_replay', '', '', '', '', r[5] or '', osrc, oid, '', '', '', '', '', ''}
    end
    return {'idem_inflight', '', '', '', '', '', osrc, oid, '', '', '', '', '', ''}
  end
end
if lock then
  local l = redis.call('HMGET', lock, 'owner', 'lease', 'cmd')
  -- A lease this command holds (an earlier owner of it suspended or stopped) is its own to
  -- resume: the identity record above already decided that it may.
  if l[1] and l[1] ~= owner and l[3] ~= chash then
    local busy = (tonumber(l[2]) or 0) > now
    if not busy and l[3] and l[3] ~= '' then
      -- The holder's lease expired. If it may have written (it stopped without suspending,
      -- or suspended after a dispatch), the guest stays its own until its redelivery has
      -- confirmed the effect: another command must not change what it will read.
      local other = string.sub(KEYS[1], 1, #KEYS[1] - #chash) .. l[3]
      local o = redis.call('HMGET', other, 'state', 'dispatched', 'suspended')
      if o[1] == 'running' and (o[3] ~= '1' or o[2] == '1') then
        busy = true
      end
    end
    if busy then
      return {'guard_busy', '', '', '', '', '', '', '', '', 'resource', '', '', '', ''}
    end
  end
end
if slots then
  if not redis.call('ZSCORE', slots, owner) and
     redis.call('ZCOUNT', slots, '(' .. ARGV[1], '+inf') >= tonumber(ARGV[12]) then
    return {'guard_busy', '', '', '', '', '', '', '', '', 'slot', '', '', '', ''}
  end
end
local token = string.format('%d', redis.call('INCR', KEYS[2]))
local deadline = string.format('%d', now + lease_ms)
if not resumed then
  redis.call('DEL', KEYS[1])
else
  if c[9] == '1' then
    -- The previous owner marked its writes: the marks stay, for every later owner (this one
    -- may stop too); only the suspension is handed over.
    redis.call('HDEL', KEYS[1], 'suspended')
  else
    -- The recorded progress is handed to the new owner; from now on the record says only
    -- that this owner runs the command.
    redis.call('HDEL', KEYS[1], 'journal_id', 'journal_url', 'dispatched', 'suspended', 'dispatched_at', 'sent')
  end
end
redis.call('HSET', KEYS[1], 'state', 'running', 'owner', owner, 'token', token, 'lease', deadline,
  'fp', fp, 'src', src, 'id', id, 'idem', idem or '', 'marks', '1', 'verb', ARGV[14])
if ARGV[15] ~= '' then
  redis.call('HSET', KEYS[1], 'resource', ARGV[15])
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
if idem then
  redis.call('DEL', idem)
  redis.call('HSET', idem, 'state', 'running', 'cmd', chash, 'fp', fp, 'owner', owner, 'token', token,
    'lease', deadline, 'src', src, 'id', id)
  redis.call('PEXPIRE', idem, ARGV[3])
end
if lock then
  redis.call('DEL', lock)
  redis.call('HSET', lock, 'owner', owner, 'token', token, 'lease', deadline, 'cmd', chash)
  redis.call('PEXPIRE', lock, ARGV[3])
end
if slots then
  redis.call('ZREMRANGEBYSCORE', slots, '-inf', ARGV[1])
  redis.call('ZADD', slots, deadline, owner)
  redis.call('PEXPIRE', slots, ARGV[13])
end
local phase = 'running'
if resumed and c[6] == '1' then phase = 'confirming' end
enter(KEYS[1], phase, ARGV[1])
local state = 'claimed'
if resumed then state = 'resumed' end
local known = c[8] or ''
if c[6] == '1' and c[10] and c[10] ~= '' then
  known = '1'
end
return {state, token, c[4] or '', c[5] or '', c[6] or '', '', '', '', known, '', c[9] or '', c[10] or '', c[11] or '', c[12] or ''}
`

// requestCancelLua: KEYS[1] identity. ARGV: by, reason, now_ms. Records, on a running record
// only, who asked to cancel it, why and when, and announces it on the record's channel (as
// WatchFreed hears it). Returns {'running', verb} or {'absent'|'done'}.
const requestCancelLua = `
local c = redis.call('HMGET', KEYS[1], 'state', 'verb')
if c[1] ~= 'running' then
  return {c[1] or 'absent', ''}
end
redis.call('HSET', KEYS[1], 'cancel_by', ARGV[1], 'cancel_reason', ARGV[2], 'cancel_at', ARGV[3])
redis.call('PUBLISH', KEYS[1], 'cancel')
return {'running', c[2] or ''}
`

// dispatchingLua: KEYS[1] identity. ARGV: owner, token, journal_id, journal_url, now_ms, step.
// Marks, while this owner and token hold the running record, that a Proxmox write (step) is
// about to leave: the journal entry, dispatched = 1, the time of the first, and step added to
// the steps sent. Returns 1, or 0 when the lease is lost.
const dispatchingLua = `
local c = redis.call('HMGET', KEYS[1], 'state', 'owner', 'token', 'sent')
if c[1] ~= 'running' or c[2] ~= ARGV[1] or c[3] ~= ARGV[2] then
  return 0
end
local sent = ARGV[6]
if c[4] and c[4] ~= '' then
  sent = c[4] .. ',' .. ARGV[6]
end
redis.call('HSET', KEYS[1], 'journal_id', ARGV[3], 'journal_url', ARGV[4], 'dispatched', '1', 'sent', sent)
redis.call('HSETNX', KEYS[1], 'dispatched_at', ARGV[5])
return 1
`

// suspendLua: KEYS[1] identity, then the optional idem, lock and slots keys at the indices
// ARGV[6..8] name. ARGV: owner, token, journal_id, journal_url, dispatched, idem_i, lock_i,
// slots_i, yield, sent (the marked writes, comma-separated; replaces the record's), now_ms. Gives the guards back (only while this owner and token hold them), then
// writes the progress exactly, marks the record suspended and ends the lease now; with yield
// = '1' it only ends the lease (no progress, not marked suspended). Returns 1, or 0 when the lease is lost.
const suspendLua = optLua + enterLua + `
local owner, token = ARGV[1], ARGV[2]
local lock, slots = opt(ARGV[7]), opt(ARGV[8])
` + releaseGuardsLua + `
-- A command that may have written (yielded with unknown progress, or dispatched) keeps its
-- resource lease: the claim script lets no other command take the guest until it resumed.
release_guards(ARGV[9] == '1' or ARGV[5] == '1')
local c = redis.call('HMGET', KEYS[1], 'state', 'owner', 'token')
if c[1] ~= 'running' or c[2] ~= owner or c[3] ~= token then
  return 0
end
if ARGV[9] == '1' then
  redis.call('HSET', KEYS[1], 'lease', '0')
  enter(KEYS[1], 'waiting', ARGV[11])
  return 1
end
if ARGV[5] == '1' then
  enter(KEYS[1], 'confirming', ARGV[11])
else
  enter(KEYS[1], 'waiting', ARGV[11])
end
redis.call('HSET', KEYS[1], 'journal_id', ARGV[3], 'journal_url', ARGV[4], 'dispatched', ARGV[5],
  'suspended', '1', 'lease', '0')
if ARGV[5] ~= '1' then
  redis.call('HDEL', KEYS[1], 'sent', 'dispatched_at')
elseif ARGV[10] ~= '' then
  redis.call('HSET', KEYS[1], 'sent', ARGV[10])
end
return 1
`

// renewLua: KEYS[1] identity, then the optional idem, lock and slots keys at the indices
// ARGV[7..9] name. ARGV: owner, token, now_ms, lease_ms, dedupe_ms, cmd_hash, idem_i, lock_i,
// slots_i, guard_ttl_ms. Renews the claim, the Idempotency-Key record and the guards in one
// step. Returns 1, 2 when the claim was renewed but a guard had been taken by another holder,
// or 0 when the lease is lost (nothing renewed).
const renewLua = optLua + `
local owner, token = ARGV[1], ARGV[2]
local idem, lock, slots = opt(ARGV[7]), opt(ARGV[8]), opt(ARGV[9])
local c = redis.call('HMGET', KEYS[1], 'state', 'owner', 'token', 'fp', 'src', 'id')
if c[1] ~= 'running' or c[2] ~= owner or c[3] ~= token then
  return 0
end
local now = tonumber(ARGV[3])
local deadline = string.format('%d', now + tonumber(ARGV[4]))
redis.call('HSET', KEYS[1], 'lease', deadline)
redis.call('PEXPIRE', KEYS[1], ARGV[5])
if idem then
  local r = redis.call('HMGET', idem, 'state', 'cmd')
  if not r[1] then
    redis.call('HSET', idem, 'state', 'running', 'cmd', ARGV[6], 'fp', c[4] or '', 'owner', owner,
      'token', token, 'lease', deadline, 'src', c[5] or '', 'id', c[6] or '')
    redis.call('PEXPIRE', idem, ARGV[5])
  elseif r[1] == 'running' and r[2] == ARGV[6] then
    redis.call('HSET', idem, 'owner', owner, 'token', token, 'lease', deadline)
    redis.call('PEXPIRE', idem, ARGV[5])
  end
end
local answer = 1
if lock then
  local l = redis.call('HMGET', lock, 'owner', 'token', 'lease')
  if (l[1] == owner and l[2] == token) or not l[1] then
    redis.call('HSET', lock, 'owner', owner, 'token', token, 'lease', deadline, 'cmd', ARGV[6])
    redis.call('PEXPIRE', lock, ARGV[5])
  else
    answer = 2
  end
end
if slots then
  if redis.call('ZADD', slots, 'XX', 'CH', deadline, owner) == 0 and not redis.call('ZSCORE', slots, owner) then
    answer = 2
  else
    redis.call('PEXPIRE', slots, ARGV[10])
  end
end
return answer
`

// completeLua: KEYS[1] identity, then the optional idem, lock and slots keys at the indices
// ARGV[7..9] name. ARGV: owner, token, result, dedupe_ms, window_ms, cmd_hash, idem_i, lock_i,
// slots_i, now_ms. Returns 1, or 0 when the lease is lost. A repeated Complete by the same owner and
// token (a retry after a lost answer) succeeds again. The guards are given back either way
// (only while this owner and token hold them).
const completeLua = optLua + enterLua + `
local owner, token = ARGV[1], ARGV[2]
local idem, lock, slots = opt(ARGV[7]), opt(ARGV[8]), opt(ARGV[9])
` + releaseGuardsLua + `
release_guards()
local c = redis.call('HMGET', KEYS[1], 'state', 'owner', 'token', 'fp', 'src', 'id')
if (c[1] ~= 'running' and c[1] ~= 'done') or c[2] ~= owner or c[3] ~= token then
  return 0
end
if c[1] ~= 'done' then
  enter(KEYS[1], 'ended', ARGV[10])
end
redis.call('HSET', KEYS[1], 'state', 'done', 'result', ARGV[3], 'idem', idem or '')
redis.call('HDEL', KEYS[1], 'lease', 'suspended')
redis.call('PEXPIRE', KEYS[1], ARGV[4])
if idem then
  local r = redis.call('HMGET', idem, 'state', 'cmd')
  if not r[1] or r[2] == ARGV[6] then
    redis.call('DEL', idem)
    redis.call('HSET', idem, 'state', 'done', 'cmd', ARGV[6], 'fp', c[4] or '', 'owner', owner,
      'token', token, 'result', ARGV[3], 'src', c[5] or '', 'id', c[6] or '')
    redis.call('PEXPIRE', idem, ARGV[5])
  end
end
return 1
`

// completeReplayLua: KEYS[1] identity. ARGV: now_ms, result, dedupe_ms, source, id.
// Returns 1 (written or already done), or 0 when a live claim holds the identity.
const completeReplayLua = enterLua + `
local c = redis.call('HMGET', KEYS[1], 'state', 'lease')
if c[1] == 'done' then
  return 1
end
if c[1] == 'running' and (tonumber(c[2]) or 0) > tonumber(ARGV[1]) then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'state', 'done', 'result', ARGV[2], 'src', ARGV[4], 'id', ARGV[5])
enter(KEYS[1], 'ended', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`

// finishUnstartedLua: KEYS[1] identity. ARGV: result, dedupe_ms, source, id, now_ms. Stores result as
// done only when the identity record is absent, and then announces it on the channel named like
// the identity key. Returns {'stored', ”}, {'done', result} or
// {'running', ”}: a record that is running, live or not, is left alone.
const finishUnstartedLua = enterLua + `
local c = redis.call('HMGET', KEYS[1], 'state', 'result')
if c[1] == 'done' then
  return {'done', c[2] or ''}
end
if c[1] then
  return {'running', ''}
end
redis.call('HSET', KEYS[1], 'state', 'done', 'result', ARGV[1], 'src', ARGV[3], 'id', ARGV[4])
enter(KEYS[1], 'ended', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PUBLISH', KEYS[1], '')
return {'stored', ''}
`

// releaseLua: KEYS[1] identity, then the optional idem, lock and slots keys at the indices
// ARGV[4..6] name. ARGV: owner, token, cmd_hash, idem_i, lock_i, slots_i. Gives the guards back
// (only while this owner and token hold them). Returns 1, or 0 when the identity belongs to
// another owner or is done.
const releaseLua = optLua + `
local owner, token = ARGV[1], ARGV[2]
local idem, lock, slots = opt(ARGV[4]), opt(ARGV[5]), opt(ARGV[6])
` + releaseGuardsLua + `
release_guards()
local c = redis.call('HMGET', KEYS[1], 'state', 'owner', 'token')
if c[1] then
  if c[1] ~= 'running' or c[2] ~= owner or c[3] ~= token then
    return 0
  end
  redis.call('DEL', KEYS[1])
end
if idem then
  local r = redis.call('HMGET', idem, 'state', 'cmd', 'token')
  if r[1] == 'running' and r[2] == ARGV[3] and r[3] == token then
    redis.call('DEL', idem)
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

// recordFailureLua: KEYS[1] failures counter. ARGV: ttl_ms. Counts one failed attempt and
// returns the new count.
const recordFailureLua = `
local n = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return n
`
