package store

import (
	"context"
	"fmt"
	"strconv"
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
	default:
		return "ClaimState(" + strconv.Itoa(int(c)) + ")"
	}
}

// claimStates maps the scripts' state words to ClaimState.
var claimStates = map[string]ClaimState{
	"claimed": Claimed, "resumed": Resumed, "busy": Busy, "done": Done,
	"idem_replay": IdemReplay, "idem_inflight": IdemInFlight, "idem_reused": IdemReused,
}

// Progress is what an owner has recorded about a running command, so that a later owner
// never repeats a write.
type Progress struct {
	JournalID  int64  `json:"journal_id,omitempty"`
	JournalURL string `json:"journal_url,omitempty"`
	Dispatched bool   `json:"dispatched,omitempty"` // a Proxmox write may have been sent
}

// ClaimRequest asks to execute one command.
type ClaimRequest struct {
	Command CommandKey
	// Idem is the Idempotency-Key scope; nil when the command has no Idempotency-Key.
	Idem *IdemScope
	// Fingerprint is the hash of the canonical, secret-free request data.
	Fingerprint string
	// Owner is unique per attempt (instance id + random).
	Owner string
}

// Claim is the answer of [Store.Claim].
type Claim struct {
	State ClaimState
	// Lease is valid for Claimed and Resumed: pass it to Checkpoint, Renew, Complete, Release.
	Lease Lease
	// Progress is, for Resumed, what the previous owner recorded.
	Progress Progress
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
}

// Claim decides, in one atomic step over both idempotency layers, whether the caller may
// execute req.Command (see [ClaimState] for the outcomes, checked in this order: identity
// done, identity busy, Idempotency-Key owned by another command, then claim). A claim sets the
// identity record running with a lease of LeaseTTL and a new fencing token, and the
// Idempotency-Key record running for this command. An Idempotency-Key record of another
// command whose lease expired counts as absent and is taken over only when that command had
// not begun (no journal entry, no dispatch marker); otherwise it stays IdemInFlight until the
// command's own redelivery resumes and finishes it.
// Errors are ErrInvalid (no owner, source or id) or wrapped Redis errors.
func (s *Store) Claim(ctx context.Context, req ClaimRequest) (Claim, error) {
	if req.Owner == "" || req.Command.Source == "" || req.Command.ID == "" {
		return Claim{}, fmt.Errorf("%w: claim needs an owner, a source and an id", ErrInvalid)
	}
	keys := []string{s.cmdKey(req.Command), s.fenceKey()}
	if req.Idem != nil {
		keys = append(keys, s.idemKey(*req.Idem))
	}
	raw, err := s.scripts.claim.Run(ctx, s.rdb, keys,
		s.nowMillis(), millis(s.opts.LeaseTTL), millis(s.opts.DedupeTTL),
		req.Owner, req.Fingerprint, req.Command.Hash(), req.Command.Source, req.Command.ID,
	).StringSlice()
	if err != nil {
		return Claim{}, fmt.Errorf("store: claim: %w", err)
	}
	if len(raw) != 8 {
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
		out.Lease = Lease{Command: req.Command, Idem: req.Idem, Owner: req.Owner, Token: token}
		if state == Resumed {
			out.Progress.JournalURL = raw[3]
			out.Progress.Dispatched = raw[4] == "1"
			if raw[2] != "" {
				if out.Progress.JournalID, err = strconv.ParseInt(raw[2], 10, 64); err != nil {
					return Claim{}, fmt.Errorf("store: claim: journal id: %w", err)
				}
			}
		}
	case Done, IdemReplay:
		out.Result = []byte(raw[5])
	}
	if state == IdemReplay || state == IdemInFlight || state == IdemReused {
		out.OriginalCommand = CommandKey{Source: raw[6], ID: raw[7]}
	}
	return out, nil
}
