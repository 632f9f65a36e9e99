package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/store"
)

// Reasons of the commands answered without being run: contract §4 step 0 and §10.
const (
	// ReasonCommandExpired: the command's expires time, or the command max age, passed
	// before it started.
	ReasonCommandExpired = "command_expired"
	// ReasonCommandCancelled: `proxbus cancel` cancelled the command before it started.
	ReasonCommandCancelled = "command_cancelled"
)

// DefaultCommandMaxAge is the default of [Settings.CommandMaxAge] (contract §4 step 0).
const DefaultCommandMaxAge = 15 * time.Minute

// expiry is contract §4 step 0: it says why the command must not start now, or "" when it may.
// A command's age is measured from its time attribute, else from its arrival in the stream.
func (r *run) expiry() string {
	now := r.p.cfg.Now()
	if !r.cmd.Expires.IsZero() && now.After(r.cmd.Expires) {
		return fmt.Sprintf("the command expired at %s (its expires attribute) before it started; nothing was done",
			r.cmd.Expires.Format(time.RFC3339))
	}
	sent, from := r.sent()
	if age := now.Sub(sent); !sent.IsZero() && age > r.p.cfg.CommandMaxAge {
		return fmt.Sprintf("the command is %s old (from %s), older than the command max age of %s, and had not started; nothing was done",
			age.Round(time.Second), from, r.p.cfg.CommandMaxAge)
	}
	return ""
}

// sent is when the command's age starts: its time attribute, else its arrival in the stream
// (zero when neither is known), and which of the two it is.
func (r *run) sent() (time.Time, string) {
	if !r.cmd.Time.IsZero() {
		return r.cmd.Time, "its time attribute"
	}
	return r.delivery.Stored, "its arrival in the stream"
}

// deadline is when the command expires if it has not started: the earlier of its expires
// attribute and its sending time plus the command max age; zero when neither is known.
func (r *run) deadline() time.Time {
	d := r.cmd.Expires
	if sent, _ := r.sent(); !sent.IsZero() {
		if byAge := sent.Add(r.p.cfg.CommandMaxAge); d.IsZero() || byAge.Before(d) {
			d = byAge
		}
	}
	return d
}

// expire answers a command that must not start 410 command_expired; a write command that has
// already begun goes on with started instead (contract §4 step 0: once started, it is
// finished), as does one whose approval was decided in time. A write command's answer is
// stored, as [Cancel] stores its, so that every later delivery is answered the same.
func (r *run) expire(ctx context.Context, detail string, started stage) move {
	out := Outcome{Status: 410, Result: ResultRefused, Reason: ReasonCommandExpired, Detail: detail}
	if r.verb.VerbAccess() == Read || r.cmd.DryRun { // nothing to store: a dry run writes nothing
		return r.answer(ctx, out, noJournal).because(EventExpired)
	}
	switch inTime, err := r.decidedInTime(ctx); {
	case err != nil:
		return r.storeDown(ctx, err)
	case inTime:
		r.log.Info("past its expiry, but its approval was decided in time: the decision takes effect", "detail", detail)
		return started(ctx)
	}
	raw, res, err := r.record(out, noJournal)
	if err != nil {
		return r.failed(ctx, "encode", err)
	}
	state, stored, err := r.p.cfg.Store.FinishUnstarted(ctx, r.key(), raw)
	switch {
	case err != nil:
		return r.storeDown(ctx, err)
	case state == store.Finished:
		return r.replay(ctx, stored)
	case state == store.Running:
		r.log.Info("past its expiry, but already started: it is finished", "detail", detail)
		return started(ctx)
	}
	r.log.Info("command expired before it started", "detail", detail)
	if err := r.p.cfg.Store.DropApproval(ctx, r.key()); err != nil {
		r.log.Warn("store: the expired command's approval not removed", "err", err)
	}
	return r.publishResult(ctx, res).because(EventExpired)
}

// Cancel cancels command c, not started yet, for `proxbus cancel` (contract §10): it stores the
// outcome 410 command_cancelled under the command's identity, so that its delivery, now or
// later, publishes that result and does nothing. detail says who cancelled it. It returns
// store.Absent when it cancelled the command, store.Finished and the stored result when the
// command had finished, and store.Running when it has started, in which case nothing changes:
// a started command is finished, not cancelled.
func Cancel(ctx context.Context, st *store.Store, c events.Command, detail string) (store.RecordState, events.Result, error) {
	r := &run{cmd: c}
	out := Outcome{Status: 410, Result: ResultRefused, Reason: ReasonCommandCancelled, Detail: detail}
	raw, res, err := r.record(out, noJournal)
	if err != nil {
		return store.Absent, events.Result{}, err
	}
	state, stored, err := st.FinishUnstarted(ctx, r.key(), raw)
	if err == nil && state == store.Absent {
		err = st.DropApproval(ctx, r.key())
	}
	if err != nil || state != store.Finished {
		return state, res, err
	}
	var rec record
	if err := json.Unmarshal(stored, &rec); err != nil {
		return state, events.Result{}, fmt.Errorf("handlers: cancel: stored result unreadable: %w", err)
	}
	return state, rec.Result, nil
}
