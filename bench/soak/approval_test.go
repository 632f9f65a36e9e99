package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
)

// TestPlanHotMigrations: with hot guests, the hot share migrates the hot migrants (VM 102,
// whose disks are shared) between nodes, each to another node than the plan's previous
// migration left it on, so that power, snapshot and backup commands queue behind real moves.
func TestPlanHotMigrations(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{1, 2, 3} {
		plan := newGenerator(seed, "r", "canary", 60).withLoad(defaultHotShare, producerNames).plan(450)
		at := map[int64]string{102: "pve3"}
		moves, behind := 0, 0
		for _, p := range plan {
			var d struct {
				VM         int64  `json:"vm"`
				TargetNode string `json:"target_node"`
			}
			if p.poison != nil || json.Unmarshal(p.cmd.Data, &d) != nil || d.VM != 102 {
				continue
			}
			if p.cmd.Verb != "vm.migrate" {
				if moves > 0 {
					behind++
				}
				continue
			}
			if !slices.Contains(pveNodes, d.TargetNode) || p.guest != 102 || p.ops != 1 {
				t.Fatalf("seed %d: %s %s (guest %d, ops %d)", seed, p.cmd.ID, p.cmd.Data, p.guest, p.ops)
			}
			if d.TargetNode != at[p.guest] {
				moves++
			}
			at[p.guest] = d.TargetNode
		}
		if moves < 3 || behind == 0 {
			t.Errorf("seed %d: %d hot migrations that move the guest, %d commands on it after one", seed, moves, behind)
		}
	}
	if slices.ContainsFunc(newGenerator(1, "r", "canary", 60).plan(450), func(p *planned) bool {
		return p.cmd.Verb == "vm.migrate" && p.guest == 102
	}) {
		t.Error("a plan without hot guests migrates VM 102")
	}
}

// TestPlanDecisions: one decision per command of an approval verb that does not expire on its
// own, published as another actor; most approve, some reject, some early, some with a reason;
// the same seed draws the same decisions.
func TestPlanDecisions(t *testing.T) {
	t.Parallel()
	plan := newGenerator(2, "r", "canary", 60).withLoad(defaultHotShare, producerNames).plan(2000)
	verbs := strings.Split(defaultApprovalVerbs, ",")
	decs := planDecisions(plan, verbs, 2, "r")
	var approve, reject, early, reason int
	for _, p := range plan {
		dc, ok := decs[p.cmd.ID]
		if want := p.poison == nil && p.expiresIn == 0 && slices.Contains(verbs, p.cmd.Verb); ok != want {
			t.Fatalf("%s %s (expires in %s): decision %v, want %v", p.cmd.Verb, p.cmd.ID, p.expiresIn, ok, want)
		}
		if !ok {
			continue
		}
		var in struct {
			CommandID     string `json:"command_id"`
			CommandSource string `json:"command_source"`
			Reason        string `json:"reason"`
		}
		if err := json.Unmarshal(dc.cmd.Data, &in); err != nil || in.CommandID != p.cmd.ID || in.CommandSource != p.cmd.Source ||
			dc.cmd.Actor == p.cmd.Actor || dc.decision.target != p || in.Reason != dc.decision.reason {
			t.Fatalf("decision %+v on %s: %s", dc.cmd, p.cmd.ID, dc.cmd.Data)
		}
		switch {
		case dc.cmd.Verb == "command.approve" && dc.decision.approve:
			approve++
		case dc.cmd.Verb == "command.reject" && !dc.decision.approve:
			reject++
		default:
			t.Fatalf("decision %s: verb %s, approve %v", dc.cmd.ID, dc.cmd.Verb, dc.decision.approve)
		}
		if dc.decision.early {
			early++
		}
		if dc.decision.reason != "" {
			reason++
		}
	}
	n := approve + reject
	if n < 50 || reject*8 < n || approve < 2*reject || early*8 < n || reason*4 < n {
		t.Errorf("%d decisions: %d approve, %d reject, %d early, %d with a reason", n, approve, reject, early, reason)
	}
	again := planDecisions(plan, verbs, 2, "r")
	for id, dc := range decs {
		if o := again[id]; o == nil || string(o.cmd.Data) != string(dc.cmd.Data) || o.cmd.Verb != dc.cmd.Verb || o.decision.early != dc.decision.early {
			t.Fatalf("decision on %s drawn differently", id)
		}
	}
}

// TestCheckApprovals pins the judgement of decisions and their targets.
func TestCheckApprovals(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	res := func(id string, status int, result, reason, output string) resultEv {
		return resultEv{eventID: id + ".result", at: t0, res: events.Result{CommandID: id, Status: status, Result: result, Reason: reason,
			Output: json.RawMessage(output)}}
	}
	const reason = "soak r: not in change window 3"
	rejectedEntry := "- command_id: t\n- rejected_by: " + approverActor + "\n- rejected_reason: " + reason + "\n"
	approvedEntry := "- command_id: t\n- approved_by: " + approverActor + "\n"
	delW := written{rec: writeRec{Method: "DELETE", Path: "/nodes/pve1/qemu/1001", At: t0}, resource: "delete:1001", effective: true}
	tests := []struct {
		name     string
		approve  bool
		decision resultEv
		target   *resultEv
		writes   []written
		entries  []string
		wrong    int
		counts   approvalCounts
	}{
		{"approved, ran", true, res("d", 200, "ok", "", `{}`), ptr(res("t", 200, "ok", "", "")), []written{delW}, []string{approvedEntry},
			0, approvalCounts{sent: 1, approved: 1, withReason: 1}},
		{"approved early, ran", true, res("d", 200, "ok", "", `{"early":true}`), ptr(res("t", 200, "ok", "", "")), []written{delW}, []string{approvedEntry},
			0, approvalCounts{sent: 1, approved: 1, early: 1, withReason: 1}},
		{"approved, ran, no approver journaled", true, res("d", 200, "ok", "", `{}`), ptr(res("t", 200, "ok", "", "")), []written{delW}, nil,
			1, approvalCounts{sent: 1, approved: 1, withReason: 1}},
		{"approved, then expired", true, res("d", 200, "ok", "", `{}`), ptr(res("t", 410, "refused", "command_expired", "")), nil, nil,
			1, approvalCounts{sent: 1, approved: 1, withReason: 1}},
		{"approved, answered rejected", true, res("d", 200, "ok", "", `{}`), ptr(res("t", 403, "refused", "approval_rejected", "")), nil, nil,
			2, approvalCounts{sent: 1, approved: 1, withReason: 1}},
		{"approved, refused by its preflight", true, res("d", 200, "ok", "", `{"early":true}`), ptr(res("t", 409, "refused", "vm_protected", "")), nil, nil,
			0, approvalCounts{sent: 1, approved: 1, early: 1, withReason: 1}},
		{"rejected, journaled", false, res("d", 200, "ok", "", `{}`), ptr(res("t", 403, "refused", "approval_rejected", "")), nil, []string{rejectedEntry},
			0, approvalCounts{sent: 1, rejected: 1, withReason: 1}},
		{"rejected, reason not journaled", false, res("d", 200, "ok", "", `{}`), ptr(res("t", 403, "refused", "approval_rejected", "")), nil,
			[]string{"- command_id: t\n- rejected_by: " + approverActor + "\n"}, 1, approvalCounts{sent: 1, rejected: 1, withReason: 1}},
		{"rejected, yet it wrote", false, res("d", 200, "ok", "", `{}`), ptr(res("t", 403, "refused", "approval_rejected", "")), []written{delW},
			[]string{rejectedEntry}, 1, approvalCounts{sent: 1, rejected: 1, withReason: 1}},
		{"rejected, yet answered ok", false, res("d", 200, "ok", "", `{}`), ptr(res("t", 200, "ok", "", "")), nil, nil,
			1, approvalCounts{sent: 1, rejected: 1, withReason: 1}},
		{"rejected, nothing to do", false, res("d", 200, "ok", "", `{"early":true}`), ptr(res("t", 200, "already_absent", "", "")), nil, nil,
			0, approvalCounts{sent: 1, rejected: 1, early: 1, withReason: 1}},
		{"decision refused, target finished", false, res("d", 409, "refused", "not_awaiting_approval", `{}`), ptr(res("t", 404, "refused", "vm_not_found", "")),
			nil, nil, 0, approvalCounts{sent: 1, refused: 1}},
		{"decision refused, target answered rejected", true, res("d", 409, "refused", "not_awaiting_approval", `{}`),
			ptr(res("t", 403, "refused", "approval_rejected", "")), nil, nil, 1, approvalCounts{sent: 1, refused: 1}},
		{"decision without an answer", true, resultEv{}, ptr(res("t", 200, "ok", "", "")), nil, nil, 0, approvalCounts{sent: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			target := cmd("t", "vm.delete", `{"vm":1001,"stop_first":true}`, "")
			d := cmd("d", "command.reject", `{}`, "")
			d.decision = &decisionRef{target: target, approve: tt.approve, reason: reason}
			c := &collected{results: map[string][]resultEv{}}
			if tt.decision.eventID != "" {
				c.results["d"] = []resultEv{tt.decision}
			}
			if tt.target != nil {
				c.results["t"] = []resultEv{*tt.target}
			}
			rep := &report{}
			rep.checkApprovals([]*planned{target, d}, c, map[string][]written{"t": tt.writes}, map[string][]string{"t": tt.entries})
			if len(rep.approvalWrong) != tt.wrong || rep.approvals != tt.counts {
				t.Errorf("wrong %q, counts %+v; want %d wrong, %+v", rep.approvalWrong, rep.approvals, tt.wrong, tt.counts)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestEntryComments maps journal comments to their commands.
func TestEntryComments(t *testing.T) {
	t.Parallel()
	got := entryComments([]string{"- command_id: a\nx", "no id", "- command_id: a\ny", "- command_id: b\n"})
	if fmt.Sprint(len(got["a"]), len(got["b"]), len(got)) != "2 1 2" {
		t.Errorf("entryComments = %q", got)
	}
}
