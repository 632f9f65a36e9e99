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

// Errors of [Store.Decide].
var (
	// ErrSelfApproval: the decider is the command's own requester (contract §4b).
	ErrSelfApproval = errors.New("store: the requester cannot decide on their own command")
	// ErrDecided: the approval was already decided otherwise.
	ErrDecided = errors.New("store: the approval is already decided")
)

// Decision is the state of an [Approval].
type Decision string

// The decisions of an approval.
const (
	DecisionPending  Decision = "pending"
	DecisionApproved Decision = "approved"
	DecisionRejected Decision = "rejected"
)

// Approval is a command that needs a second person's decision before it runs (contract §4b).
// It is kept DedupeTTL; the pending ones are listed by [Store.PendingApprovals].
type Approval struct {
	Command    CommandKey `json:"command"`
	Verb       string     `json:"verb"`
	EndpointID int64      `json:"endpoint_id"`
	// Requester is the command's actor; nobody may decide on their own command.
	Requester string `json:"requester"`
	// Summary says what the command would do, without a secret (e.g. "guest 100 on pve1").
	Summary     string    `json:"summary,omitempty"`
	RequestedAt time.Time `json:"requested_at"`
	// Expires is when the command expires if it is still waiting (zero: unknown).
	Expires time.Time `json:"expires,omitzero"`

	Decision  Decision  `json:"decision"`
	Decider   string    `json:"decider,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
	// Reason is what the decider gave as the reason of the decision ("" when none).
	Reason string `json:"reason,omitempty"`
	// Early is true for a decision recorded before its command arrived (its Verb, Requester
	// and the rest are not known yet); it applies when the command asks for its approval.
	Early bool `json:"early,omitempty"`
	// Plan is the command's dry-run plan (contract §4a), as JSON, shown to the approvers.
	Plan json.RawMessage `json:"plan,omitempty"`
}

// approvalData is the stored JSON of an approval's fixed part; the decision is in hash fields.
type approvalData struct {
	Command     CommandKey      `json:"command"`
	Verb        string          `json:"verb"`
	EndpointID  int64           `json:"endpoint_id"`
	Requester   string          `json:"requester"`
	Summary     string          `json:"summary,omitempty"`
	RequestedAt time.Time       `json:"requested_at"`
	Expires     time.Time       `json:"expires,omitzero"`
	Plan        json.RawMessage `json:"plan,omitempty"`
}

func (s *Store) approvalKey(c CommandKey) string { return s.opts.Prefix + ":approval:" + c.Hash() }
func (s *Store) approvalsKey() string            { return s.opts.Prefix + ":approvals" }

// RequestApproval records a pending approval for a.Command unless it has one, and returns the
// approval as stored: the new one, or the existing one with its decision. A decision recorded
// before the command arrived ([Store.Decide] on an absent approval) is completed with a and
// applies, unless its decider is a.Requester: nobody decides on their own command, so that
// decision is void and the approval is pending. A zero RequestedAt is set to now.
func (s *Store) RequestApproval(ctx context.Context, a Approval) (Approval, error) {
	if a.Command.Source == "" || a.Command.ID == "" {
		return Approval{}, fmt.Errorf("%w: an approval needs a command source and id", ErrInvalid)
	}
	if a.RequestedAt.IsZero() {
		a.RequestedAt = s.opts.Now()
	}
	data, err := json.Marshal(approvalData{Command: a.Command, Verb: a.Verb, EndpointID: a.EndpointID, Requester: a.Requester,
		Summary: a.Summary, RequestedAt: a.RequestedAt.UTC(), Expires: a.Expires.UTC(), Plan: a.Plan})
	if err != nil {
		return Approval{}, fmt.Errorf("store: request approval: %w", err)
	}
	raw, err := s.write(ctx, s.scripts.requestApproval, []string{s.approvalKey(a.Command), s.approvalsKey()},
		data, a.Requester, a.RequestedAt.UnixMilli(), millis(s.opts.DedupeTTL), a.Command.Hash()).StringSlice()
	if err != nil {
		return Approval{}, fmt.Errorf("store: request approval: %w", err)
	}
	return decodeApproval(raw)
}

// Approval returns the approval of c, or an error wrapping ErrNotFound.
func (s *Store) Approval(ctx context.Context, c CommandKey) (Approval, error) {
	raw, err := s.rdb.HMGet(ctx, s.approvalKey(c), approvalFields...).Result()
	if err != nil {
		return Approval{}, fmt.Errorf("store: approval: %w", err)
	}
	if raw[0] == nil {
		return Approval{}, fmt.Errorf("store: approval: %w", ErrNotFound)
	}
	fields := make([]string, len(raw))
	for i, v := range raw {
		fields[i], _ = v.(string)
	}
	return decodeApproval(fields)
}

// ErrFinished is returned by [Store.Decide] for a command that has finished: there is nothing
// left to decide.
var ErrFinished = errors.New("store: the command has finished")

// Decide records decision (approved or rejected) by decider, with reason, on the approval of c
// and returns the approval as it then stands. Deciding again the same way by the same decider
// succeeds (a redelivered approval). A command that has not asked for its approval yet (it has
// not arrived, or is still being checked) keeps the decision for DedupeTTL: the approval is
// returned with Early set, and the decision applies when the command asks
// ([Store.RequestApproval]). It returns an error wrapping ErrFinished when c has finished,
// ErrSelfApproval when decider is its requester, and ErrDecided, with the approval, when it was
// decided otherwise.
func (s *Store) Decide(ctx context.Context, c CommandKey, decision Decision, decider, reason string) (Approval, error) {
	if decision != DecisionApproved && decision != DecisionRejected {
		return Approval{}, fmt.Errorf("%w: decision %q", ErrInvalid, decision)
	}
	early, err := json.Marshal(approvalData{Command: c})
	if err != nil {
		return Approval{}, fmt.Errorf("store: decide: %w", err)
	}
	raw, err := s.write(ctx, s.scripts.decide, []string{s.approvalKey(c), s.approvalsKey(), s.cmdKey(c)},
		string(decision), decider, s.nowMillis(), c.Hash(), reason, early, millis(s.opts.DedupeTTL)).StringSlice()
	if err != nil {
		return Approval{}, fmt.Errorf("store: decide: %w", err)
	}
	switch raw[0] {
	case "finished":
		return Approval{}, fmt.Errorf("store: decide: %w", ErrFinished)
	case "self":
		a, err := decodeApproval(raw[1:])
		if err != nil {
			return Approval{}, err
		}
		return a, fmt.Errorf("store: decide: %w", ErrSelfApproval)
	case "decided":
		a, err := decodeApproval(raw[1:])
		if err != nil {
			return Approval{}, err
		}
		return a, fmt.Errorf("store: decide: %w (%s by %s)", ErrDecided, a.Decision, a.Decider)
	}
	return decodeApproval(raw[1:])
}

// DropApproval removes the approval of c (its command expired or finished); removing an
// absent approval is not an error.
func (s *Store) DropApproval(ctx context.Context, c CommandKey) error {
	if err := s.write(ctx, s.scripts.dropApproval, []string{s.approvalKey(c), s.approvalsKey()}, c.Hash()).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("store: drop approval: %w", err)
	}
	return nil
}

// PendingApprovals returns the approvals still pending, oldest first.
func (s *Store) PendingApprovals(ctx context.Context) ([]Approval, error) {
	raw, err := s.read(ctx, s.scripts.pendingApprovals, []string{s.approvalsKey()}, s.opts.Prefix+":approval:").Slice()
	if err != nil {
		return nil, fmt.Errorf("store: pending approvals: %w", err)
	}
	out, err := decodeRecords(raw, decodeApproval)
	if err != nil {
		return nil, fmt.Errorf("store: pending approvals: %w", err)
	}
	return out, nil
}

// approvalFields are the fields of an approval's hash that [decodeApproval] reads, in order.
var approvalFields = []string{"data", "decision", "decider", "decided_at", "reason", "early"}

// decodeApproval reads {data, decision, decider, decided_at_ms, reason, early}.
func decodeApproval(f []string) (Approval, error) {
	if len(f) < 6 {
		return Approval{}, fmt.Errorf("store: approval record has %d fields", len(f))
	}
	var d approvalData
	if err := json.Unmarshal([]byte(f[0]), &d); err != nil {
		return Approval{}, fmt.Errorf("store: approval record: %w", err)
	}
	a := Approval{Command: d.Command, Verb: d.Verb, EndpointID: d.EndpointID, Requester: d.Requester, Summary: d.Summary,
		RequestedAt: d.RequestedAt, Expires: d.Expires, Plan: d.Plan, Decision: Decision(f[1]), Decider: f[2], Reason: f[4], Early: f[5] == "1"}
	if ms, err := strconv.ParseInt(f[3], 10, 64); err == nil && ms > 0 {
		a.DecidedAt = time.UnixMilli(ms).UTC()
	}
	return a, nil
}

// requestApprovalLua: KEYS[1] approval, KEYS[2] pending index. ARGV: data, requester, now_ms,
// ttl_ms, cmd_hash. Returns {data, decision, decider, decided_at, reason, early}. An early
// decision (field early) is completed with data and requester, and voided when its decider is
// the requester.
const requestApprovalLua = `
local c = redis.call('HMGET', KEYS[1], 'data', 'decision', 'decider', 'decided_at', 'reason', 'early')
if c[1] and c[6] ~= '1' then
  return {c[1], c[2] or '', c[3] or '', c[4] or '', c[5] or '', ''}
end
if c[1] and c[3] ~= ARGV[2] then
  redis.call('HSET', KEYS[1], 'data', ARGV[1], 'requester', ARGV[2])
  redis.call('HDEL', KEYS[1], 'early')
  return {ARGV[1], c[2], c[3], c[4] or '', c[5] or '', ''}
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'data', ARGV[1], 'requester', ARGV[2], 'decision', 'pending')
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[5])
return {ARGV[1], 'pending', '', '', '', ''}
`

// decideLua: KEYS[1] approval, KEYS[2] pending index, KEYS[3] the command's record. ARGV:
// decision, decider, now_ms, cmd_hash, reason, early data, ttl_ms. Returns {'finished'} or
// {'ok'|'self'|'decided', data, decision, decider, decided_at, reason, early}. An absent
// approval of a command without a record is recorded early.
const decideLua = `
local c = redis.call('HMGET', KEYS[1], 'data', 'decision', 'decider', 'decided_at', 'requester', 'reason', 'early')
if not c[1] then
  if redis.call('HGET', KEYS[3], 'state') == 'done' then
    return {'finished'}
  end
  redis.call('HSET', KEYS[1], 'data', ARGV[6], 'decision', ARGV[1], 'decider', ARGV[2], 'decided_at', ARGV[3],
    'reason', ARGV[5], 'early', '1')
  redis.call('PEXPIRE', KEYS[1], ARGV[7])
  return {'ok', ARGV[6], ARGV[1], ARGV[2], ARGV[3], ARGV[5], '1'}
end
if c[2] == 'pending' then
  if c[5] == ARGV[2] then
    return {'self', c[1], c[2], '', '', '', ''}
  end
  redis.call('HSET', KEYS[1], 'decision', ARGV[1], 'decider', ARGV[2], 'decided_at', ARGV[3], 'reason', ARGV[5])
  redis.call('ZREM', KEYS[2], ARGV[4])
  return {'ok', c[1], ARGV[1], ARGV[2], ARGV[3], ARGV[5], ''}
end
if c[2] == ARGV[1] and c[3] == ARGV[2] then
  return {'ok', c[1], c[2], c[3], c[4] or '', c[6] or '', c[7] or ''}
end
return {'decided', c[1], c[2], c[3] or '', c[4] or '', c[6] or '', c[7] or ''}
`

// dropApprovalLua: KEYS[1] approval, KEYS[2] pending index. ARGV: cmd_hash.
const dropApprovalLua = `
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
`

// pendingApprovalsLua: KEYS[1] pending index. ARGV: approval key prefix. Returns the pending
// approvals oldest first, as {data, decision, decider, decided_at, reason, early}; entries whose
// record expired are removed from the index.
const pendingApprovalsLua = `
local out = {}
for _, h in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local c = redis.call('HMGET', ARGV[1] .. h, 'data', 'decision', 'decider', 'decided_at', 'reason', 'early')
  if c[1] then
    table.insert(out, {c[1], c[2] or '', c[3] or '', c[4] or '', c[5] or '', c[6] or ''})
  else
    redis.call('ZREM', KEYS[1], h)
  end
end
return out
`
