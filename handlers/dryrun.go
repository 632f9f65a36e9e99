package handlers

import (
	"context"
	"fmt"

	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/store"
)

// ResultPlanned is the result word of a dry run (contract §4a).
const ResultPlanned = "planned"

// PlanOutput is the output of a dry run.
type PlanOutput struct {
	Plan Plan `json:"plan"`
}

// Plan is what a dry run found (contract §4a): the outcome the command is expected to reach
// and the Proxmox writes it would send, in order. When a write needs the answer of an earlier
// one (the clone's new disks before moving them), the plan stops there: Complete is false,
// Stopped says why, and Outcome is unknown.
type Plan struct {
	Outcome  *PlannedOutcome        `json:"outcome,omitempty"`
	Writes   []proxmox.PlannedWrite `json:"writes"`
	Complete bool                   `json:"complete"`
	Stopped  string                 `json:"stopped,omitempty"`
}

// PlannedOutcome is the outcome a dry run expects: what the command's result would say.
type PlannedOutcome struct {
	Status int      `json:"status"`
	Result string   `json:"result"`
	Reason string   `json:"reason,omitempty"`
	Detail string   `json:"detail,omitempty"`
	Fields []string `json:"fields,omitempty"`
}

func plannedOutcome(out Outcome) *PlannedOutcome {
	return &PlannedOutcome{Status: out.Status, Result: out.Result, Reason: out.Reason, Detail: out.Detail, Fields: out.Fields}
}

// dryRun is contract §4a for a gated, validated (and located) write command: the verb runs
// with a Proxmox client that records its writes instead of sending them, and the command is
// answered 200 planned. Nothing is written anywhere: no Proxmox write, no journal entry, no
// record in the store; no approval is waited for.
func (r *run) dryRun(ctx context.Context) move {
	p, err := r.plan(ctx)
	if err != nil {
		return r.settleBeforeWrite(ctx, "dispatch", err, func(Outcome) move { return r.redeliver(r.waitDelay()) })
	}
	return r.answer(ctx, Outcome{Status: 200, Result: ResultPlanned, Output: PlanOutput{Plan: p}}, noJournal)
}

// plan runs the verb with a Proxmox client that records its writes instead of sending them
// and returns what it found. An error is one that is not the command's outcome (a dependency
// unreachable, a failed attempt): nothing can be planned now. Like a real dispatch, it follows
// a guest that moved since it was located (r.dispatch).
func (r *run) plan(ctx context.Context) (Plan, error) {
	plan := &proxmox.Plan{}
	x := r.exec(nil, store.Progress{})
	x.Proxmox, x.plan = r.client.Planning(plan), plan
	out, err := r.dispatch(ctx, x)
	p := Plan{Writes: plan.Writes()}
	switch {
	case len(p.Writes) > 0 && (err != nil || out.Status >= 300):
		// What went wrong after a planned write was reading what that write would have made.
		last := p.Writes[len(p.Writes)-1]
		why := out.Reason
		if err != nil {
			why = r.scrub(err.Error())
		}
		p.Stopped = fmt.Sprintf("the plan stops after %s %s: what follows needs its answer (%s)", last.Method, last.Path, why)
	case err == nil:
		p.Outcome, p.Complete = plannedOutcome(out), true
	default:
		mapped, class := classify(err)
		if class != final {
			return Plan{}, err
		}
		p.Outcome, p.Complete = plannedOutcome(mapped), true
	}
	if p.Writes == nil {
		p.Writes = []proxmox.PlannedWrite{}
	}
	return p, nil
}

// refusal is the refusal a complete plan expects (a status of 400 or more), if any: the
// outcome the command would reach by reading alone.
func (p Plan) refusal() (Outcome, bool) {
	if !p.Complete || p.Outcome == nil || p.Outcome.Status < 400 {
		return Outcome{}, false
	}
	o := p.Outcome
	return Outcome{Status: o.Status, Result: o.Result, Reason: o.Reason, Detail: o.Detail, Fields: o.Fields}, true
}
