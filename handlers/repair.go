package handlers

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/store"
)

// repairJournal applies a pending terminal journal update (contract §6). When NetBox accepts
// it, the stored result regains the verb's real status, the repair record is removed and the
// journal event is published; the returned record is the repaired one. An error means the
// update is still pending.
func (p *Pipeline) repairJournal(ctx context.Context, rep store.Repair, by, traceParent string) (record, error) {
	if err := p.cfg.Journal.UpdateJournalEntry(ctx, rep.JournalID, kindOf(rep.Kind), rep.Comments); err != nil {
		return record{}, fmt.Errorf("journal update: %w", err)
	}
	rec, ok := p.storedRecord(ctx, rep.Command)
	if ok {
		rec.Result.JournalFinalized = new(true)
		rec.Result.Status, rec.Result.Reason = rec.RealStatus, rec.RealReason
		if raw, err := json.Marshal(rec); err == nil {
			if err := p.cfg.Store.UpdateResult(ctx, rep.Command, raw); err != nil {
				p.cfg.Logger.Warn("store: repaired result not recorded", "command_id", rep.Command.ID, "err", err)
			}
		}
	}
	if err := p.cfg.Store.DeleteRepair(ctx, rep.Command); err != nil {
		p.cfg.Logger.Warn("store: repair record not removed", "command_id", rep.Command.ID, "err", err)
	}
	origin := events.Origin{ID: rep.Command.ID, Source: rep.Command.Source, Verb: rep.Verb, TraceParent: traceParent}
	if err := p.cfg.Publisher.Publish(ctx, origin, events.JournalRepaired{JournalEntryURL: rep.JournalURL, RepairedBy: by}); err != nil {
		p.cfg.Logger.Warn("journal event not published", "command_id", rep.Command.ID, "err", err)
	}
	return rec, nil
}

func (p *Pipeline) storedRecord(ctx context.Context, owner store.CommandKey) (record, bool) {
	raw, err := p.cfg.Store.Result(ctx, owner)
	if err != nil {
		return record{}, false
	}
	var rec record
	if err := json.Unmarshal(raw, &rec); err != nil {
		return record{}, false
	}
	return rec, true
}

// ApplyRepair applies a pending terminal journal update found by the repairer (package
// repair): it returns an error while NetBox still refuses it.
func (p *Pipeline) ApplyRepair(ctx context.Context, rep store.Repair) error {
	_, err := p.repairJournal(ctx, rep, "repairer", "")
	return err
}
