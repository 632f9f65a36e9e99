package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/store"
)

// record is what the store keeps for a finished command: its result, and the verb's real
// outcome before a journal failure turned the status into 502 (restored once repaired).
type record struct {
	Result     events.Result    `json:"result"`
	Owner      store.CommandKey `json:"owner"`
	RealStatus int              `json:"real_status"`
	RealReason string           `json:"real_reason,omitempty"`
	// Seq is the commands-stream sequence of the message whose delivery stored the outcome: a
	// redelivery of that message after its result was published (a lost ack) publishes
	// nothing more.
	Seq uint64 `json:"seq,omitempty"`
}

// result builds the result event payload for an outcome (contract §3), secrets scrubbed.
func (r *run) result(out Outcome, journal journalState) events.Result {
	res := events.Result{
		CommandID:       r.cmd.ID,
		CommandSource:   r.cmd.Source,
		Verb:            r.cmd.Verb,
		Status:          out.Status,
		Result:          out.Result,
		Reason:          out.Reason,
		Detail:          r.scrub(out.Detail),
		Fields:          out.Fields,
		ProxmoxStatus:   out.ProxmoxStatus,
		JournalEntryURL: journal.url,
		IdempotencyKey:  r.cmd.IdempotencyKey,
	}
	if r.cmd.HasEndpointID {
		id := r.cmd.EndpointID
		res.EndpointID = &id
	}
	if out.Output != nil {
		if raw, err := json.Marshal(out.Output); err == nil {
			res.Output = []byte(r.scrub(string(raw)))
		}
	}
	if journal.url != "" {
		res.JournalFinalized = new(journal.finalized)
	}
	if journal.url != "" && !journal.finalized {
		res.Status = 502
		res.Reason = ReasonJournalFinalization
	}
	return res
}

// record returns the stored form of an outcome, and the result it holds.
func (r *run) record(out Outcome, journal journalState) ([]byte, events.Result, error) {
	res := r.result(out, journal)
	raw, err := json.Marshal(record{Result: res, Owner: r.key(), RealStatus: out.Status, RealReason: out.Reason, Seq: r.delivery.StreamSeq})
	return raw, res, err
}

// answer publishes the result of an outcome that is not stored and says Ack; when the result
// cannot be published the command waits (it is acked only after its result).
func (r *run) answer(ctx context.Context, out Outcome, journal journalState) move {
	return r.publishResult(ctx, r.result(out, journal))
}

// publishResult publishes res and answers Ack once the stream has stored it. A publication
// that fails (the stream unreachable, a leader election) is tried again a few times; then the
// command waits and its next delivery publishes the stored result, first-hand while the
// events stream does not hold it.
func (r *run) publishResult(ctx context.Context, res events.Result) move {
	m := move{on: EventAnswered, to: stateOfResult(res), disp: events.Disposition{Action: events.Ack}}
	for i := range publishTries {
		if i > 0 {
			r.p.sleep(publishPause << (i - 1))
		}
		r.reach(crashBeforePublish, "result")
		err := r.p.cfg.Publisher.Publish(ctx, r.origin, res)
		if err == nil {
			r.reach(crashAfterPublish, "result")
			return m
		}
		if errors.Is(err, events.ErrEncode) {
			r.log.Error("result not encodable", "err", err)
			return r.failed(ctx, "encode", fmt.Errorf("%w: %w", errInternal, err))
		}
		r.log.Warn("result not published", "try", i+1, "err", err)
	}
	m.disp = r.redeliver(r.waitDelay()).disp // the next delivery publishes it
	return m
}

// publishTries and publishPause bound how long a result's publication is retried within one
// delivery (0.25 + 0.5 + 1 + 2 s between four tries after the first).
const (
	publishTries = 5
	publishPause = 250 * time.Millisecond
)

// replay answers a command whose outcome is stored. The command's own outcome is published
// first-hand (replayed: false) while the events stream holds no result of it — its first
// publication was not confirmed — and, once it does, as a replay (replayed: true) to a
// duplicate of the command; a redelivery of the very message that stored it is only acked
// (its result is in the stream). An outcome stored from an Idempotency-Key twin is always a
// replay (contract §5). When the stored outcome's journal update is still pending, the replay
// repairs it first, without another Proxmox write (contract §6).
func (r *run) replay(ctx context.Context, raw []byte) move {
	var rec record
	if err := json.Unmarshal(raw, &rec); err != nil {
		r.log.Error("stored result unreadable", "err", err)
		return r.failed(ctx, "replay", fmt.Errorf("%w: stored result unreadable: %w", errInternal, err))
	}
	if rec.Result.JournalPending() {
		rec = r.repairByReplay(context.WithoutCancel(ctx), rec)
	}
	replayed := true
	if rec.Owner == r.key() {
		published, err := r.p.cfg.History.HasResult(ctx, r.cmd.Ref())
		if err != nil {
			r.log.Warn("events stream: the command's result cannot be looked up; waiting", "err", err)
			return r.redeliver(r.waitDelay())
		}
		if published && rec.Seq != 0 && rec.Seq == r.delivery.StreamSeq {
			r.log.Info("redelivered after its result was published: acked without another result")
			return move{on: EventAnswered, to: stateOfResult(rec.Result), disp: events.Disposition{Action: events.Ack}}
		}
		replayed = published
	}
	res := rec.Result
	res.CommandID, res.CommandSource, res.Verb = r.cmd.ID, r.cmd.Source, r.cmd.Verb
	res.IdempotencyKey = r.cmd.IdempotencyKey
	res.Replayed = replayed
	if replayed {
		r.log.Info("replaying stored result", "status", res.Status, "result", res.Result)
	} else {
		r.log.Info("publishing the stored result first-hand: the events stream holds no result of it yet (not published, or not confirmed)", "status", res.Status, "result", res.Result)
	}
	return r.publishResult(ctx, res)
}

// repairByReplay applies a pending terminal journal update during a replay (contract §6) and
// returns the record as it stands afterwards.
func (r *run) repairByReplay(ctx context.Context, rec record) record {
	rep, err := r.p.cfg.Store.Repair(ctx, rec.Owner)
	if errors.Is(err, store.ErrNotFound) {
		// Repaired meanwhile by the repairer: the stored record is fresher than ours.
		if fresh, ok := r.p.storedRecord(ctx, rec.Owner); ok {
			return fresh
		}
		return rec
	}
	if err != nil {
		r.log.Warn("store: pending repair unreadable", "err", err)
		return rec
	}
	repaired, err := r.p.repairJournal(ctx, rep, "replay", r.cmd.TraceParent)
	if err != nil {
		r.log.Warn("journal: repair by replay failed; still pending", "err", err)
		return rec
	}
	r.log.Info("journal entry repaired by replay", "journal_entry_url", rep.JournalURL)
	return repaired
}
