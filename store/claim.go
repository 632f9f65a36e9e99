package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ClaimState is the outcome of [Store.Claim].
type ClaimState int

// The outcomes of [Store.Claim]. The zero value is not a valid outcome.
const (
	// Claimed: the command is new; the caller owns it and executes it.
	Claimed ClaimState = iota + 1
	// Resumed: the command was running under an owner whose lease expired (a crashed replica)
	// or under this same owner; the caller owns it now and continues from Claim.Progress,
	// never writing again what Progress says was already written.
	Resumed
	// Busy: another owner holds a live lease on the command; the caller retries later.
	Busy
	// Done: the command finished before; Claim.Result is its stored result.
	Done
	// IdemReplay: another command with the same Idempotency-Key and fingerprint finished
	// within the window; Claim.Result is its result. No record was written for this command:
	// the caller records the replay with [Store.CompleteReplay].
	IdemReplay
	// IdemInFlight: another command with the same key and fingerprint is running under a live
	// lease; the caller waits and claims again.
	IdemInFlight
	// IdemReused: the key was used by another command with a different fingerprint within the
	// window; nothing was written.
	IdemReused
	// GuardBusy: the caller would own the command, but one of the guards it asked for
	// ([ClaimRequest.Guards]) is held by another command (Claim.BusyGuard says which). Nothing
	// was written (no identity, no Idempotency-Key record, no guard): the caller retries later.
	GuardBusy
)

// String returns the lower-case name of the state ("claimed", "idem_replay", …), or
// "ClaimState(n)" for an unknown value.
func (c ClaimState) String() string {
	switch c {
	case Claimed:
		return "claimed"
	case Resumed:
		return "resumed"
	case Busy:
		return "busy"
	case Done:
		return "done"
	case IdemReplay:
		return "idem_replay"
	case IdemInFlight:
		return "idem_inflight"
	case IdemReused:
		return "idem_reused"
	case GuardBusy:
		return "guard_busy"
	default:
		return "ClaimState(" + strconv.Itoa(int(c)) + ")"
	}
}

// claimStates maps the scripts' state words to ClaimState.
var claimStates = map[string]ClaimState{
	"claimed": Claimed, "resumed": Resumed, "busy": Busy, "done": Done,
	"idem_replay": IdemReplay, "idem_inflight": IdemInFlight, "idem_reused": IdemReused,
	"guard_busy": GuardBusy,
}

// The guards [Claim.BusyGuard] names.
const (
	// GuardResource is the resource lease ([Guards.Resource]).
	GuardResource = "resource"
	// GuardSlot is the endpoint slot ([Guards.Slot]).
	GuardSlot = "slot"
)

// Guards are what a write command holds besides its claim while it runs. Both are optional.
type Guards struct {
	// Resource, when set, is the exclusive lease on one guest or node: two commands holding it
	// never run at once, on any replica.
	Resource *ResourceKey
	// Slot, when set, is a place among the endpoint's max_parallel running commands.
	Slot *SlotRequest
}

// SlotRequest asks for one of the Max slots of an endpoint.
type SlotRequest struct {
	EndpointID int64
	Max        int
}

// Progress is what an owner records about a running command when it suspends it
// ([Store.Suspend]), so that a later owner never repeats a write.
type Progress struct {
	JournalID  int64  `json:"journal_id,omitempty"`
	JournalURL string `json:"journal_url,omitempty"`
	Dispatched bool   `json:"dispatched,omitempty"` // a Proxmox write may have been sent
	// DispatchedAt is when the command's first write was marked as leaving ([Store.Dispatching]),
	// to the millisecond; zero when unknown.
	DispatchedAt time.Time `json:"dispatched_at,omitzero"`
	// Sent names the writes (their steps, in order, repeated as often as sent) marked as
	// leaving; a write not in it certainly did not leave. Nil when unknown (an owner that did
	// not mark its writes).
	Sent []string `json:"sent,omitempty"`
}

// ClaimRequest asks to execute one command.
type ClaimRequest struct {
	Command CommandKey
	// Idem is the Idempotency-Key scope; nil when the command has no Idempotency-Key.
	Idem *IdemScope
	// Fingerprint is the hash of the canonical, secret-free request data.
	Fingerprint string
	// Owner is unique per attempt (instance id + random). It also holds the guards.
	Owner string
	// Guards are taken in the same atomic step when the caller would own the command (Claimed
	// or Resumed); when one is held elsewhere the answer is GuardBusy and nothing changes.
	Guards Guards
	// Verb is the command's verb, kept on its record (for a cancellation to know what runs).
	Verb string
	// Resource is the command's resource id once located (the vmid a guest name named), kept
	// on its record, so that a resumed command knows what it acted on (Claim.Resource).
	Resource string
}

// Claim is the answer of [Store.Claim].
type Claim struct {
	State ClaimState
	// Lease is valid for Claimed and Resumed: pass it to Renew, Complete, Release, Suspend or
	// Yield.
	Lease Lease
	// Progress is, for Resumed with ProgressKnown, what the previous owner recorded when it
	// suspended the command.
	Progress Progress
	// ProgressKnown is, for Resumed, true when the previous owner suspended the command and
	// recorded its exact progress; false when it stopped without recording (a crash, a lost
	// lease): the caller must then find the command's write-ahead journal entry itself and,
	// when one exists, assume the write may have been sent.
	ProgressKnown bool
	// Resource is, for Resumed, the resource id the previous owner's claim recorded
	// ([ClaimRequest.Resource]; "" when it recorded none).
	Resource string
	// Marked is, for Resumed, true when the previous owner marked its first Proxmox write
	// before sending it ([Store.Dispatching]): a record without the mark (ProgressKnown false)
	// then certainly sent no write, though it may have written its journal entry. False for a
	// record of an owner that does not mark (an older version), where a write may have left.
	Marked bool
	// BusyGuard is, for GuardBusy, which guard is held elsewhere: GuardResource or GuardSlot.
	BusyGuard string
	// BusyKey is, for GuardBusy, the name of that guard: the name [Store.WatchFreed] reports
	// when the guard is given back.
	BusyKey string
	// Result is the stored result for Done and IdemReplay.
	Result []byte
	// OriginalCommand is, for IdemReplay, IdemInFlight and IdemReused, the command owning the
	// Idempotency-Key (zero when not known).
	OriginalCommand CommandKey
}

// Lease is a held claim on a command. Token is the fencing token: every change checks it, so
// an owner that was taken over can never overwrite the newer owner's record.
type Lease struct {
	Command CommandKey
	Idem    *IdemScope
	Owner   string
	Token   int64
	// Guards are the guards the claim took (the resource lease carries Token as its fencing
	// token); Renew renews them and Complete, Release and Suspend give them back.
	Guards Guards
}

// Claim decides, in one atomic step over both idempotency layers and the guards, whether the
// caller may execute req.Command (see [ClaimState] for the outcomes, checked in this order:
// identity done, identity busy, Idempotency-Key owned by another command, guards held
// elsewhere, then claim). A claim sets the identity record running with a lease of LeaseTTL and
// a new fencing token, the Idempotency-Key record running for this command, and takes the
// guards asked for (the resource lease with the same token and deadline, the endpoint slot with
// the same deadline). An Idempotency-Key record of another command whose lease expired counts
// as absent and is taken over only when that command had certainly not begun (it suspended
// before its journal entry); one that stopped without suspending may have begun, and one that
// suspended after its journal entry has: the key stays IdemInFlight until the command's own
// redelivery resumes and finishes it.
// Errors are ErrInvalid (no owner, source or id; an invalid guard), ErrNotReplicated (a claim
// too few replicas acknowledged: it is given back, nothing may be done on it) or wrapped Redis
// errors.
func (s *Store) Claim(ctx context.Context, req ClaimRequest) (Claim, error) {
	if req.Owner == "" || req.Command.Source == "" || req.Command.ID == "" {
		return Claim{}, fmt.Errorf("%w: claim needs an owner, a source and an id", ErrInvalid)
	}
	if err := req.Guards.validate(); err != nil {
		return Claim{}, fmt.Errorf("store: claim: %w", err)
	}
	keys, idx := s.optionalKeys([]string{s.cmdKey(req.Command), s.fenceKey()}, req.Idem, req.Guards)
	slotMax := 0
	if req.Guards.Slot != nil {
		slotMax = req.Guards.Slot.Max
	}
	cmd, notReplicated := s.replicated(ctx, s.scripts.claim, keys,
		s.nowMillis(), millis(s.opts.LeaseTTL), millis(s.opts.DedupeTTL),
		req.Owner, req.Fingerprint, req.Command.Hash(), req.Command.Source, req.Command.ID,
		idx[0], idx[1], idx[2], slotMax, millis(s.lockKeyTTL()), req.Verb, req.Resource,
	)
	raw, err := cmd.StringSlice()
	if err != nil {
		return Claim{}, fmt.Errorf("store: claim: %w", err)
	}
	if len(raw) != 14 {
		return Claim{}, fmt.Errorf("store: claim: unexpected script answer of %d fields", len(raw))
	}
	state, ok := claimStates[raw[0]]
	if !ok {
		return Claim{}, fmt.Errorf("store: claim: unexpected script state %q", raw[0])
	}
	out := Claim{State: state}
	switch state {
	case Claimed, Resumed:
		token, err := strconv.ParseInt(raw[1], 10, 64)
		if err != nil {
			return Claim{}, fmt.Errorf("store: claim: fencing token: %w", err)
		}
		out.Lease = Lease{Command: req.Command, Idem: req.Idem, Owner: req.Owner, Token: token, Guards: req.Guards}
		out.Marked = state == Resumed && raw[10] == "1"
		if state == Resumed {
			out.Resource = raw[13]
		}
		if state == Resumed && raw[8] == "1" {
			out.ProgressKnown = true
			out.Progress.JournalURL = raw[3]
			out.Progress.Dispatched = raw[4] == "1"
			if raw[2] != "" {
				if out.Progress.JournalID, err = strconv.ParseInt(raw[2], 10, 64); err != nil {
					return Claim{}, fmt.Errorf("store: claim: journal id: %w", err)
				}
			}
			if ms, err := strconv.ParseInt(raw[11], 10, 64); err == nil && ms > 0 {
				out.Progress.DispatchedAt = time.UnixMilli(ms).UTC()
			}
			if raw[12] != "" {
				out.Progress.Sent = strings.Split(raw[12], ",")
			}
		}
	case Done, IdemReplay:
		out.Result = []byte(raw[5])
	case GuardBusy:
		out.BusyGuard = raw[9]
		if out.BusyGuard == GuardSlot {
			out.BusyKey = s.slotsKey(req.Guards.Slot.EndpointID)
		} else {
			out.BusyKey = s.lockKey(*req.Guards.Resource)
		}
	}
	if state == IdemReplay || state == IdemInFlight || state == IdemReused {
		out.OriginalCommand = CommandKey{Source: raw[6], ID: raw[7]}
	}
	if notReplicated != nil { // the replicas are away: act on nothing this primary says alone
		if state == Claimed || state == Resumed {
			s.giveBack(ctx, out)
		}
		return Claim{}, fmt.Errorf("store: claim: %w", notReplicated)
	}
	return out, nil
}

// giveBack undoes, as far as it can, a claim that too few replicas acknowledged, so that the
// command's redelivery claims it afresh instead of waiting for the lease to expire: a new
// claim is released, a resumed one suspended again with the progress it had (or yielded when
// that was unknown). Its own failure changes nothing: the lease then expires.
func (s *Store) giveBack(ctx context.Context, c Claim) {
	switch {
	case c.State == Claimed:
		_ = s.Release(ctx, c.Lease)
	case c.ProgressKnown:
		_ = s.Suspend(ctx, c.Lease, c.Progress)
	default:
		_ = s.Yield(ctx, c.Lease)
	}
}

// validate reports ErrInvalid for a resource key without kind or id, or a slot with Max < 1.
func (g Guards) validate() error {
	if g.Resource != nil {
		if err := g.Resource.validate(); err != nil {
			return err
		}
	}
	if g.Slot != nil && g.Slot.Max < 1 {
		return fmt.Errorf("slot max %d: %w", g.Slot.Max, ErrInvalid)
	}
	return nil
}

// optionalKeys appends the keys of idem and g that are set to keys and returns them with the
// 1-based Lua index of each (idem, lock, slots), 0 when absent.
func (s *Store) optionalKeys(keys []string, idem *IdemScope, g Guards) ([]string, [3]int) {
	var idx [3]int
	if idem != nil {
		keys = append(keys, s.idemKey(*idem))
		idx[0] = len(keys)
	}
	if g.Resource != nil {
		keys = append(keys, s.lockKey(*g.Resource))
		idx[1] = len(keys)
	}
	if g.Slot != nil {
		keys = append(keys, s.slotsKey(g.Slot.EndpointID))
		idx[2] = len(keys)
	}
	return keys, idx
}
