package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// leaseKeys returns the identity key, then the keys of l's Idempotency-Key and guards that
// are set, with the Lua index of each (idem, lock, slots; 0 when absent).
func (s *Store) leaseKeys(l Lease) ([]string, [3]int) {
	return s.optionalKeys([]string{s.cmdKey(l.Command)}, l.Idem, l.Guards)
}

// owned turns the answer of a lease script (1 done, 0 lease lost) into an error for op.
func owned(op string) func(int64, error) error {
	return func(n int64, err error) error {
		if err != nil {
			return fmt.Errorf("store: %s: %w", op, err)
		}
		if n == 0 {
			return fmt.Errorf("store: %s: %w", op, ErrLeaseLost)
		}
		return nil
	}
}

// Suspend ends l's lease at once, gives its guards back and keeps the running record with
// exactly progress p, marked suspended (p replaces what an earlier owner recorded, so
// Dispatched may go back to false, and a write drop out of Sent, when the caller knows it never
// left: a mark that reported an error may still have been applied). The next Claim
// of the command, by any owner, is Resumed with p and ProgressKnown, so a redelivery reuses
// the journal entry instead of writing a second one. Use it for a transient failure after the write-ahead entry. The
// Idempotency-Key record keeps its own TTL, so a twin still waits.
// It returns ErrLeaseLost when l's owner and token no longer hold the running record.
func (s *Store) Suspend(ctx context.Context, l Lease, p Progress) error {
	dispatched := "0"
	if p.Dispatched {
		dispatched = "1"
	}
	keys, idx := s.leaseKeys(l)
	return owned("suspend")(s.write(ctx, s.scripts.suspend, keys,
		l.Owner, l.Token, strconv.FormatInt(p.JournalID, 10), p.JournalURL, dispatched,
		idx[0], idx[1], idx[2], "0", strings.Join(p.Sent, ","), s.nowMillis()).Int64())
}

// Dispatching marks, on l's running record, that the Proxmox write named step is about to
// leave, with the journal entry of p and, for the first, the time: from then on every later
// owner knows it may have been sent (Claim: Resumed with ProgressKnown, Dispatched and
// Progress.Sent), and that a write without its mark was not (Claim.Marked). Call it before
// sending each write, and send nothing when it fails. It returns ErrLeaseLost when l's owner
// and token no longer hold the record.
func (s *Store) Dispatching(ctx context.Context, l Lease, p Progress, step string) error {
	return owned("dispatching")(s.write(ctx, s.scripts.dispatching, []string{s.cmdKey(l.Command)},
		l.Owner, l.Token, strconv.FormatInt(p.JournalID, 10), p.JournalURL, s.nowMillis(), step).Int64())
}

// Yield ends l's lease at once and gives its guards back without recording anything: the
// next Claim of the command is Resumed without known progress, exactly as after a crash. Use
// it when the caller cannot tell what an earlier owner did (the journal could not be searched)
// and must let a redelivery find out. It returns ErrLeaseLost when l's owner and token no
// longer hold the running record.
func (s *Store) Yield(ctx context.Context, l Lease) error {
	keys, idx := s.leaseKeys(l)
	return owned("yield")(s.write(ctx, s.scripts.suspend, keys,
		l.Owner, l.Token, "", "", "", idx[0], idx[1], idx[2], "1", "", s.nowMillis()).Int64())
}

// Renew extends, in one atomic step, l's lease to now+LeaseTTL, the identity record's TTL to
// DedupeTTL, the Idempotency-Key record's lease (re-creating that record if it expired
// meanwhile; a record another command took over is left alone) and l's guards to the same
// deadline (a resource lease that expired away is taken again). It returns ErrLeaseLost when
// l's owner and token no longer hold the running record (nothing renewed), and ErrGuardLost
// when the claim was renewed but a guard is now held by another command or its slot was
// dropped.
func (s *Store) Renew(ctx context.Context, l Lease) error {
	keys, idx := s.leaseKeys(l)
	n, err := s.write(ctx, s.scripts.renew, keys,
		l.Owner, l.Token, s.nowMillis(), millis(s.opts.LeaseTTL), millis(s.opts.DedupeTTL),
		l.Command.Hash(), idx[0], idx[1], idx[2], millis(s.lockKeyTTL())).Int64()
	if n == 2 && err == nil {
		return fmt.Errorf("store: renew: %w", ErrGuardLost)
	}
	return owned("renew")(n, err)
}

// Complete stores result and marks the command done (kept DedupeTTL), and its
// Idempotency-Key record done with the same result (kept Window) unless another command has
// taken that record over, and gives l's guards back, all in one atomic step. A repeated
// Complete with the same lease succeeds again (replacing the result). It returns ErrLeaseLost
// when another owner holds the record (its guards are still given back while l holds them).
func (s *Store) Complete(ctx context.Context, l Lease, result []byte) error {
	keys, idx := s.leaseKeys(l)
	return owned("complete")(s.write(ctx, s.scripts.complete, keys,
		l.Owner, l.Token, result, millis(s.opts.DedupeTTL), millis(s.opts.Window),
		l.Command.Hash(), idx[0], idx[1], idx[2], s.nowMillis()).Int64())
}

// CompleteReplay records the replayed result for a command that got IdemReplay (no lease was
// taken): identity → done with result, kept DedupeTTL, when the identity record is absent or
// running under an expired lease. When the command is already done its stored result is kept
// and nil returned; when a live lease holds it, ErrLeaseLost.
func (s *Store) CompleteReplay(ctx context.Context, c CommandKey, result []byte) error {
	return owned("complete replay")(s.write(ctx, s.scripts.completeReplay, []string{s.cmdKey(c)},
		s.nowMillis(), result, millis(s.opts.DedupeTTL), c.Source, c.ID).Int64())
}

// Release deletes the running claim held by l (its identity record, and its Idempotency-Key
// record while that still belongs to this claim) and gives its guards back, so a redelivery
// starts fresh. Use it only when nothing was written. A record already gone is not an error;
// a record another owner holds, or a done record, is left alone and ErrLeaseLost returned.
func (s *Store) Release(ctx context.Context, l Lease) error {
	keys, idx := s.leaseKeys(l)
	return owned("release")(s.write(ctx, s.scripts.release, keys,
		l.Owner, l.Token, l.Command.Hash(), idx[0], idx[1], idx[2]).Int64())
}

// Result returns the stored result of a finished command, or ErrNotFound when the command is
// unknown or still running.
func (s *Store) Result(ctx context.Context, c CommandKey) ([]byte, error) {
	vals, err := s.rdb.HMGet(ctx, s.cmdKey(c), "state", "result").Result()
	if err != nil {
		return nil, fmt.Errorf("store: result: %w", err)
	}
	if st, _ := vals[0].(string); st != "done" {
		return nil, fmt.Errorf("store: result: %w", ErrNotFound)
	}
	res, _ := vals[1].(string)
	return []byte(res), nil
}

// RecordState is what [Store.Record] found of a command.
type RecordState int

// The states of a command's identity record.
const (
	// Absent: no record; the command never claimed, or it was released (nothing was written).
	Absent RecordState = iota
	// Running: a record is held, live or left by an owner that stopped: the command may have
	// begun its work and is resumed by its next claim.
	Running
	// Finished: the command is done; its stored result comes with it.
	Finished
)

// Record reads the state of command c's identity record and, when Finished, its stored result.
func (s *Store) Record(ctx context.Context, c CommandKey) (RecordState, []byte, error) {
	vals, err := s.rdb.HMGet(ctx, s.cmdKey(c), "state", "result").Result()
	if err != nil {
		return Absent, nil, fmt.Errorf("store: record: %w", err)
	}
	switch st, _ := vals[0].(string); st {
	case "done":
		res, _ := vals[1].(string)
		return Finished, []byte(res), nil
	case "running":
		return Running, nil, nil
	}
	return Absent, nil, nil
}

// FinishUnstarted records result as the outcome of command c when c has no record, that is
// when it never started: the outcome of a command answered without being run (expired,
// cancelled), kept DedupeTTL so that every later delivery of c is answered from it. It returns
// Absent when it stored result; Finished and the stored result when c was already done; Running
// when c has begun, in which case nothing changes: a started command is finished, not
// abandoned. A stored outcome is reported by [Store.WatchFreed] as [Store.WatchName] of c, so
// that a delivery of c waiting for a guard answers it at once.
func (s *Store) FinishUnstarted(ctx context.Context, c CommandKey, result []byte) (RecordState, []byte, error) {
	vals, err := s.write(ctx, s.scripts.finishUnstarted, []string{s.cmdKey(c)},
		result, millis(s.opts.DedupeTTL), c.Source, c.ID, s.nowMillis()).StringSlice()
	if err != nil {
		return Absent, nil, fmt.Errorf("store: finish unstarted: %w", err)
	}
	switch vals[0] {
	case "done":
		return Finished, []byte(vals[1]), nil
	case "running":
		return Running, nil, nil
	}
	return Absent, nil, nil
}

// UpdateResult replaces the stored result of a done command, and of its Idempotency-Key
// record while that record is done and still belongs to it, so later replays report the
// repaired state. TTLs are unchanged. ErrNotFound when the command is not done.
func (s *Store) UpdateResult(ctx context.Context, c CommandKey, result []byte) error {
	n, err := s.write(ctx, s.scripts.updateResult, []string{s.cmdKey(c)}, result, c.Hash()).Int64()
	if err != nil {
		return fmt.Errorf("store: update result: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("store: update result: %w", ErrNotFound)
	}
	return nil
}

// Inspection is what [Store.Inspect] shows of a command's identity record.
type Inspection struct {
	// State is Absent, Running or Finished.
	State RecordState
	// Owner and LeaseUntil are, for Running, the owner holding (or last holding) the command and
	// when its lease ends (in the past: the owner stopped and the next delivery resumes it).
	Owner      string
	LeaseUntil time.Time
	// Progress is what the record holds of the command's journal entry and its marked writes.
	Progress Progress
	// Suspended is true when the owner gave the command back with its progress (a wait).
	Suspended bool
	// Result is, for Finished, the stored result.
	Result []byte
	// Verb is the command's verb as its claim recorded it ("" when unknown).
	Verb string
	// Cancel is, for Running, the cancel request recorded on it (nil when none).
	Cancel *CancelRequest
	// Phase is where the record's last move left the command: "running", "confirming" (a write
	// may have left), "waiting" (given back before any write) or "ended"; "" for a record
	// written before phases were kept.
	Phase string
	// History is the record's newest phases, oldest first (at most 16).
	History []PhaseVisit
}

// PhaseVisit is one entry of a record's history: a phase and when the record entered it.
type PhaseVisit struct {
	Phase string    `json:"phase"`
	At    time.Time `json:"at"`
}

// parseHistory reads a record's history field ("phase@ms phase@ms ").
func parseHistory(h string) []PhaseVisit {
	var out []PhaseVisit
	for _, e := range strings.Fields(h) {
		phase, ms, ok := strings.Cut(e, "@")
		n, err := strconv.ParseInt(ms, 10, 64)
		if !ok || err != nil {
			continue
		}
		out = append(out, PhaseVisit{Phase: phase, At: time.UnixMilli(n).UTC()})
	}
	return out
}

// Inspect reads command c's identity record for display (proxbus status); it changes nothing.
func (s *Store) Inspect(ctx context.Context, c CommandKey) (Inspection, error) {
	vals, err := s.rdb.HMGet(ctx, s.cmdKey(c), "state", "owner", "lease", "journal_id", "journal_url", "dispatched",
		"dispatched_at", "sent", "suspended", "result", "verb", "cancel_by", "cancel_reason", "phase", "history").Result()
	if err != nil {
		return Inspection{}, fmt.Errorf("store: inspect: %w", err)
	}
	str := func(i int) string { v, _ := vals[i].(string); return v }
	in := Inspection{Phase: str(13), History: parseHistory(str(14))}
	switch str(0) {
	case "done":
		in.State, in.Result = Finished, []byte(str(9))
		return in, nil
	case "running":
		in.State = Running
	default:
		return in, nil
	}
	in.Owner, in.Suspended, in.Verb = str(1), str(8) == "1", str(10)
	if by := str(11); by != "" {
		in.Cancel = &CancelRequest{By: by, Reason: str(12)}
	}
	if ms, err := strconv.ParseInt(str(2), 10, 64); err == nil && ms > 0 {
		in.LeaseUntil = time.UnixMilli(ms).UTC()
	}
	in.Progress.JournalID, _ = strconv.ParseInt(str(3), 10, 64)
	in.Progress.JournalURL, in.Progress.Dispatched = str(4), str(5) == "1"
	if ms, err := strconv.ParseInt(str(6), 10, 64); err == nil && ms > 0 {
		in.Progress.DispatchedAt = time.UnixMilli(ms).UTC()
	}
	if sent := str(7); sent != "" {
		in.Progress.Sent = strings.Split(sent, ",")
	}
	return in, nil
}

// CancelRequest is a request to cancel a command that has started ([Store.RequestCancel]).
type CancelRequest struct {
	By, Reason string
	At         time.Time
}

// RequestCancel asks whoever runs command c to cancel it (contract §4 "Cancel"): it records
// req on c's running record and announces it ([Store.WatchFreed] reports [Store.WatchName] of
// c). It returns the verb the record names ("" when unknown), and an error wrapping
// ErrNotFound when c is not running (never started, or finished).
func (s *Store) RequestCancel(ctx context.Context, c CommandKey, req CancelRequest) (string, error) {
	if req.At.IsZero() {
		req.At = s.opts.Now()
	}
	vals, err := s.write(ctx, s.scripts.requestCancel, []string{s.cmdKey(c)}, req.By, req.Reason, req.At.UnixMilli()).StringSlice()
	if err != nil {
		return "", fmt.Errorf("store: request cancel: %w", err)
	}
	if vals[0] != "running" {
		return "", fmt.Errorf("store: request cancel: %s: %w", vals[0], ErrNotFound)
	}
	return vals[1], nil
}

// CancelRequested returns the cancel request recorded on command c's running record, and
// false when there is none.
func (s *Store) CancelRequested(ctx context.Context, c CommandKey) (CancelRequest, bool, error) {
	vals, err := s.rdb.HMGet(ctx, s.cmdKey(c), "state", "cancel_by", "cancel_reason", "cancel_at").Result()
	if err != nil {
		return CancelRequest{}, false, fmt.Errorf("store: cancel requested: %w", err)
	}
	by, _ := vals[1].(string)
	if st, _ := vals[0].(string); st != "running" || by == "" {
		return CancelRequest{}, false, nil
	}
	req := CancelRequest{By: by}
	req.Reason, _ = vals[2].(string)
	if at, _ := vals[3].(string); at != "" {
		if ms, err := strconv.ParseInt(at, 10, 64); err == nil {
			req.At = time.UnixMilli(ms).UTC()
		}
	}
	return req, true, nil
}
