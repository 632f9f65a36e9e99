package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
)

// firstVMID is the vmid of guest 0.
const firstVMID = 10000

// nodes are the simulators' nodes (every scenario has them).
var nodes = []string{"pve1", "pve2", "pve3"}

// guest is one guest of the fleet.
type guest struct {
	index    int
	vmid     int64
	endpoint int // 0-based; the endpoint id is endpoint+1
	node     string
}

func (g guest) name() string { return fmt.Sprintf("fleet-%d", g.index) }

// fleetGuests returns n guests spread round-robin over the endpoints (guest i on endpoint
// i mod endpoints) and within an endpoint over its nodes.
func fleetGuests(n, endpoints int) []guest {
	out := make([]guest, n)
	for i := range out {
		out[i] = guest{index: i, vmid: int64(firstVMID + i), endpoint: i % endpoints, node: nodes[(i/endpoints)%len(nodes)]}
	}
	return out
}

// planned is one command of a run.
type planned struct {
	id    string
	guest guest
	// hot is set for a command on one of the hot guests of a hot run.
	hot bool
}

// plan returns n commands in publishing order. Without hot share the commands cycle over
// every guest (so a guest's commands are len(guests) apart in the stream and each endpoint
// gets a third). With hotShare h, a share h of the positions, spread evenly, goes to the first
// hotGuests guests, and the rest cycles over the others. The hot commands cycle over the
// endpoints first and then over that endpoint's hot guests, so that every endpoint still
// gets the same share of the work (the hot guests of an endpoint with more of them each get
// fewer commands).
func plan(run string, n int, guests []guest, endpoints, hotGuests int, hotShare float64) []planned {
	cold := guests
	var hotBy [][]guest
	if hotShare > 0 {
		cold = guests[hotGuests:]
		hotBy = make([][]guest, endpoints)
		for _, g := range guests[:hotGuests] {
			hotBy[g.endpoint] = append(hotBy[g.endpoint], g)
		}
	}
	out := make([]planned, n)
	var nHot, nCold int
	perEndpoint := make([]int, endpoints)
	for p := range out {
		out[p].id = fmt.Sprintf("%s-%d", run, p)
		// position p is hot when floor((p+1)·h) steps past floor(p·h): h of them, evenly.
		if hotShare > 0 && int(float64(p+1)*hotShare) > int(float64(p)*hotShare) {
			ep := nHot % endpoints
			for len(hotBy[ep]) == 0 { // an endpoint without a hot guest (fewer hot guests than endpoints)
				ep = (ep + 1) % endpoints
			}
			out[p].guest = hotBy[ep][perEndpoint[ep]%len(hotBy[ep])]
			out[p].hot = true
			perEndpoint[ep]++
			nHot++
			continue
		}
		out[p].guest = cold[nCold%len(cold)]
		nCold++
	}
	return out
}

// command is the vm.snapshot.create of p: one Proxmox task on its guest, a new snapshot name
// each time (so every command takes a snapshot and none is answered already_present). The
// name is the id without its "-" (the simulator, like PVE's pve-configid, may refuse it).
func (p planned) command() events.Command {
	data, _ := json.Marshal(map[string]any{"vm": p.guest.vmid, "snapshot": "s" + strings.ReplaceAll(p.id, "-", "x")})
	return events.Command{
		ID: p.id, Source: "/bench/fleet", Type: events.TypePrefix + "vm.snapshot.create", Verb: "vm.snapshot.create",
		EndpointID: int64(p.guest.endpoint + 1), HasEndpointID: true, Actor: "bench", Data: data,
	}
}

// publishAll publishes cmds in binary mode with asynchronous publishes and returns once the
// stream has stored each; published[i] is when command i was handed to the client.
func publishAll(ctx context.Context, e *env, cmds []planned) (published []time.Time, err error) {
	js, err := jetstream.New(e.nc, jetstream.WithPublishAsyncMaxPending(256))
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	published = make([]time.Time, len(cmds))
	futures := make([]jetstream.PubAckFuture, 0, len(cmds))
	for i, p := range cmds {
		m, err := events.EncodeBinary(e.subjects, p.command())
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", p.id, err)
		}
		published[i] = time.Now()
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			return nil, fmt.Errorf("publish %s: %w", p.id, err)
		}
		futures = append(futures, f)
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(2 * time.Minute):
		return nil, fmt.Errorf("publish: not every command acknowledged after 2 minutes")
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return nil, fmt.Errorf("publish %s: %w", f.Msg().Subject, err)
		}
	}
	return published, nil
}
