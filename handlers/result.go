package handlers

import (
	"context"
	"encoding/json"
	"errors"

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
}

// result builds the result event payload for an outcome (contract §3), secrets scrubbed.
func (r *run) result(out Outcome, journal journalState) events.Result {
	res := events.Result{
		CommandID:        r.cmd.ID,
		CommandSource:    r.cmd.Source,
		Verb:             r.cmd.Verb,
		Status:           out.Status,
		Result:           out.Result,
		Reason:           out.Reason,
		Detail:           r.scrub(out.Detail),
		Fields:           out.Fields,
		ProxmoxStatus:    out.ProxmoxStatus,
		JournalEntryURL:  journal.url,
		JournalFinalized: journal.finalized,
		IdempotencyKey:   r.cmd.IdempotencyKey,
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
	if journal.url != "" && !journal.finalized {
		res.Status = 502
		res.Reason = ReasonJournalFinalization
	}
	return res
}

// answer publishes the result of an outcome that is not stored and says Done; when the result
// cannot be published the message is redelivered instead (it is acked only after its result).
func (r *run) answer(ctx context.Context, out Outcome, journal journalState) Decision {
	if err := r.publish(ctx, r.result(out, journal)); err != nil {
		return r.retry(ctx, 0, "publish", err.Error())
	}
	return Decision{Action: Done}
}

func (r *run) publish(ctx context.Context, res events.Result) error {
	res, msg, err := r.p.cfg.Emitter.Result(r.origin, res)
	if err != nil {
		r.log.Error("result not encodable", "err", err)
		return err
	}
	if err := r.p.cfg.Publisher.PublishEvent(ctx, msg, res); err != nil {
		r.log.Warn("result not published", "err", err)
		return err
	}
	return nil
}

// replay republishes a stored outcome for this command with replayed: true (contract §5). When
// the stored outcome's journal update is still pending, the replay repairs it first, without
// another Proxmox write (contract §6).
func (r *run) replay(ctx context.Context, raw []byte) Decision {
	var rec record
	if err := json.Unmarshal(raw, &rec); err != nil {
		r.log.Error("stored result unreadable", "err", err)
		return r.retry(ctx, 0, "replay", err.Error())
	}
	if !rec.Result.JournalFinalized && rec.Result.JournalEntryURL != "" {
		rec = r.repairByReplay(context.WithoutCancel(ctx), rec)
	}
	res := rec.Result
	res.CommandID, res.CommandSource, res.Verb = r.cmd.ID, r.cmd.Source, r.cmd.Verb
	res.IdempotencyKey = r.cmd.IdempotencyKey
	res.Replayed = true
	r.log.Info("replaying stored result", "status", res.Status, "result", res.Result)
	if err := r.publish(ctx, res); err != nil {
		return r.retry(ctx, 0, "publish", err.Error())
	}
	return Decision{Action: Done}
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
