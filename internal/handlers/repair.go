package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/store"
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
		rec.Result.JournalFinalized = true
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

// RepairerConfig tunes [Pipeline.RunRepairer].
type RepairerConfig struct {
	// Interval between scans for due repairs (default 2s).
	Interval time.Duration
	// Lease is how long one replica holds a repair while applying it (default 30s).
	Lease time.Duration
	// BaseBackoff and MaxBackoff bound the capped exponential retry delay (defaults 2s, 5m).
	BaseBackoff, MaxBackoff time.Duration
}

// RunRepairer retries pending terminal journal updates until ctx is cancelled: each due repair
// is claimed by one replica, applied, and rescheduled with capped exponential backoff when
// NetBox still refuses. It returns nil when ctx ends.
func (p *Pipeline) RunRepairer(ctx context.Context, cfg RepairerConfig) error {
	if cfg.Interval <= 0 {
		cfg.Interval = 2 * time.Second
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.BaseBackoff <= 0 {
		cfg.BaseBackoff = 2 * time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 5 * time.Minute
	}
	log := p.cfg.Logger.With("component", "repairer")
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	for {
		for p.repairOne(ctx, cfg, log) {
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// repairOne handles one due repair; it reports whether there may be more.
func (p *Pipeline) repairOne(ctx context.Context, cfg RepairerConfig, log *slog.Logger) bool {
	if ctx.Err() != nil {
		return false
	}
	rep, ok, err := p.cfg.Store.ClaimDueRepair(ctx, cfg.Lease)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			log.Warn("store: due repairs unreadable", "err", err)
		}
		return false
	}
	if !ok {
		return false
	}
	if _, err := p.repairJournal(ctx, rep, "repairer", ""); err != nil {
		delay := cfg.BaseBackoff << min(rep.Attempts, 20)
		if delay > cfg.MaxBackoff || delay <= 0 {
			delay = cfg.MaxBackoff
		}
		log.Warn("journal repair failed; rescheduled", "command_id", rep.Command.ID, "attempts", rep.Attempts+1, "next_in", delay, "err", err)
		if rerr := p.cfg.Store.RescheduleRepair(ctx, rep, p.cfg.Now().Add(delay), err.Error()); rerr != nil {
			log.Warn("store: repair not rescheduled", "err", rerr)
		}
		return true
	}
	log.Info("journal entry repaired", "command_id", rep.Command.ID, "journal_entry_url", rep.JournalURL)
	return true
}
