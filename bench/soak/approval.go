package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/events"
)

// The two-person rule of the soak's endpoint (contract §4b): the verbs that need a second
// person, and who that is.
const (
	defaultApprovalVerbs = "vm.delete,vm.snapshot.delete"
	approverActor        = "soak-approver"
	// decisionFallback is how long after its target's publication a decision is sent when the
	// target's "awaiting approval" step was not seen (a step lost with the events leader, or a
	// target still queued): it then arrives early, which a decision may (§4b).
	decisionFallback = 10 * time.Second
)

// decisionRef is what a command.approve or command.reject of the plan decides: its target,
// approve or reject, and the reason given ("" when none).
type decisionRef struct {
	target  *planned
	approve bool
	reason  string
	// early: published right before its target (decided before the command is delivered);
	// otherwise delay after the target's "awaiting approval" step is seen.
	early bool
	delay time.Duration
}

// planDecisions draws, from its own random stream (so the commands of the plan do not depend
// on it), one decision for every command of plan whose verb is in verbs and that does not
// expire on its own: three in four approve, one in four reject, half of them with a reason;
// three in ten are published right before their target (early), the others 0.2–4 s after the
// target asks for its approval. It returns the decision commands by target id.
func planDecisions(plan []*planned, verbs []string, seed uint64, run string) map[string]*planned {
	rnd := rand.New(rand.NewPCG(seed^0xdec1de, seed))
	out := map[string]*planned{}
	for _, t := range plan {
		if t.poison != nil || t.expiresIn > 0 || !slices.Contains(verbs, t.cmd.Verb) || out[t.cmd.ID] != nil {
			continue
		}
		d := &decisionRef{target: t, approve: rnd.Float64() < 0.75, early: rnd.Float64() < 0.3,
			delay: 200*time.Millisecond + time.Duration(rnd.Int64N(int64(3800*time.Millisecond)))}
		if rnd.Float64() < 0.5 {
			d.reason = fmt.Sprintf("soak %s: change window %d", run, 1+rnd.IntN(99))
			if !d.approve {
				d.reason = fmt.Sprintf("soak %s: not in change window %d", run, 1+rnd.IntN(99))
			}
		}
		verb := "command.reject"
		if d.approve {
			verb = "command.approve"
		}
		data, _ := json.Marshal(struct {
			CommandID     string `json:"command_id"`
			CommandSource string `json:"command_source"`
			Reason        string `json:"reason,omitempty"`
		}{t.cmd.ID, t.cmd.Source, d.reason})
		out[t.cmd.ID] = &planned{
			cmd: events.Command{ID: t.cmd.ID + "-decision", Source: soakSource, Verb: verb, Type: "proxbus." + verb,
				EndpointID: 1, HasEndpointID: true, Actor: approverActor, Data: data},
			producer: producerNATSGo, decision: d,
		}
	}
	return out
}

// decider is the second person of the soak: it publishes the planned decisions, the early
// ones right before their target (before), the others once the target's "awaiting approval"
// step is seen, after their delay (run). A decision whose target already has an outcome is not
// sent. run is owned by the soak's run, which waits for it.
type decider struct {
	pb       *publisher
	byTarget map[string]*planned
	done     func(id string) bool // whether a command has an outcome (the tracker's live view)

	mu       sync.Mutex
	awaiting map[string]time.Time // target id → when its awaiting-approval step was seen
	sent     []*planned           // decisions published, in order
	sentIDs  map[string]bool      // target ids whose decision was published
	skipped  int                  // decisions not sent: their target had an outcome
	sub      *nats.Subscription
}

// newDecider subscribes to the step events (core NATS, best effort: a step missed is made up
// for by decisionFallback).
func newDecider(nc *nats.Conn, s events.Subjects, pb *publisher, byTarget map[string]*planned, done func(string) bool) (*decider, error) {
	d := &decider{pb: pb, byTarget: byTarget, done: done, awaiting: map[string]time.Time{}, sentIDs: map[string]bool{}}
	sub, err := nc.Subscribe(s.Step("*"), func(m *nats.Msg) {
		ev, err := events.ParseEvent(m.Data)
		if err != nil {
			return
		}
		var st events.Step
		if json.Unmarshal(ev.Data, &st) != nil || st.Step != "approval" || st.Status != events.StepWaiting ||
			!strings.Contains(st.Detail, "awaiting approval") {
			return
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if _, ok := d.awaiting[st.CommandID]; !ok {
			d.awaiting[st.CommandID] = time.Now()
		}
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe to steps: %w", err)
	}
	d.sub = sub
	return d, nil
}

// before publishes p's early decision, if it has one: the publisher calls it right before p.
func (d *decider) before(ctx context.Context, p *planned) error {
	dc := d.byTarget[p.cmd.ID]
	if dc == nil || !dc.decision.early {
		return nil
	}
	return d.send(ctx, dc)
}

// send publishes decision dc once.
func (d *decider) send(ctx context.Context, dc *planned) error {
	id := dc.decision.target.cmd.ID
	d.mu.Lock()
	if d.sentIDs[id] {
		d.mu.Unlock()
		return nil
	}
	d.sentIDs[id] = true
	d.mu.Unlock()
	if err := d.pb.publishOne(ctx, dc, false); err != nil {
		return err
	}
	d.mu.Lock()
	d.sent = append(d.sent, dc)
	d.mu.Unlock()
	return nil
}

// run sends the late decisions until ctx ends: each delay after its target's awaiting step,
// or decisionFallback after its target's publication when no step was seen; none for a
// target that has an outcome. It returns the first publish error.
func (d *decider) run(ctx context.Context) error {
	defer func() { _ = d.sub.Unsubscribe() }()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		for id, dc := range d.byTarget {
			d.mu.Lock()
			seenAt, seen := d.awaiting[id]
			sent := d.sentIDs[id]
			d.mu.Unlock()
			d.pb.mu.Lock()
			pubAt, published := d.pb.published[id]
			d.pb.mu.Unlock()
			switch {
			case sent || !published:
				continue
			case d.done(id):
				d.mu.Lock()
				d.sentIDs[id] = true
				d.skipped++
				d.mu.Unlock()
				continue
			case seen && time.Since(seenAt) >= dc.decision.delay, time.Since(pubAt) >= decisionFallback:
				if err := d.send(ctx, dc); err != nil && ctx.Err() == nil {
					return err
				}
			}
		}
	}
}

// published returns the decisions published so far.
func (d *decider) published() []*planned {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.sent)
}

// approvalCounts are the figures of the two-person rule in a run.
type approvalCounts struct {
	sent, approved, rejected, early, refused, skipped int
	withReason                                        int
	// slowest is the longest time from a taken decision's answer to its command's answer, for
	// decisions the command was waiting for (not early ones): a decision takes effect within
	// seconds (§4b).
	slowest   time.Duration
	slowestOf string // the command of slowest
}

// firstAnswer is the earliest first-hand result of rs (nil: none).
func firstAnswer(rs []resultEv) *resultEv {
	var out *resultEv
	for i, r := range rs {
		if !r.res.Replayed && (out == nil || r.at.Before(out.at)) {
			out = &rs[i]
		}
	}
	return out
}

// checkApprovals judges the decisions of the plan (planned.decision) and the answers of
// their targets (contract §4b):
//   - an accepted approval (200): its target is not answered 403 approval_rejected nor 410
//     command_expired (its decision was in time), and when it wrote, its journal entry names
//     the approver;
//   - an accepted rejection: its target wrote nothing and is answered 403 approval_rejected,
//     journaled with the decider (and the reason given), or answered, without a write, what
//     its preflight found (a refusal, or nothing to do);
//   - a command answered 403 approval_rejected has an accepted rejection.
//
// Duplicate writes and lost answers of approved commands are the other checks' business.
// comments maps a command id to its journal entries' comments.
func (rep *report) checkApprovals(plan []*planned, c *collected, attr map[string][]written, comments map[string][]string) {
	rejectedBy := map[string]bool{} // target id → an accepted rejection
	for _, p := range plan {
		dr := p.decision
		if dr == nil {
			continue
		}
		rep.approvals.sent++
		a := firstAnswer(c.results[p.cmd.ID])
		if a == nil {
			continue // lost, or without a first-hand result: counted by those checks
		}
		if a.res.Status != 200 {
			rep.approvals.refused++
			continue
		}
		var out struct {
			Early bool `json:"early"`
		}
		_ = json.Unmarshal(a.res.Output, &out)
		if out.Early {
			rep.approvals.early++
		}
		if dr.reason != "" {
			rep.approvals.withReason++
		}
		t := dr.target
		if dr.approve {
			rep.approvals.approved++
		} else {
			rep.approvals.rejected++
			rejectedBy[t.cmd.ID] = true
		}
		ta := firstAnswer(c.results[t.cmd.ID])
		if ta == nil {
			continue
		}
		if d := ta.at.Sub(a.at); !out.Early && d > rep.approvals.slowest {
			rep.approvals.slowest, rep.approvals.slowestOf = d, t.cmd.ID
		}
		r, ws := ta.res, attr[t.cmd.ID]
		who := fmt.Sprintf("%s %s (%s by %s at %s)", t.cmd.Verb, t.cmd.ID, strings.TrimPrefix(p.cmd.Verb, "command."), p.cmd.ID,
			a.at.Format("15:04:05.000"))
		journaled := func(bullets ...string) bool {
			return slices.ContainsFunc(comments[t.cmd.ID], func(s string) bool {
				for _, b := range bullets {
					if !strings.Contains(s, b) {
						return false
					}
				}
				return true
			})
		}
		wrong := ""
		switch {
		case dr.approve && r.Reason == "approval_rejected":
			wrong = "answered 403 approval_rejected"
		case dr.approve && r.Reason == "command_expired":
			wrong = fmt.Sprintf("answered 410 command_expired at %s although approved in time", ta.at.Format("15:04:05.000"))
		case dr.approve && len(ws) > 0 && !journaled("- approved_by: "+approverActor):
			wrong = fmt.Sprintf("it wrote (%s) but no journal entry names its approver", ws[0])
		case dr.approve:
		case len(ws) > 0:
			wrong = fmt.Sprintf("rejected, yet it wrote %d: %s", len(ws), ws[0])
		case r.Reason == "approval_rejected":
			want := []string{"- rejected_by: " + approverActor}
			if dr.reason != "" {
				want = append(want, "- rejected_reason: "+dr.reason)
			}
			if !journaled(want...) {
				wrong = "answered 403 approval_rejected, but no journal entry says " + strings.Join(want, ", ")
			}
		case succeeded(r) && !noOpWords[r.Result]:
			wrong = fmt.Sprintf("rejected, yet answered %d %s %s", r.Status, r.Result, r.Reason)
		}
		if wrong != "" {
			rep.approvalWrong = append(rep.approvalWrong, who+": "+wrong)
		}
	}
	for _, p := range plan {
		if a := firstAnswer(c.results[p.cmd.ID]); a != nil && a.res.Reason == "approval_rejected" && !rejectedBy[p.cmd.ID] {
			rep.approvalWrong = append(rep.approvalWrong, fmt.Sprintf("%s %s: answered 403 approval_rejected, but no rejection of it was accepted",
				p.cmd.Verb, p.cmd.ID))
		}
	}
}

// noOpWords are the result words of a success that found nothing to do.
var noOpWords = map[string]bool{"already_present": true, "already_absent": true, "already_running": true, "already_stopped": true}

// entryComments maps every command id to its journal entries' comments.
func entryComments(comments []string) map[string][]string {
	out := map[string][]string{}
	for _, s := range comments {
		if id := commandOf(s); id != "" {
			out[id] = append(out[id], s)
		}
	}
	return out
}
