package handlers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/netbox"
	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/internal/redact"
	"github.com/proxbus/proxbus/store"
)

// run is one delivery of one command on its way through the pipeline.
type run struct {
	p        *Pipeline
	cmd      events.Command
	delivery events.Delivery
	origin   events.Origin
	log      *slog.Logger
	verb     Verb

	endpoint netbox.Endpoint
	client   *proxmox.Client
	prep     prepared

	// attempt counts the command's attempts, 1 first: the failures recorded so far, plus one.
	attempt int
	// last is the newest step an earlier delivery published (zero Seq when none).
	last events.Step
	// wrote is set once this delivery holds a command whose write may have been sent: no
	// failure of it is counted or answered as failed from then on.
	wrote bool
	// approval is the decision on a command that needed approval, journaled with it.
	approval *store.Approval
	// relocate locates the command's object again (nil for a verb that locates nothing): after
	// a wait, and when its object is no longer where it was located, what the command acts on
	// is read again.
	relocate func(ctx context.Context, c *proxmox.Client) (prepared, error)
	// waited is set once this delivery has waited in the wait room for a guard.
	waited bool
	// provisional is set when the command was located from an earlier read (firstLocate):
	// it is located again once claimed.
	provisional bool
	// cancel is the cancellation of a running command of a cancellable verb (nil otherwise).
	cancel *canceller
	// opened holds the values the command's sealed secrets were opened to (Exec.Open).
	opened openedSecrets

	// state is the state the delivery has brought the command to (lifecycle.go).
	state State
	// cleanups run, last first, when the delivery ends (the lease's renewal, the registration
	// of a cancellable command).
	cleanups []func()
	// guardWait fires when waiting in the process for a busy guard ends, GuardWait from the
	// first wait on (guardOver once it has); wokenFor is the guard this delivery was woken for.
	guardWait <-chan time.Time
	guardOver bool
	wokenFor  string

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

// noJournal is the journal state of outcomes that have no journal entry (gate refusals,
// reads, expiry, cancellation): their results carry no journal_finalized.
var noJournal = journalState{}

// failure classes: what a verb's or dependency's error means for the command.
type failure int

const (
	// final: the error is the command's outcome (a refusal, a failed task).
	final failure = iota
	// unavailable: a dependency could not be reached or is busy: the command waits and spends
	// no attempt.
	unavailable
	// attemptFailed: the attempt failed for a reason that may not clear by waiting alone; it is
	// counted against MaxAttempts.
	attemptFailed
)

// receive starts a delivery: what earlier deliveries left is recalled, an expired command
// is answered, and the verb is looked up.
func (r *run) receive(ctx context.Context) move {
	if r.delivery.Number > 1 {
		return r.recall(ctx, r.lookUp)
	}
	return r.lookUp(ctx)
}

// recall reads what earlier deliveries left, then goes on: the newest step event (its seq
// continues, so event ids never collide) and the failed attempts so far. When either cannot
// be read the command waits: nothing has been done yet.
func (r *run) recall(ctx context.Context, next stage) move {
	last, ok, err := r.p.cfg.History.LastStep(ctx, r.cmd.Ref())
	if err != nil {
		r.log.Warn("events stream: the command's steps cannot be read; waiting", "err", err)
		return r.redeliver(r.waitDelay())
	}
	if ok {
		r.last, r.seq = last, last.Seq
	}
	failures, err := r.p.cfg.Store.Failures(ctx, r.key())
	if err != nil {
		r.log.Warn("store: failed attempts cannot be read; waiting", "err", err)
		return r.redeliver(r.waitDelay())
	}
	r.attempt = failures + 1
	return next(ctx)
}

// lookUp finds the command's verb; an unknown verb is refused and dead-lettered.
func (r *run) lookUp(ctx context.Context) move {
	verb, ok := r.p.cfg.Registry.Lookup(r.cmd.Verb)
	if !ok {
		r.log.Warn("unknown verb")
		m := r.answer(ctx, Outcome{Status: 400, Result: ResultRefused, Reason: ReasonInvalidCommand, Detail: "unknown verb"}, noJournal)
		if m.disp.Action == events.Ack {
			m.disp = events.Disposition{Action: events.DeadLetter, Reason: "unknown_verb"}
		}
		return m
	}
	r.verb = verb
	if r.cmd.Firing != nil { // fired by a message schedule (contract §11)
		return r.scheduled(ctx, r.begin)
	}
	return r.begin(ctx)
}

// begin answers a command that must not start any more (expired), or admits it.
func (r *run) begin(ctx context.Context) move {
	r.started = r.p.cfg.Now()
	if why := r.expiry(); why != "" {
		return r.expire(ctx, why, r.admit)
	}
	return r.admit(ctx)
}

// admit runs the checks that come before anything is claimed: a control verb runs; a write
// command's stored outcome is answered; the gate, validation and (while it awaits approval)
// the approval are checked, and the command's object located.
func (r *run) admit(ctx context.Context) move {
	if r.verb.VerbAccess() == Control {
		return r.control(ctx)
	}
	if r.delivery.Number > 1 && r.verb.VerbAccess() == Write {
		// it may have finished meanwhile, or been cancelled while it waited
		return r.fromRecord(ctx, r.check)
	}
	return r.check(ctx)
}

// check is contract §4 steps 1 and 2, and the approval of a command already awaiting one.
func (r *run) check(ctx context.Context) move {
	if out, transient := r.gate(ctx); out != nil {
		if transient {
			return r.wait(ctx, "gate", events.StepRetrying, out.Detail, r.waitDelay())
		}
		return r.refuse(ctx, *out)
	}
	prep, invalid := r.verb.prepareSealed(r.cmd.Data, r.p.sealing())
	r.prep = prep
	switch {
	case invalid != nil && (r.verb.VerbAccess() == Read || r.cmd.DryRun): // a dry run journals nothing
		return r.answer(ctx, *invalid, noJournal)
	case invalid != nil:
		return r.refuseInvalid(ctx, *invalid)
	}
	if r.delivery.Number > 1 && r.needsApproval() {
		// still awaiting approval: looked up before locating, so waiting costs no Proxmox read
		return r.stillAwaiting(ctx, r.locate)
	}
	return r.locate(ctx)
}

// locate resolves the command's object against Proxmox, then runs a read, a dry run, asks
// for approval, or claims the command.
func (r *run) locate(ctx context.Context) move {
	if r.prep.locate != nil {
		r.relocate = r.prep.locate
		located, err := r.firstLocate(ctx)
		if err != nil {
			return r.settleBeforeWrite(ctx, "locate", err, func(out Outcome) move { return r.refuseLocated(ctx, out) })
		}
		r.prep = located
	}
	switch {
	case r.verb.VerbAccess() == Read:
		return r.read(ctx)
	case r.cmd.DryRun:
		return r.dryRun(ctx)
	case r.needsApproval():
		return r.awaitApproval(ctx, r.write)
	}
	return r.write(ctx)
}

// settleBeforeWrite handles an error met before anything was written or journaled: a final one
// is answered through answer, an unreachable dependency is waited for, anything else is a
// failed attempt.
func (r *run) settleBeforeWrite(ctx context.Context, stage string, err error, answer func(Outcome) move) move {
	out, class := classify(err)
	switch class {
	case unavailable:
		r.log.Info("dependency unavailable before any write; waiting", "stage", stage, "err", r.scrub(err.Error()))
		return r.wait(ctx, stage, events.StepRetrying, waitDetail(err, "Proxmox is unavailable; nothing was written"), r.waitDelay())
	case attemptFailed:
		return r.failed(ctx, stage, err)
	}
	return answer(out)
}

// gate is contract §4 step 1. It returns the refusal, and whether it is transient.
func (r *run) gate(ctx context.Context) (*Outcome, bool) {
	if !r.cmd.HasEndpointID {
		return &Outcome{Status: 403, Result: ResultRefused, Reason: ReasonEndpointIDRequired}, false
	}
	client, ok := r.p.cfg.Proxmox.Get(r.cmd.EndpointID)
	if !ok {
		detail, transient := "endpoint not in the endpoints file", false
		if states, ok := r.p.cfg.Proxmox.(EndpointStates); ok {
			detail, transient = states.Why(r.cmd.EndpointID)
		}
		if transient {
			return &Outcome{Status: 503, Result: ResultFailed, Reason: ReasonProxmoxUnreachable, Detail: detail}, true
		}
		return &Outcome{Status: 403, Result: ResultRefused, Reason: ReasonEndpointNotFound, Detail: detail}, false
	}
	r.client = client // its endpoint's settings (approval) apply while NetBox is asked
	if r.verb.VerbAccess() == Write && client.Endpoint().ReadOnly {
		return &Outcome{Status: 403, Result: ResultRefused, Reason: ReasonEndpointWritesDisabled, Detail: "read-only in the endpoints file"}, false
	}
	ep, err := r.p.cfg.Endpoints.Endpoint(ctx, r.cmd.EndpointID)
	switch {
	case errors.Is(err, netbox.ErrNotFound):
		return &Outcome{Status: 403, Result: ResultRefused, Reason: ReasonEndpointNotFound}, false
	case err != nil:
		r.log.Warn("gate: netbox unavailable", "err", err)
		return &Outcome{Status: 503, Result: ResultFailed, Reason: ReasonNetBoxUnavailable, Detail: waitDetail(err, "NetBox did not answer the endpoint lookup")}, true
	}
	r.endpoint = ep
	if r.verb.VerbAccess() == Write && !ep.AllowWrites {
		return &Outcome{Status: 403, Result: ResultRefused, Reason: ReasonEndpointWritesDisabled, Detail: cmp.Or(ep.WritesClosedReason, "allow_writes is not true in NetBox")}, false
	}
	return nil, false
}

// refuse answers a gate refusal. A write command cancelled before its delivery is answered
// from its record instead, so it has one outcome.
func (r *run) refuse(ctx context.Context, out Outcome) move {
	answer := func(ctx context.Context) move { return r.answer(ctx, out, noJournal) }
	if r.verb.VerbAccess() == Write {
		return r.fromRecord(ctx, answer)
	}
	return answer(ctx)
}

// refuseLocated answers a refusal met while locating the command's object (a guest not
// found). A write command that had already started is resumed to be answered: when a write of
// it may have been sent (its guest deleted by its own write, say, before a crash) it ends 502
// proxmox_write_unconfirmed; when none was (its marks say so), the refusal stands. Either way
// its write-ahead entry, from its record or found in NetBox, is finalized with the answer.
func (r *run) refuseLocated(ctx context.Context, out Outcome) move {
	if r.verb.VerbAccess() != Write || r.cmd.DryRun {
		return r.answer(ctx, out, noJournal)
	}
	state, raw, err := r.p.cfg.Store.Record(ctx, r.key())
	switch {
	case err != nil:
		return r.storeDown(ctx, err)
	case state == store.Finished:
		return r.replay(ctx, raw)
	case state == store.Absent:
		return r.answer(ctx, out, noJournal)
	}
	claim, err := r.p.cfg.Store.Claim(ctx, store.ClaimRequest{Command: r.key(), Owner: r.owner()})
	switch {
	case err != nil:
		return r.storeDown(ctx, err)
	case claim.State == store.Done:
		return r.replay(ctx, claim.Result)
	case claim.State == store.Claimed: // released meanwhile: nothing had been written
		r.release(ctx, claim.Lease)
		return r.answer(ctx, out, noJournal)
	case claim.State != store.Resumed:
		return r.wait(ctx, "claim", events.StepWaiting, "another delivery of this command is running", r.p.cfg.BusyDelay)
	}
	ctx = context.WithoutCancel(ctx)
	if !claim.ProgressKnown {
		return r.recoverProgress(ctx, claim.Lease, claim.Marked, func(p store.Progress) move { return r.answerGone(ctx, claim, p, out) })
	}
	return r.answerGone(ctx, claim, claim.Progress, out)
}

// answerGone answers a resumed command, with progress, whose object cannot be located (out
// says why): see refuseLocated.
func (r *run) answerGone(ctx context.Context, claim store.Claim, progress store.Progress, out Outcome) move {
	answer := out // nothing was sent (no mark): the object is gone now, as the refusal says
	if gone, ok := r.goneAnswer(claim.Resource, progress); ok {
		answer = gone
	} else if progress.Dispatched {
		answer = unconfirmedWrite()
		answer.Detail = "the command had started and its write may have been sent, but its object can no longer be found (" +
			cmp.Or(out.Detail, out.Reason) + "); it is not sent again: check it in Proxmox"
		r.log.Warn("a started command's object can no longer be located; answered unconfirmed", "reason", out.Reason)
	}
	journal := journalState{}
	if progress.JournalID != 0 {
		journal = r.finalize(ctx, progress, answer, "")
	}
	return r.complete(ctx, claim.Lease, answer, journal).because(EventAnswered)
}

// goneAnswer is the verb's own answer for a started command, with progress, whose object is
// gone ([Spec.Gone]); false when it has none or the command sent nothing.
func (r *run) goneAnswer(resource string, progress store.Progress) (Outcome, bool) {
	if !progress.Dispatched || r.prep.gone == nil {
		return Outcome{}, false
	}
	return r.prep.gone(resource, progress.Sent)
}

// fromRecord answers a command whose outcome is already stored, from its record; a command
// without one goes on with next. An unreachable store is waited for.
func (r *run) fromRecord(ctx context.Context, next stage) move {
	state, raw, err := r.p.cfg.Store.Record(ctx, r.key())
	switch {
	case err != nil:
		return r.storeDown(ctx, err)
	case state == store.Finished:
		return r.replay(ctx, raw)
	}
	return next(ctx)
}

// read runs a read verb: no idempotency, no journal.
func (r *run) read(ctx context.Context) move {
	out, err := r.prep.dispatch(ctx, r.exec(nil, store.Progress{}))
	if err != nil {
		return r.settleBeforeWrite(ctx, "dispatch", err, func(out Outcome) move { return r.answer(ctx, out, noJournal) })
	}
	return r.answer(ctx, out, noJournal)
}

// refuseInvalid is contract §4 step 2 for a write verb: one terminal warning entry on the
// endpoint, no Proxmox call, and the outcome stored so a redelivery does not journal twice.
func (r *run) refuseInvalid(ctx context.Context, out Outcome) move {
	return r.refuseJournaled(ctx, out, func(context.Context) (string, int64, error) {
		return netbox.ObjectTypeEndpoint, r.cmd.EndpointID, nil
	})
}

// refuseJournaled answers a write command that is refused before anything was dispatched (an
// invalid body, a rejected approval) with one terminal warning entry on the object target
// names, no Proxmox call, and the outcome stored so a redelivery does not journal twice.
func (r *run) refuseJournaled(ctx context.Context, out Outcome, target func(context.Context) (string, int64, error)) move {
	claim, err := r.p.cfg.Store.Claim(ctx, store.ClaimRequest{Command: r.key(), Owner: r.owner()})
	if err != nil {
		return r.storeDown(ctx, err)
	}
	switch claim.State {
	case store.Done:
		return r.replay(ctx, claim.Result)
	case store.Claimed, store.Resumed:
	default:
		return r.wait(ctx, "claim", events.StepWaiting, "another delivery of this command is running", r.p.cfg.BusyDelay)
	}
	ctx = context.WithoutCancel(ctx)
	journal := journalState{}
	entry := claim.Progress
	comments := r.comments(out, "")
	if entry.JournalID == 0 {
		objectType, objectID, err := target(ctx)
		var ref netbox.JournalRef
		if err == nil {
			ref, err = r.p.cfg.Journal.CreateJournalEntry(ctx, netbox.JournalEntry{
				ObjectType: objectType, ObjectID: objectID, Kind: netbox.KindWarning, Comments: comments,
			})
		}
		switch {
		case err == nil:
			journal = journalState{url: ref.URL, finalized: true}
		case netbox.ShouldWait(err):
			r.log.Warn("journal: invalid body entry not written; waiting for NetBox", "err", err)
			r.release(ctx, claim.Lease)
			return r.wait(ctx, "journal", events.StepRetrying, waitDetail(err, "NetBox is unavailable"), r.waitDelay())
		default:
			r.log.Warn("journal: invalid body entry refused", "err", err)
		}
	} else {
		journal = r.finalize(ctx, entry, out, comments)
	}
	return r.complete(ctx, claim.Lease, out, journal).because(EventAnswered)
}

// write is contract §4 steps 3–7 for a valid write command: it claims the command and its
// guards, then runs it.
func (r *run) write(ctx context.Context) move {
	req := store.ClaimRequest{Command: r.key(), Fingerprint: r.prep.fingerprint, Owner: r.owner(), Guards: r.guards(),
		Verb: r.cmd.Verb, Resource: r.prep.resource}
	if r.cmd.IdempotencyKey != "" {
		req.Idem = &store.IdemScope{EndpointID: r.cmd.EndpointID, Verb: r.cmd.Verb, Resource: r.prep.resource, Key: r.cmd.IdempotencyKey}
	}
	return r.claim(ctx, req, r.claimed)
}

// claimed goes on with a command this delivery has claimed: it is run from its write-ahead
// entry on, completed even while the process drains.
func (r *run) claimed(ctx context.Context, claim store.Claim) move {
	if ctx.Err() != nil { // draining, and nothing has started: let another replica take it
		r.release(context.WithoutCancel(ctx), claim.Lease)
		return r.redeliver(0)
	}
	run := func(context.Context) move {
		// From the write-ahead entry on, the command is completed even while the process drains.
		ctx := context.WithoutCancel(ctx)
		r.cleanups = append(r.cleanups, r.keepLease(ctx, claim.Lease), r.running(ctx, claim))
		return r.execute(ctx, claim)
	}
	if (r.waited || r.provisional) && claim.State == store.Claimed {
		// another command held the guest meanwhile, or it was located from an earlier read:
		// what this one acts on is read again
		return r.locateAgain(ctx, claim.Lease, run)
	}
	return run(ctx)
}

// cleanUp runs the delivery's cleanups, last first.
func (r *run) cleanUp() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	r.cleanups = nil
}

// unclaimed answers a claim that did not give this delivery the command: a finished command
// is answered from its record, a reused Idempotency-Key refused, and a command running
// elsewhere (this one, or the owner of its Idempotency-Key) waited for.
func (r *run) unclaimed(ctx context.Context, claim store.Claim) move {
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
	case store.Busy:
		return r.wait(ctx, "claim", events.StepWaiting, "another delivery of this command is running", r.p.cfg.BusyDelay)
	case store.IdemInFlight:
		return r.wait(ctx, "claim", events.StepWaiting, "a command with the same Idempotency-Key is running", r.p.cfg.BusyDelay)
	}
	return r.failed(ctx, "claim", fmt.Errorf("unexpected claim state %s", claim.State))
}

// execute runs a claimed command from its write-ahead journal entry to its result. On the way
// each Proxmox write is marked in the store right before it leaves ([Exec.Write]), so the happy
// path costs the store Claim, one mark per write and Complete.
func (r *run) execute(ctx context.Context, claim store.Claim) move {
	if claim.State == store.Resumed && !claim.ProgressKnown {
		return r.recoverProgress(ctx, claim.Lease, claim.Marked, func(p store.Progress) move { return r.journalAhead(ctx, claim, p) })
	}
	return r.journalAhead(ctx, claim, claim.Progress)
}

// journalAhead writes the command's write-ahead entry, unless it has one, then dispatches it.
func (r *run) journalAhead(ctx context.Context, claim store.Claim, progress store.Progress) move {
	lease := claim.Lease
	if progress.JournalID == 0 {
		objectType, objectID, err := r.journalTarget(ctx)
		var ref netbox.JournalRef
		if err == nil {
			ref, err = r.p.cfg.Journal.CreateJournalEntry(ctx, netbox.JournalEntry{
				ObjectType: objectType, ObjectID: objectID, Kind: netbox.KindInfo,
				Comments: r.comments(Outcome{Result: "in_progress"}, ""),
			})
			if err == nil {
				r.reach(crashJournaled, "write-ahead entry")
			}
		}
		if err != nil {
			if netbox.ShouldWait(err) {
				r.log.Warn("journal: write-ahead entry not written; nothing dispatched; waiting for NetBox", "err", err)
				r.release(ctx, lease)
				return r.wait(ctx, "journal", events.StepRetrying, waitDetail(err, "NetBox is unavailable; nothing was dispatched"), r.waitDelay())
			}
			r.log.Warn("journal: write-ahead entry refused; nothing dispatched", "err", err)
			out := Outcome{Status: 503, Result: ResultFailed, Reason: ReasonJournalUnavailable, Detail: "NetBox refused the write-ahead journal entry; nothing was dispatched"}
			return r.complete(ctx, lease, out, journalState{})
		}
		progress.JournalID, progress.JournalURL = ref.ID, ref.URL
	}
	if claim.State == store.Resumed {
		r.log.Info("resuming a command whose previous attempt stopped", "prior_dispatch", progress.Dispatched,
			"progress_recorded", claim.ProgressKnown)
	}
	r.wrote = progress.Dispatched
	x := r.exec(&lease, progress)
	if x.PriorDispatch() {
		return move{on: EventResumedAfterWrite, to: StateConfirming}.then(func(ctx context.Context) move {
			return r.confirm(ctx, lease, x, "an earlier attempt of this command may have sent its write")
		})
	}
	out, err := r.dispatch(ctx, x)
	if errors.Is(err, proxmox.ErrAnswerLost) && x.Dispatched() {
		return move{on: EventAnswerLost, to: StateConfirming}.then(func(ctx context.Context) move {
			return r.confirm(ctx, lease, x, "the answer to the write was lost")
		})
	}
	return r.conclude(ctx, lease, x, out, err)
}

// conclude ends a dispatch or a confirm: its outcome (a cancellation's included) is journaled
// and stored; an error that is not the command's outcome interrupts it.
func (r *run) conclude(ctx context.Context, lease store.Lease, x *Exec, out Outcome, err error) move {
	if cancelled, ok := r.cancelledOutcome(out, err); ok {
		out, err = cancelled, nil
	}
	if err != nil {
		mapped, class := classify(err)
		if class != final {
			return r.interrupted(ctx, lease, x, err, class)
		}
		out = mapped
	}
	journal := r.finalize(ctx, x.progress, out, out.UPID)
	return r.complete(ctx, lease, out, journal)
}

// dispatch runs the verb (contract §4 step 5) and follows a guest that moved before any write.
// A panic in the verb is an error here, so the protocol still knows whether a write left.
func (r *run) dispatch(ctx context.Context, x *Exec) (out Outcome, err error) {
	defer r.recoverVerb(&out, &err)
	out, err = r.prep.dispatch(ctx, x)
	if errors.Is(err, proxmox.ErrVMNotFound) && !x.Dispatched() && r.relocate != nil {
		// located before the claim, the guest may have moved since: act where it is now
		if again, lerr := r.followGuest(ctx, x); lerr != nil {
			return Outcome{}, lerr
		} else if again {
			out, err = r.prep.dispatch(ctx, x)
		}
	}
	return out, err
}

// recoverVerb turns a verb's panic into an internal error (a test's crash signal goes on).
func (r *run) recoverVerb(out *Outcome, err *error) {
	if v := recover(); v != nil {
		if _, crash := v.(crashSignal); crash {
			panic(v)
		}
		r.log.Error("verb panicked", "panic", fmt.Sprint(v))
		*out, *err = Outcome{}, fmt.Errorf("%w: %v", errInternal, v)
	}
}

// confirm is the confirming state (contract §4 step 5): the verb tells by reading whether the
// write that may have left took effect; a verb whose write cannot be confirmed answers 502
// proxmox_write_unconfirmed. The write is never sent a second time.
func (r *run) confirm(ctx context.Context, lease store.Lease, x *Exec, why string) move {
	x.prior = true
	out, err := r.confirmed(ctx, x, why)
	return r.conclude(ctx, lease, x, out, err)
}

// confirmed runs the verb's confirm.
func (r *run) confirmed(ctx context.Context, x *Exec, why string) (out Outcome, err error) {
	defer r.recoverVerb(&out, &err)
	if r.prep.confirm == nil {
		x.Step(ctx, "confirm", events.StepError, "", why+"; it cannot be confirmed by reading and is not sent twice")
		return unconfirmedWrite(), nil
	}
	x.Step(ctx, "confirm", events.StepStarted, "", why+"; confirming by reading")
	out, err = r.prep.confirm(ctx, x)
	if err != nil {
		x.Step(ctx, "confirm", events.StepError, "", "")
		return out, err
	}
	x.Step(ctx, "confirm", events.StepDone, "", out.Result)
	return out, nil
}

// interrupted handles a dispatch that ended without an outcome. Nothing written yet: the
// command is suspended with its journal entry and waits (an unreachable dependency) or counts a
// failed attempt. A write may have been sent: it is suspended as dispatched and comes back to
// be confirmed by reading; it is never failed for it.
func (r *run) interrupted(ctx context.Context, lease store.Lease, x *Exec, err error, class failure) move {
	tries := 1
	if errors.Is(err, errNotSent) {
		// the write's mark failed, but may have been applied: the record must say it was not
		// sent, or the next owner would answer unconfirmed for a write that never left
		tries = suspendTries
	}
	for i := range tries {
		serr := r.p.cfg.Store.Suspend(ctx, lease, x.progress)
		if serr == nil {
			r.reach(crashStored, "suspension")
			break
		}
		if i == tries-1 || errors.Is(serr, store.ErrLeaseLost) {
			r.log.Warn("store: suspend failed; the lease expires instead", "err", serr)
			break
		}
		r.p.sleep(publishPause << min(i, 3))
	}
	switch {
	case x.Dispatched():
		r.log.Warn("dispatch interrupted after a write may have been sent; it will be confirmed by reading", "err", r.scrub(err.Error()))
		return r.wait(ctx, "dispatch", events.StepRetrying, "interrupted after the write may have been sent; it will be confirmed by reading, never sent twice", r.waitDelay()).
			becomes(StateConfirming, EventInterrupted)
	case errors.Is(err, errNotSent):
		r.log.Warn("dispatch: the store is unavailable; nothing was sent; waiting", "err", r.scrub(err.Error()))
		return r.wait(ctx, "store", events.StepRetrying, "the store is unavailable; nothing was written", r.waitDelay())
	case class == unavailable:
		r.log.Info("dispatch: dependency unavailable before any write; waiting", "err", r.scrub(err.Error()))
		return r.wait(ctx, "dispatch", events.StepRetrying, waitDetail(err, "Proxmox is unavailable; nothing was written"), r.waitDelay())
	}
	return r.failedClaimed(ctx, lease, x.progress, "dispatch", err)
}

// suspendTries bounds the suspensions tried after a write's mark failed (0.25, 0.5, 1, 2, 2,
// … s apart): enough to outlast a Redis failover, well within the lease.
const suspendTries = 8

// recoverProgress is the resume of a command whose previous owner stopped without recording
// its progress (a crash): its write-ahead entry in NetBox is looked up, to be reused. Found →
// that entry; the write may have been sent (the verb confirms by reading, never resends) unless
// the previous owner marked its dispatches (marked) and left no mark, in which case none was;
// not found → nothing was written or dispatched, the command runs as new. NetBox unreachable →
// the claim is yielded (still unknown for the next owner) and the command waits.
func (r *run) recoverProgress(ctx context.Context, lease store.Lease, marked bool, next func(store.Progress) move) move {
	objectType, objectID, err := r.journalTarget(ctx)
	var ref netbox.JournalRef
	if err == nil {
		ref, err = r.p.cfg.Journal.FindJournalEntry(ctx, objectType, objectID, r.cmd.ID)
	}
	switch {
	case err == nil && marked:
		r.log.Info("resumed: found the write-ahead entry of the previous owner, which sent no write", "journal_entry_url", ref.URL)
		return next(store.Progress{JournalID: ref.ID, JournalURL: ref.URL})
	case err == nil:
		r.log.Info("resumed: found the write-ahead entry of the previous owner; the write may have been sent", "journal_entry_url", ref.URL)
		return next(store.Progress{JournalID: ref.ID, JournalURL: ref.URL, Dispatched: true})
	case errors.Is(err, netbox.ErrNotFound):
		r.log.Info("resumed: the previous owner wrote no journal entry; running as new")
		return next(store.Progress{})
	}
	r.log.Warn("journal: the previous owner's entry cannot be searched; waiting for NetBox", "err", err)
	if yerr := r.p.cfg.Store.Yield(ctx, lease); yerr != nil && !errors.Is(yerr, store.ErrLeaseLost) {
		r.log.Warn("store: yield failed", "err", yerr)
	}
	return r.wait(ctx, "journal", events.StepRetrying, waitDetail(err, "NetBox is unavailable; the interrupted attempt's journal entry cannot be searched"), r.waitDelay())
}

// refuseReused answers 422 idempotency_key_reused without journaling or writing.
func (r *run) refuseReused(ctx context.Context) move {
	out := Outcome{Status: 422, Result: ResultRefused, Reason: ReasonIdempotencyKeyReused, Detail: "the Idempotency-Key was used with a different request"}
	raw, res, err := r.record(out, noJournal)
	if err == nil {
		if err := r.p.cfg.Store.CompleteReplay(ctx, r.key(), raw); err != nil {
			r.log.Warn("store: refusal not recorded", "err", err)
		}
	}
	return r.publishResult(ctx, res)
}

// complete stores the outcome under the command's identity (and key), then publishes the
// result first-hand. A store failure leaves the message unacked: the redelivery resumes the
// command, which confirms by reading.
func (r *run) complete(ctx context.Context, lease store.Lease, out Outcome, journal journalState) move {
	raw, res, err := r.record(out, journal)
	if err != nil {
		return r.failed(ctx, "encode", err)
	}
	if err := r.p.cfg.Store.Complete(ctx, lease, raw); err != nil {
		r.log.Warn("store: outcome not recorded; the command will be resumed and confirmed", "err", err)
		return r.wait(ctx, "store", events.StepRetrying, "the store is unavailable; the outcome will be confirmed", r.waitDelay())
	}
	r.reach(crashStored, "outcome")
	attrs := []any{"status", res.Status, "result", res.Result, "reason", res.Reason, "duration", r.p.cfg.Now().Sub(r.started)}
	if res.JournalFinalized != nil {
		attrs = append(attrs, "journal_finalized", *res.JournalFinalized)
	}
	r.log.Info("command finished", attrs...)
	return r.publishResult(ctx, res).because(EventConcluded)
}

// storeDown is a command waiting for an unreachable store: nothing was done.
func (r *run) storeDown(ctx context.Context, err error) move {
	r.log.Warn("store unreachable; waiting", "err", err)
	return r.wait(ctx, "store", events.StepRetrying, "the store is unavailable", r.waitDelay())
}

// wait redelivers the command after delay without spending an attempt, and says so with a
// `waiting` or `retrying` step (contract §3), unless the last step already said the same.
func (r *run) wait(ctx context.Context, stage string, status events.StepStatus, detail string, delay time.Duration) move {
	r.note(ctx, stage, status, detail)
	return r.redeliver(delay)
}

// note publishes a waiting or retrying step unless it is the command's newest step already
// (an earlier delivery, or this one, said the same), so a wait is told once.
func (r *run) note(ctx context.Context, stage string, status events.StepStatus, detail string) {
	if r.last.Step == stage && r.last.Status == status && r.last.Detail == r.scrub(detail) {
		return
	}
	r.step(ctx, stage, status, "", detail)
	r.last = events.Step{Step: stage, Status: status, Detail: r.scrub(detail)}
}

// failed counts a failed attempt made before this delivery claimed the command. After
// MaxAttempts it reads the command's record before it gives up: a finished command is answered
// from its record, one that another delivery claimed (and may have written) waits to be
// resumed, and only one that never claimed is answered 503 attempts_exhausted and
// dead-lettered. Before MaxAttempts it is redelivered after a growing pause.
func (r *run) failed(ctx context.Context, stage string, cause error) move {
	if r.wrote {
		r.log.Warn("failure after a write may have been sent; it will be confirmed by reading", "stage", stage, "err", r.scrub(cause.Error()))
		return r.redeliver(r.waitDelay()).becomes(StateConfirming, EventInterrupted)
	}
	return r.countFailure(ctx, stage, cause, func(n int) move { return r.exhausted(ctx, n, cause) })
}

// exhausted is failed once MaxAttempts attempts failed, n of them counted (see failed).
func (r *run) exhausted(ctx context.Context, n int, cause error) move {
	state, raw, err := r.p.cfg.Store.Record(ctx, r.key())
	switch {
	case err != nil:
		return r.storeDown(ctx, err)
	case state == store.Finished:
		return r.replay(ctx, raw)
	case state == store.Running:
		r.log.Warn("attempts exhausted, but the command is claimed and may have written: it is resumed, not failed")
		return r.redeliver(r.waitDelay())
	}
	return deadLettered(r.answer(ctx, r.exhaustedOutcome(n, cause), noJournal))
}

// deadLettered is m, the answer of exhausted attempts, dead-lettered once its result is
// published.
func deadLettered(m move) move {
	m = m.because(EventExhausted)
	if m.to.Final() && m.disp.Action == events.Ack {
		m.disp = events.Disposition{Action: events.DeadLetter, Reason: ReasonAttemptsExhausted}
	}
	return m
}

// failedClaimed is failed for a claimed command that wrote its journal entry but no Proxmox
// write: the exhausted outcome finalizes the entry and is stored before it is dead-lettered.
func (r *run) failedClaimed(ctx context.Context, lease store.Lease, progress store.Progress, stage string, cause error) move {
	return r.countFailure(ctx, stage, cause, func(n int) move {
		out := r.exhaustedOutcome(n, cause)
		journal := journalState{}
		if progress.JournalID != 0 {
			journal = r.finalize(ctx, progress, out, "")
		}
		return deadLettered(r.complete(ctx, lease, out, journal))
	})
}

// countFailure records one failed attempt and redelivers the command for the next one after a
// growing pause; once the attempts are exhausted it goes on with exhausted and the count.
func (r *run) countFailure(ctx context.Context, stage string, cause error, exhausted func(n int) move) move {
	n, err := r.p.cfg.Store.RecordFailure(ctx, r.key())
	if err != nil {
		r.log.Warn("store: failed attempt not counted; waiting", "err", err)
		return r.redeliver(r.waitDelay())
	}
	r.log.Warn("attempt failed", "stage", stage, "attempt", n, "max_attempts", r.p.cfg.MaxAttempts, "err", r.scrub(cause.Error()))
	if n >= r.p.cfg.MaxAttempts {
		return exhausted(n)
	}
	r.step(ctx, stage, events.StepRetrying, "", fmt.Sprintf("attempt %d of %d failed; the next one follows", n, r.p.cfg.MaxAttempts))
	return r.redeliver(r.backoff(n)).because(EventAttemptFailed)
}

func (r *run) exhaustedOutcome(n int, cause error) Outcome {
	return Outcome{Status: 503, Result: ResultFailed, Reason: ReasonAttemptsExhausted,
		Detail: fmt.Sprintf("%d attempts failed before any Proxmox write; nothing was written; the last failure: %s", n, r.scrub(cause.Error()))}
}

// redeliver is a wait without a step: the message comes back after delay.
func (r *run) redeliver(delay time.Duration) move {
	return move{on: EventWaits, to: StateWaiting, disp: events.Disposition{Action: events.Redeliver, Delay: delay}}
}

// waitDelay is the pause of a command waiting for an unreachable dependency: it grows with the
// deliveries (1s, 2s, 4s, …) up to MaxWait. A command that needs approval is polled every
// ApprovalPoll and so is delivered often without failing: its pause never exceeds
// ApprovalPoll, so that a decision takes effect within seconds whatever happened before.
func (r *run) waitDelay() time.Duration {
	d := r.backoff(int(min(r.delivery.Number, 32)))
	if r.client != nil && r.needsApproval() {
		d = min(d, r.p.cfg.ApprovalPoll)
	}
	return d
}

// backoff is BusyDelay doubled n-1 times, at most MaxWait.
func (r *run) backoff(n int) time.Duration {
	d := r.p.cfg.BusyDelay << min(max(n-1, 0), 16)
	return min(d, r.p.cfg.MaxWait)
}

func (r *run) release(ctx context.Context, lease store.Lease) {
	if err := r.p.cfg.Store.Release(ctx, lease); err != nil && !errors.Is(err, store.ErrLeaseLost) {
		r.log.Warn("store: release failed", "err", err)
	}
}

// keepLease renews the command's lease, its Idempotency-Key record and its guards (one Redis
// script) every third of the lease TTL until the returned stop is called, which waits for the
// renewing goroutine to end.
func (r *run) keepLease(ctx context.Context, lease store.Lease) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-r.p.cfg.After(r.p.cfg.Store.Options().LeaseTTL / 3):
			}
			err := r.p.cfg.Store.Renew(ctx, lease)
			switch {
			case errors.Is(err, store.ErrLeaseLost):
				return // completed (or taken over): nothing left to keep alive
			case errors.Is(err, store.ErrGuardLost):
				// the claim's own fencing keeps the command's records safe
				r.log.Warn("store: a guard expired and was taken by another command", "err", err)
			case err != nil && ctx.Err() == nil:
				r.log.Warn("store: lease renewal failed", "err", err)
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

func (r *run) key() store.CommandKey { return store.CommandKey{Source: r.cmd.Source, ID: r.cmd.ID} }

// owner names this delivery (unique per delivery) in every lease it takes.
func (r *run) owner() string {
	if r.ownerID == "" {
		r.ownerID = fmt.Sprintf("%s/%d/%d", r.p.cfg.Instance, r.delivery.Number, r.p.cfg.Now().UnixNano())
	}
	return r.ownerID
}

// scrub removes this command's secrets and secret-named assignments from text.
func (r *run) scrub(s string) string { return redact.Values(s, r.opened.with(r.prep.secrets)...) }
