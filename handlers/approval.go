package handlers

import (
	"context"
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

// DecisionInput is the data of command.approve and command.reject: the command decided on.
type DecisionInput struct {
	CommandID     string `json:"command_id"`
	CommandSource string `json:"command_source"`
}

// DecisionOutput is the output of command.approve and command.reject: the command decided on,
// its verb and requester when it is known, and the decision once made.
type DecisionOutput struct {
	CommandID     string `json:"command_id"`
	CommandSource string `json:"command_source"`
	Verb          string `json:"verb,omitempty"`
	Requester     string `json:"requester,omitempty"`
	Decision      string `json:"decision,omitempty"`
}

// CommandApprove approves a command awaiting approval (contract §4b): it runs on its next
// delivery. The approver is the approving command's actor, who must not be the requester.
func CommandApprove() Verb { return decisionVerb("command.approve", store.DecisionApproved) }

// CommandReject rejects a command awaiting approval: it is answered 403 approval_rejected and
// does nothing.
func CommandReject() Verb { return decisionVerb("command.reject", store.DecisionRejected) }

func decisionVerb(name string, decision store.Decision) Verb {
	return Spec[DecisionInput]{
		Name:   name,
		Access: Control,
		Decode: func(f *Fields) DecisionInput {
			return DecisionInput{
				CommandID:     f.String("command_id", true, validCommandToken),
				CommandSource: f.String("command_source", true, validCommandToken),
			}
		},
		Resource: func(in DecisionInput) string { return in.CommandSource + " " + in.CommandID },
		Dispatch: func(ctx context.Context, x *Exec, in DecisionInput) (Outcome, error) {
			return x.r.decide(ctx, store.CommandKey{Source: in.CommandSource, ID: in.CommandID}, decision)
		},
	}
}

// validCommandToken accepts a command id or source as the envelope allows them: non-empty,
// printable, without surrounding space.
func validCommandToken(s string) bool {
	return s != "" && s == strings.TrimSpace(s) && !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// decide records the decision of this command's actor on the target command's approval.
func (r *run) decide(ctx context.Context, target store.CommandKey, decision store.Decision) (Outcome, error) {
	a, err := r.p.cfg.Store.Decide(ctx, target, decision, r.actor())
	output := DecisionOutput{CommandID: target.ID, CommandSource: target.Source, Verb: a.Verb, Requester: a.Requester}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Outcome{Status: 404, Result: ResultRefused, Reason: ReasonCommandNotFound,
			Detail: "no command with this source and id is awaiting approval (proxbus pending lists them)"}, nil
	case errors.Is(err, store.ErrSelfApproval):
		return Outcome{Status: 403, Result: ResultRefused, Reason: ReasonApproverIsRequester,
			Detail: "the command was requested by " + a.Requester + ", who cannot decide on it; another actor must", Output: output}, nil
	case errors.Is(err, store.ErrDecided):
		return Outcome{Status: 409, Result: ResultRefused, Reason: ReasonNotAwaitingApproval,
			Detail: "already " + string(a.Decision) + " by " + a.Decider, Output: output}, nil
	case err != nil:
		return Outcome{}, errors.Join(errTransient, err)
	}
	output.Decision = string(a.Decision)
	r.log.Info("approval decided", "target_command_id", target.ID, "target_command_source", target.Source, "decision", a.Decision, "decider", a.Decider)
	return Outcome{Status: 200, Result: ResultOK, Output: output}, nil
}

// control runs a control verb (command.approve, command.reject): no endpoint, no Proxmox, no
// journal of its own. Its outcome is stored under its identity, so a redelivery or a
// duplicate is answered the same.
func (r *run) control(ctx context.Context) events.Disposition {
	if disp, done := r.fromRecord(ctx); done {
		return disp
	}
	prep, invalid := r.verb.prepare(r.cmd.Data)
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

// awaitApproval is contract §4b for a gated, validated command whose endpoint lists its verb:
// it waits, holding no lease and spending no attempt, until a second person decides. It
// reports false once the command is approved (r.approval says by whom); otherwise the
// disposition: still waiting, or the rejection answered.
func (r *run) awaitApproval(ctx context.Context) (events.Disposition, bool) {
	a, err := r.p.cfg.Store.RequestApproval(ctx, store.Approval{
		Command: r.key(), Verb: r.cmd.Verb, EndpointID: r.cmd.EndpointID, Requester: r.actor(),
		Summary: r.summary(), Expires: r.deadline(),
	})
	if err != nil {
		return r.storeDown(ctx, err), true
	}
	switch a.Decision {
	case store.DecisionApproved:
		r.approval = &a
		return events.Disposition{}, false
	case store.DecisionRejected:
		r.approval = &a
		out := Outcome{Status: 403, Result: ResultRefused, Reason: ReasonApprovalRejected,
			Detail: "rejected by " + a.Decider + "; nothing was done"}
		return r.refuseJournaled(ctx, out, r.journalTarget), true
	}
	return r.wait(ctx, "approval", events.StepWaiting, awaitingApproval, r.p.cfg.ApprovalPoll), true
}

// needsApproval reports whether the command must wait for a second person: a write, not a dry
// run, whose endpoint lists its verb.
func (r *run) needsApproval() bool {
	return r.verb.VerbAccess() == Write && !r.cmd.DryRun && r.client.Endpoint().Approval.Needs(r.cmd.Verb)
}

// stillAwaiting answers a redelivery of a command whose approval is still pending: it waits on,
// without locating its object again. It reports false when the command has no approval yet or
// it was decided.
func (r *run) stillAwaiting(ctx context.Context) (events.Disposition, bool) {
	a, err := r.p.cfg.Store.Approval(ctx, r.key())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return events.Disposition{}, false
	case err != nil:
		return r.storeDown(ctx, err), true
	case a.Decision != store.DecisionPending:
		return events.Disposition{}, false
	}
	return r.wait(ctx, "approval", events.StepWaiting, awaitingApproval, r.p.cfg.ApprovalPoll), true
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
	at := r.approval.DecidedAt.UTC().Format(time.RFC3339)
	return []Bullet{{string(r.approval.Decision) + "_by", r.approval.Decider}, {string(r.approval.Decision) + "_at", at}}
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
