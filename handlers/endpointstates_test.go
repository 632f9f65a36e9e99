package handlers

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/events"
)

// statedClients answers Why for the ids it knows, as an endpoint set read from NetBox does.
type statedClients struct {
	ProxmoxClients
	why map[int64]string // id → detail; transient for every id listed
}

func (s statedClients) Why(id int64) (string, bool) {
	if d, ok := s.why[id]; ok {
		return d, true
	}
	return "NetBox has no ProxmoxEndpoint 9", false
}

// TestGateAsksEndpointStates: with a ProxmoxClients that knows why an endpoint has no client,
// a command on an unusable endpoint waits (a retrying gate step with the reason naming it, no
// result), one on an endpoint NetBox does not have is refused 403 endpoint_not_found with its
// reason, and a command on a usable endpoint runs.
func TestGateAsksEndpointStates(t *testing.T) {
	t.Parallel()
	e := newCrashEnv(t)
	const why = "endpoint 3 (lab3) in NetBox cannot be used: its token secret is missing; set PROXBUS_ENDPOINT_3_TOKEN_SECRET in /etc/proxbus/endpoint-secrets"
	p := e.pipeline("r1", nil)
	p.cfg.Proxmox = statedClients{ProxmoxClients: e.clients, why: map[int64]string{3: why}}
	cmd := func(id string, endpoint int64) events.Command {
		return events.Command{ID: id, Source: "/test/states", Type: events.TypePrefix + "vm.list", Verb: "vm.list",
			EndpointID: endpoint, HasEndpointID: true, Data: json.RawMessage(`{}`)}
	}
	arrived := e.clock.Now()

	wait := cmd("states-wait", 3)
	d := p.Handle(context.Background(), wait, events.Delivery{Number: 1, Stored: arrived, StreamSeq: 1})
	if d.Action == events.Ack || d.Action == events.DeadLetter || d.Delay <= 0 {
		t.Fatalf("unusable endpoint: disposition %+v, want a redelivery", d)
	}
	steps := e.stream.stepsOf(wait.Ref())
	if len(steps) == 0 || steps[len(steps)-1].Step != "gate" || steps[len(steps)-1].Status != events.StepRetrying || steps[len(steps)-1].Detail != why {
		t.Errorf("unusable endpoint: steps %+v, want a retrying gate step saying %q", steps, why)
	}
	if res := e.stream.resultsOf(wait.Ref()); len(res) != 0 {
		t.Errorf("unusable endpoint answered %+v", res)
	}

	gone := cmd("states-gone", 9)
	if d := e.untilDone(p, gone, arrived, 1); d.Action != events.Ack {
		t.Fatalf("unknown endpoint: %+v", d)
	}
	if res := e.stream.resultsOf(gone.Ref()); len(res) != 1 || res[0].Status != 403 || res[0].Reason != ReasonEndpointNotFound ||
		!strings.Contains(res[0].Detail, "ProxmoxEndpoint 9") {
		t.Errorf("unknown endpoint: results %+v", res)
	}

	ok := cmd("states-ok", 1)
	if d := e.untilDone(p, ok, arrived, 1); d.Action != events.Ack {
		t.Fatalf("usable endpoint: %+v", d)
	}
	if res := e.stream.resultsOf(ok.Ref()); len(res) != 1 || res[0].Status != 200 {
		t.Errorf("usable endpoint: results %+v", res)
	}
}
