package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/store"
)

// Reasons of the two-person rule (contract §4b, §9 command.approve and command.reject).
const (
	// ReasonApprovalRejected: the command was rejected by a second person and did nothing.
	ReasonApprovalRejected = "approval_rejected"
	// ReasonCommandNotFound: no command awaiting approval has that source and id.
	ReasonCommandNotFound = "command_not_found"
	// ReasonNotAwaitingApproval: the command's approval was already decided otherwise.
	ReasonNotAwaitingApproval = "not_awaiting_approval"
	// ReasonApproverIsRequester: nobody decides on their own command.
	ReasonApproverIsRequester = "approver_is_requester"
)

// DefaultApprovalPoll is the default of [Settings.ApprovalPoll].
const DefaultApprovalPoll = 2 * time.Second

// awaitingApproval is the detail of the waiting step of a command awaiting approval.
const awaitingApproval = "awaiting approval"

// DecisionInput is the data of command.approve, command.reject and command.cancel: the
// command decided on, and why (optional; journaled with the decision, in a cancelled
// command's result).
type DecisionInput struct {
	CommandID     string `json:"command_id"`
	CommandSource string `json:"command_source"`
	Reason        string `json:"reason,omitempty"`
}

// maxDecisionReason is the longest reason a decision may give, in bytes.
const maxDecisionReason = 1024

// DecisionOutput is the output of command.approve and command.reject: the command decided on,
// its verb and requester when it is known, and the decision once made.
type DecisionOutput struct {
	CommandID     string `json:"command_id"`
	CommandSource string `json:"command_source"`
	Verb          string `json:"verb,omitempty"`
	Requester     string `json:"requester,omitempty"`
	Decision      string `json:"decision,omitempty"`
	Reason        string `json:"reason,omitempty"`
	// Early is true when the command had not asked for its approval yet: the decision is kept
	// and applies when it does.
	Early bool `json:"early,omitempty"`
}

// CommandApprove approves a command awaiting approval (contract §4b): it runs on its next
// delivery. The approver is the approving command's actor, who must not be the requester.
func CommandApprove() Verb { return decisionVerb("command.approve", store.DecisionApproved) }

// CommandReject rejects a command awaiting approval: it is answered 403 approval_rejected and
// does nothing.
func CommandReject() Verb { return decisionVerb("command.reject", store.DecisionRejected) }

func decisionVerb(name string, decision store.Decision) Verb {
	return Spec[DecisionInput]{
		Name:     name,
		Access:   Control,
		Decode:   decodeDecision,
		Resource: func(in DecisionInput) string { return in.CommandSource + " " + in.CommandID },
		Dispatch: func(ctx context.Context, x *Exec, in DecisionInput) (Outcome, error) {
			return x.r.decide(ctx, store.CommandKey{Source: in.CommandSource, ID: in.CommandID}, decision, in.Reason)
		},
	}
}

// decodeDecision reads the data of command.approve, command.reject and command.cancel.
func decodeDecision(f *Fields) DecisionInput {
	return DecisionInput{
		CommandID:     f.String("command_id", true, validCommandToken),
		CommandSource: f.String("command_source", true, validCommandToken),
		Reason: f.String("reason", false, func(s string) bool {
			return len(s) <= maxDecisionReason && validCommandToken(s)
		}),
	}
}

// validCommandToken accepts a command id or source as the envelope allows them: non-empty,
// printable, without surrounding space.
func validCommandToken(s string) bool {
	return s != "" && s == strings.TrimSpace(s) && !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// decide records the decision of this command's actor, with reason, on the target command's
// approval. A decision on a command that has not asked for its approval yet is kept and
// applies when it does (contract §4b).
func (r *run) decide(ctx context.Context, target store.CommandKey, decision store.Decision, reason string) (Outcome, error) {
	a, err := r.p.cfg.Store.Decide(ctx, target, decision, r.actor(), reason)
	output := DecisionOutput{CommandID: target.ID, CommandSource: target.Source, Verb: a.Verb, Requester: a.Requester}
	switch {
	case errors.Is(err, store.ErrFinished):
		return Outcome{Status: 409, Result: ResultRefused, Reason: ReasonNotAwaitingApproval,
			Detail: "the command has finished; there is nothing left to decide (proxbus events --id shows its result)", Output: output}, nil
	case errors.Is(err, store.ErrSelfApproval):
		return Outcome{Status: 403, Result: ResultRefused, Reason: ReasonApproverIsRequester,
			Detail: "the command was requested by " + a.Requester + ", who cannot decide on it; another actor must", Output: output}, nil
	case errors.Is(err, store.ErrDecided):
		return Outcome{Status: 409, Result: ResultRefused, Reason: ReasonNotAwaitingApproval,
			Detail: "already " + string(a.Decision) + " by " + a.Decider, Output: output}, nil
	case err != nil:
		return Outcome{}, errors.Join(errTransient, err)
	}
	output.Decision, output.Reason, output.Early = string(a.Decision), a.Reason, a.Early
	r.log.Info("approval decided", "target_command_id", target.ID, "target_command_source", target.Source, "decision", a.Decision,
		"decider", a.Decider, "early", a.Early)
	out := Outcome{Status: 200, Result: ResultOK, Output: output}
	if a.Early {
		out.Detail = "no command with this source and id has asked for approval yet; the decision is kept for " +
			r.p.cfg.Store.Options().DedupeTTL.String() + " and applies when it does (unless it is its requester's own)"
	}
	return out, nil
}

// control runs a control verb (command.approve, command.reject): no endpoint, no Proxmox, no
// journal of its own. Its outcome is stored under its identity, so a redelivery or a
// duplicate is answered the same.
func (r *run) control(ctx context.Context) move {
	return r.fromRecord(ctx, r.controlNow)
}

// controlNow runs a control verb that has no stored outcome.
func (r *run) controlNow(ctx context.Context) move {
	prep, invalid := r.verb.prepareSealed(r.cmd.Data, r.p.sealing())
	r.prep = prep
	if invalid != nil {
		return r.answer(ctx, *invalid, noJournal)
	}
	out, err := r.prep.dispatch(ctx, r.exec(nil, store.Progress{}))
	if err != nil {
		return r.storeDown(ctx, err)
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
	}
	return r.publishResult(ctx, res)
}

// awaitApproval is contract §4b for a gated, validated and located command whose endpoint
// lists its verb: it waits, holding no lease and spending no attempt, until a second person
// decides. Before it asks, it runs the command as a dry run: a command bound to be refused (a
// running or protected guest, a migration precondition, a missing storage) is refused at once,
// journaled, without asking anyone; otherwise the plan is kept with the approval and published
// with the waiting step, for the approvers. It reports false once the command is approved
// (r.approval says by whom) and goes on with approved; otherwise it waits, is refused, or
// rejected.
func (r *run) awaitApproval(ctx context.Context, approved stage) move {
	if r.delivery.Number <= 1 {
		// cancelled (or answered) before its first delivery: no approval is asked for it
		return r.fromRecord(ctx, func(ctx context.Context) move { return r.askApproval(ctx, approved) })
	}
	return r.askApproval(ctx, approved)
}

// askApproval is awaitApproval once the command is known to have no stored outcome.
func (r *run) askApproval(ctx context.Context, approved stage) move {
	var planJSON json.RawMessage
	if r.approval == nil || r.approval.Decision == store.DecisionPending {
		p, err := r.plan(ctx)
		if err != nil {
			return r.settleBeforeWrite(ctx, "preflight", err, func(Outcome) move { return r.redeliver(r.waitDelay()) })
		}
		if out, refused := p.refusal(); refused {
			r.log.Info("refused by its preflight; no approval asked", "reason", out.Reason)
			if err := r.p.cfg.Store.DropApproval(ctx, r.key()); err != nil {
				r.log.Warn("store: the refused command's approval not removed", "err", err)
			}
			return r.refuseJournaled(ctx, out, r.journalTarget)
		}
		if planJSON, err = json.Marshal(p); err != nil {
			return r.failed(ctx, "encode", err)
		}
	}
	a, err := r.p.cfg.Store.RequestApproval(ctx, store.Approval{
		Command: r.key(), Verb: r.cmd.Verb, EndpointID: r.cmd.EndpointID, Requester: r.actor(),
		Summary: r.summary(), Expires: r.deadline(), Plan: planJSON,
	})
	if err != nil {
		return r.storeDown(ctx, err)
	}
	switch a.Decision {
	case store.DecisionApproved:
		r.approval = &a
		return approved(ctx)
	case store.DecisionRejected:
		r.approval = &a
		detail := "rejected by " + a.Decider + "; nothing was done"
		if a.Reason != "" {
			detail = "rejected by " + a.Decider + " (" + a.Reason + "); nothing was done"
		}
		out := Outcome{Status: 403, Result: ResultRefused, Reason: ReasonApprovalRejected, Detail: detail}
		return r.refuseJournaled(ctx, out, r.journalTarget)
	}
	if !(r.last.Step == "approval" && r.last.Status == events.StepWaiting && r.last.Detail == awaitingApproval) {
		r.publishStep(ctx, events.Step{Step: "approval", Status: events.StepWaiting, Detail: awaitingApproval, Plan: planJSON})
		r.last = events.Step{Step: "approval", Status: events.StepWaiting, Detail: awaitingApproval}
	}
	return r.redeliver(r.p.cfg.ApprovalPoll).becomes(StateAwaitingApproval, EventApprovalPending)
}

// decidedInTime reports whether the command has an approval decided at or before its
// deadline: such a command is not expired by a late delivery (a decision taken in time takes
// effect), approved or rejected. An early decision does not count: the command never waited.
func (r *run) decidedInTime(ctx context.Context) (bool, error) {
	if r.verb.VerbAccess() != Write || r.cmd.DryRun {
		return false, nil
	}
	a, err := r.p.cfg.Store.Approval(ctx, r.key())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	d := r.deadline()
	return a.Decision != store.DecisionPending && !a.Early && !d.IsZero() && !a.DecidedAt.After(d), nil
}

// needsApproval reports whether the command must wait for a second person: a write, not a dry
// run, whose endpoint lists its verb.
func (r *run) needsApproval() bool {
	return r.verb.VerbAccess() == Write && !r.cmd.DryRun && r.client.Endpoint().Approval.Needs(r.cmd.Verb)
}

// stillAwaiting answers a redelivery of a command whose approval is still pending: it waits on,
// without locating its object again. A command with no approval yet, or whose approval was
// decided (r.approval is then the decision, so that the command is not checked again before
// its approval is looked up), goes on with next.
func (r *run) stillAwaiting(ctx context.Context, next stage) move {
	a, err := r.p.cfg.Store.Approval(ctx, r.key())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return next(ctx)
	case err != nil:
		return r.storeDown(ctx, err)
	case a.Decision != store.DecisionPending:
		if !a.Early {
			r.approval = &a
		}
		return next(ctx)
	}
	return r.wait(ctx, "approval", events.StepWaiting, awaitingApproval, r.p.cfg.ApprovalPoll).becomes(StateAwaitingApproval, EventApprovalPending)
}

// summary says what the command would do, from its journal bullets (never a secret).
func (r *run) summary() string {
	parts := []string{r.cmd.Verb}
	for _, b := range r.prep.bullets {
		parts = append(parts, b.Name+"="+b.Value)
	}
	return r.scrub(strings.Join(parts, " "))
}

// approvalBullets are the journal bullets of the command's approval decision, if any.
func (r *run) approvalBullets() []Bullet {
	if r.approval == nil || r.approval.Decider == "" {
		return nil
	}
	d := string(r.approval.Decision)
	b := []Bullet{{d + "_by", r.approval.Decider}, {d + "_at", r.approval.DecidedAt.UTC().Format(time.RFC3339)}}
	if r.approval.Reason != "" {
		b = append(b, Bullet{d + "_reason", r.approval.Reason})
	}
	return b
}

// ErrApprovalVerb: an endpoint's approval list names a verb that is not a write verb.
var ErrApprovalVerb = errors.New("handlers: approval lists a verb that is not a write verb")

// CheckApprovalVerbs reports the names in an endpoint's approval list that are not write verbs
// of r (an unknown name, a read, a control verb), with the closest write verbs.
func (r *Registry) CheckApprovalVerbs(verbs []string) error {
	var writes []string
	for _, name := range r.Names() {
		if v, _ := r.Lookup(name); v.VerbAccess() == Write {
			writes = append(writes, name)
		}
	}
	var errs []error
	for _, name := range verbs {
		if v, ok := r.Lookup(name); ok && v.VerbAccess() == Write {
			continue
		}
		hint := ""
		if close := closestNames(name, writes, 3); len(close) > 0 {
			hint = " (did you mean " + strings.Join(close, ", ") + "?)"
		}
		errs = append(errs, fmt.Errorf("%w: %q%s", ErrApprovalVerb, name, hint))
	}
	return errors.Join(errs...)
}
