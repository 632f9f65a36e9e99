package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/beat"
	"github.com/proxbus/proxbus/netbox"
	"github.com/proxbus/proxbus/proxmox"
	"github.com/proxbus/proxbus/redact"
	"github.com/proxbus/proxbus/store"
)

// run is one delivery of one command on its way through the pipeline.
type run struct {
	p      *Pipeline
	cmd    events.Command
	at     Attempt
	origin events.Origin
	log    *slog.Logger
	verb   Verb

	endpoint netbox.Endpoint
	client   *proxmox.Client
	prep     prepared

	mu      sync.Mutex // guards seq: steps may be reported from a verb's goroutines
	seq     int
	started time.Time
	ownerID string
}

// journalState says what the result reports about the journal.
type journalState struct {
	url       string
	finalized bool
}

// noJournal is the journal state of outcomes that are never journaled (gate refusals, reads).
var noJournal = journalState{finalized: true}

func (r *run) handle(ctx context.Context) Decision {
	r.started = r.p.cfg.Now()
	if out, transient := r.gate(ctx); out != nil {
		if transient && !r.at.Last() {
			return r.retry(ctx, 0, "gate", out.Reason)
		}
		return r.answer(ctx, *out, noJournal)
	}
	prep, invalid := r.verb.prepare(r.cmd.Data)
	r.prep = prep
	switch {
	case invalid != nil && r.verb.VerbAccess() == Read:
		return r.answer(ctx, *invalid, noJournal)
	case invalid != nil:
		return r.refuseInvalid(ctx, *invalid)
	}
	if r.prep.locate != nil {
		located, err := r.prep.locate(ctx, r.client)
		if err != nil {
			out, transient := verbFailure(err)
			if transient && !r.at.Last() {
				return r.retry(ctx, 0, "locate", err.Error())
			}
			return r.answer(ctx, out, noJournal)
		}
		r.prep = located
	}
	if r.verb.VerbAccess() == Read {
		return r.read(ctx)
	}
	return r.write(ctx)
}

// gate is contract §4 step 1. It returns the refusal, and whether it is transient.
func (r *run) gate(ctx context.Context) (*Outcome, bool) {
	if !r.cmd.HasEndpointID {
		return &Outcome{Status: 403, Result: ResultRefused, Reason: ReasonEndpointIDRequired}, false
	}
	client, ok := r.p.cfg.Proxmox.Get(r.cmd.EndpointID)
	if !ok {
		return &Outcome{Status: 403, Result: ResultRefused, Reason: ReasonEndpointNotFound, Detail: "endpoint not in the endpoints file"}, false
	}
	if r.verb.VerbAccess() == Write && client.Endpoint().ReadOnly {
		return &Outcome{Status: 403, Result: ResultRefused, Reason: ReasonEndpointWritesDisabled, Detail: "read-only in the endpoints file"}, false
	}
	ep, err := r.p.cfg.Endpoints.Endpoint(ctx, r.cmd.EndpointID)
	switch {
	case errors.Is(err, netbox.ErrNotFound):
		return &Outcome{Status: 403, Result: ResultRefused, Reason: ReasonEndpointNotFound}, false
	case err != nil:
		r.log.Warn("gate: netbox unavailable", "err", err)
		return &Outcome{Status: 503, Result: ResultFailed, Reason: ReasonNetBoxUnavailable, Detail: "NetBox did not answer the endpoint lookup"}, true
	}
	r.endpoint, r.client = ep, client
	if r.verb.VerbAccess() == Write && !ep.AllowWrites {
		return &Outcome{Status: 403, Result: ResultRefused, Reason: ReasonEndpointWritesDisabled}, false
	}
	return nil, false
}

// read runs a read verb: no idempotency, no journal.
func (r *run) read(ctx context.Context) Decision {
	out, err := r.prep.dispatch(ctx, r.exec(nil, store.Progress{}))
	if err != nil {
		mapped, transient := verbFailure(err)
		if transient && !r.at.Last() {
			return r.retry(ctx, 0, "dispatch", err.Error())
		}
		out = mapped
	}
	return r.answer(ctx, out, noJournal)
}

// refuseInvalid is contract §4 step 2 for a write verb: one terminal warning entry, no Proxmox
// call, and the outcome stored so a redelivery does not journal twice.
func (r *run) refuseInvalid(ctx context.Context, out Outcome) Decision {
	claim, err := r.claim(ctx, store.ClaimRequest{Command: r.key(), Owner: r.owner()})
	if err != nil {
		return r.retry(ctx, 0, "store", err.Error())
	}
	switch claim.State {
	case store.Done:
		return r.replay(ctx, claim.Result)
	case store.Claimed, store.Resumed:
	default:
		return r.retry(ctx, r.p.cfg.BusyDelay, "busy", claim.State.String())
	}
	ctx = context.WithoutCancel(ctx)
	journal := journalState{}
	entry := claim.Progress
	comments := r.comments(out, "")
	if entry.JournalID == 0 {
		ref, err := r.p.cfg.Journal.CreateJournalEntry(ctx, netbox.JournalEntry{
			ObjectType: netbox.ObjectTypeEndpoint, ObjectID: r.cmd.EndpointID, Kind: netbox.KindWarning, Comments: comments,
		})
		if err != nil {
			r.log.Warn("journal: invalid body entry not written", "err", err)
			if netbox.IsTransient(err) && !r.at.Last() {
				r.release(ctx, claim.Lease)
				return r.retry(ctx, 0, "journal", "write failed")
			}
		} else {
			journal = journalState{url: ref.URL, finalized: true}
		}
	} else {
		journal = r.finalize(ctx, entry, out, comments)
	}
	return r.complete(ctx, claim.Lease, out, journal)
}

// write is contract §4 steps 3–7 for a valid write command.
func (r *run) write(ctx context.Context) Decision {
	req := store.ClaimRequest{Command: r.key(), Fingerprint: r.prep.fingerprint, Owner: r.owner(), Guards: r.guards()}
	if r.cmd.IdempotencyKey != "" {
		req.Idem = &store.IdemScope{EndpointID: r.cmd.EndpointID, Verb: r.cmd.Verb, Resource: r.prep.resource, Key: r.cmd.IdempotencyKey}
	}
	claim, err := r.claim(ctx, req)
	if err != nil {
		r.log.Warn("store: claim failed", "err", err)
		return r.retry(ctx, 0, "store", err.Error())
	}
	switch claim.State {
	case store.Done:
		return r.replay(ctx, claim.Result)
	case store.IdemReplay:
		if err := r.p.cfg.Store.CompleteReplay(ctx, r.key(), claim.Result); err != nil {
			r.log.Warn("store: replay not recorded", "err", err)
		}
		return r.replay(ctx, claim.Result)
	case store.IdemReused:
		return r.refuseReused(ctx)
	case store.Busy, store.IdemInFlight:
		r.log.Info("twin in flight; waiting", "state", claim.State.String())
		return Decision{Action: Retry, Delay: r.p.cfg.BusyDelay}
	case store.GuardBusy:
		return r.retry(ctx, r.p.cfg.BusyDelay, "wait", r.busyGuard(claim))
	case store.Claimed, store.Resumed:
	default:
		return r.retry(ctx, 0, "store", "unexpected claim state "+claim.State.String())
	}
	if ctx.Err() != nil { // draining, and nothing has started: let another replica take it
		r.release(context.WithoutCancel(ctx), claim.Lease)
		return Decision{Action: Retry}
	}
	// From the write-ahead entry on, the command is completed even while the process drains.
	ctx = context.WithoutCancel(ctx)
	stop := r.keepLease(ctx, claim.Lease)
	defer stop()
	return r.execute(ctx, claim)
}

// claim takes the command's claim and its guards (contract §5). A twin in flight is waited for
// by redelivery, except on the last delivery: there the wait happens here, heartbeated by the
// consumer, for up to twenty lease lifetimes (a twin resumed after a crash must finish first),
// so a duplicate is not dead-lettered merely for arriving while its twin ran. A guard held
// elsewhere is waited for the same way, on the last delivery for as long as it takes (or until
// the process drains). Likewise an unreachable store is waited for by redelivery and, on the
// last delivery, here, for as long as it takes: nothing is answered or acked while the store is
// down.
func (r *run) claim(ctx context.Context, req store.ClaimRequest) (store.Claim, error) {
	deadline := r.p.cfg.Now().Add(20 * r.p.cfg.Store.Options().LeaseTTL)
	storeWait := 100 * time.Millisecond
	for {
		claim, err := r.p.cfg.Store.Claim(ctx, req)
		wait := r.p.cfg.BusyDelay
		switch {
		case err != nil && r.at.Last():
			r.log.Warn("store unreachable on the last delivery; waiting for it", "err", err)
			wait, storeWait = storeWait, min(2*storeWait, 5*time.Second)
		case err != nil:
			return claim, err
		case claim.State == store.GuardBusy && r.at.Last() && ctx.Err() == nil:
			// waits for the guard, without a deadline
		case claim.State != store.Busy && claim.State != store.IdemInFlight:
			return claim, nil
		case !r.at.Last() || r.p.cfg.Now().After(deadline):
			return claim, nil
		}
		select {
		case <-ctx.Done():
			return claim, err
		case <-time.After(wait):
		}
	}
}

// execute runs a claimed command from its write-ahead journal entry to its result. The
// write-ahead entry is the command's intent record: nothing is checkpointed to Redis on the way,
// so the happy path costs the store only Claim and Complete.
func (r *run) execute(ctx context.Context, claim store.Claim) Decision {
	lease, progress := claim.Lease, claim.Progress
	if claim.State == store.Resumed && !claim.ProgressKnown {
		found, d := r.recoverProgress(ctx, lease)
		if d != nil {
			return *d
		}
		progress = found
	}
	if progress.JournalID == 0 {
		objectType, objectID, err := r.journalTarget(ctx)
		var ref netbox.JournalRef
		if err == nil {
			ref, err = r.p.cfg.Journal.CreateJournalEntry(ctx, netbox.JournalEntry{
				ObjectType: objectType, ObjectID: objectID, Kind: netbox.KindInfo,
				Comments: r.comments(Outcome{Result: "in_progress"}, ""),
			})
		}
		if err != nil {
			r.log.Warn("journal: write-ahead entry not written; nothing dispatched", "err", err)
			if netbox.IsTransient(err) && !r.at.Last() {
				r.release(ctx, lease)
				return r.retry(ctx, 0, "journal", "write-ahead failed")
			}
			out := Outcome{Status: 503, Result: ResultFailed, Reason: ReasonJournalUnavailable, Detail: "the write-ahead journal entry could not be written; nothing was dispatched"}
			return r.complete(ctx, lease, out, journalState{})
		}
		progress.JournalID, progress.JournalURL = ref.ID, ref.URL
	}
	x := r.exec(&lease, progress)
	if claim.State == store.Resumed {
		r.log.Info("resuming a command whose previous owner stopped", "prior_dispatch", progress.Dispatched,
			"progress_recorded", claim.ProgressKnown)
	}
	out, err := r.prep.dispatch(ctx, x)
	if err != nil {
		mapped, transient := verbFailure(err)
		if transient && !x.Dispatched() && !r.at.Last() {
			r.log.Warn("dispatch: transient failure before any write; will retry", "err", r.scrub(err.Error()))
			if err := r.p.cfg.Store.Suspend(ctx, lease, x.progress); err != nil {
				r.log.Warn("store: suspend failed", "err", err)
			}
			return r.retry(ctx, 0, "dispatch", "transient")
		}
		out = mapped
	}
	journal := r.finalize(ctx, progress, out, out.UPID)
	return r.complete(ctx, lease, out, journal)
}

// recoverProgress is the resume of a command whose previous owner stopped without recording
// its progress (a crash): its write-ahead entry in NetBox says whether it had begun. Found →
// that entry, and the write may have been sent (verbs confirm by reading, never resend); not
// found → nothing was written or dispatched, the command runs as new. NetBox unreachable →
// the claim is yielded (still "unknown" for the next owner) and the command redelivered; on the
// last delivery it ends 503 netbox_journal_unavailable.
func (r *run) recoverProgress(ctx context.Context, lease store.Lease) (store.Progress, *Decision) {
	objectType, objectID, err := r.journalTarget(ctx)
	var ref netbox.JournalRef
	if err == nil {
		ref, err = r.p.cfg.Journal.FindJournalEntry(ctx, objectType, objectID, r.cmd.ID)
	}
	switch {
	case err == nil:
		r.log.Info("resumed: found the write-ahead entry of the previous owner; the write may have been sent", "journal_entry_url", ref.URL)
		return store.Progress{JournalID: ref.ID, JournalURL: ref.URL, Dispatched: true}, nil
	case errors.Is(err, netbox.ErrNotFound):
		r.log.Info("resumed: the previous owner wrote no journal entry; running as new")
		return store.Progress{}, nil
	}
	r.log.Warn("journal: the previous owner's entry could not be searched", "err", err)
	if netbox.IsTransient(err) && !r.at.Last() {
		if yerr := r.p.cfg.Store.Yield(ctx, lease); yerr != nil && !errors.Is(yerr, store.ErrLeaseLost) {
			r.log.Warn("store: yield failed", "err", yerr)
		}
		d := r.retry(ctx, 0, "journal", "journal search failed")
		return store.Progress{}, &d
	}
	out := Outcome{Status: 503, Result: ResultFailed, Reason: ReasonJournalUnavailable, Detail: "the journal could not be searched for the interrupted attempt's entry"}
	d := r.complete(ctx, lease, out, journalState{})
	return store.Progress{}, &d
}

// refuseReused answers 422 idempotency_key_reused without journaling or writing.
func (r *run) refuseReused(ctx context.Context) Decision {
	out := Outcome{Status: 422, Result: ResultRefused, Reason: ReasonIdempotencyKeyReused, Detail: "the Idempotency-Key was used with a different request"}
	res := r.result(out, noJournal)
	if raw, err := json.Marshal(record{Result: res, Owner: r.key(), RealStatus: out.Status, RealReason: out.Reason}); err == nil {
		if err := r.p.cfg.Store.CompleteReplay(ctx, r.key(), raw); err != nil {
			r.log.Warn("store: refusal not recorded", "err", err)
		}
	}
	if err := r.publish(ctx, res); err != nil {
		return r.retry(ctx, 0, "publish", err.Error())
	}
	return Decision{Action: Done}
}

// complete stores the outcome under the command's identity (and key), then publishes the
// result. A store failure leaves the message unacked: the redelivery resumes from the record.
func (r *run) complete(ctx context.Context, lease store.Lease, out Outcome, journal journalState) Decision {
	res := r.result(out, journal)
	raw, err := json.Marshal(record{Result: res, Owner: r.key(), RealStatus: out.Status, RealReason: out.Reason})
	if err != nil {
		r.log.Error("result not encodable", "err", err)
		return r.retry(ctx, 0, "encode", err.Error())
	}
	if err := r.p.cfg.Store.Complete(ctx, lease, raw); err != nil {
		r.log.Warn("store: outcome not recorded; redelivery will resume", "err", err)
		return r.retry(ctx, 0, "store", err.Error())
	}
	r.log.Info("command finished", "status", res.Status, "result", res.Result, "reason", res.Reason,
		"journal_finalized", res.JournalFinalized, "duration", r.p.cfg.Now().Sub(r.started))
	if err := r.publish(ctx, res); err != nil {
		return r.retry(ctx, 0, "publish", err.Error())
	}
	return Decision{Action: Done}
}

// retry redelivers the command and says so with a `retrying` step event (contract §3), so a
// subscriber sees a transient failure instead of silence.
func (r *run) retry(ctx context.Context, delay time.Duration, stage, why string) Decision {
	r.log.Info("retrying by redelivery", "stage", stage, "why", r.scrub(why))
	r.step(ctx, stage, events.StepRetrying, "", "transient failure; the command will be redelivered")
	return Decision{Action: Retry, Delay: delay}
}

func (r *run) release(ctx context.Context, lease store.Lease) {
	if err := r.p.cfg.Store.Release(ctx, lease); err != nil && !errors.Is(err, store.ErrLeaseLost) {
		r.log.Warn("store: release failed", "err", err)
	}
}

// keepLease renews the command's lease, its Idempotency-Key record and its guards (one Redis
// script) every third of the lease TTL until the returned stop is called (which waits for a
// renewal in progress) or the lease is gone. No goroutine waits between renewals.
func (r *run) keepLease(ctx context.Context, lease store.Lease) (stop func()) {
	return beat.Start(r.p.cfg.Store.Options().LeaseTTL/3, func() bool {
		err := r.p.cfg.Store.Renew(ctx, lease)
		switch {
		case errors.Is(err, store.ErrLeaseLost):
			return false // completed (or taken over): nothing left to keep alive
		case errors.Is(err, store.ErrGuardLost):
			// the claim's own fencing keeps the command's records safe
			r.log.Warn("store: a guard expired and was taken by another command", "err", err)
		case err != nil:
			r.log.Warn("store: lease renewal failed", "err", err)
		}
		return true
	})
}

func (r *run) key() store.CommandKey { return store.CommandKey{Source: r.cmd.Source, ID: r.cmd.ID} }

// owner names this attempt (unique per delivery) in every lease it takes.
func (r *run) owner() string {
	if r.ownerID == "" {
		r.ownerID = fmt.Sprintf("%s/%d/%d", r.p.cfg.Instance, r.at.Delivered, r.p.cfg.Now().UnixNano())
	}
	return r.ownerID
}

// scrub removes this command's secrets and secret-named assignments from text.
func (r *run) scrub(s string) string { return redact.Values(s, r.prep.secrets...) }
