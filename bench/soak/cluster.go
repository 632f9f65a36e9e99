package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/proxbus/proxbus/bench/internal/harness"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// natsNode is one nats-server process of the soak: in single-server mode the only one, in
// cluster mode one of three JetStream peers routed to each other on loopback. A node keeps
// its ports and store directory across restarts, so a restarted peer rejoins as itself.
type natsNode struct {
	name        string // the server name (-n), as JetStream reports leaders
	proc        *proc
	port        int // client port
	clusterPort int // route port (cluster mode only)
	monitorPort int // HTTP monitoring port: /healthz, /jsz (cluster mode only)
}

func (n *natsNode) url() string { return "nats://127.0.0.1:" + strconv.Itoa(n.port) }

// newNATSNodes returns the nats-server processes of the mode: one plain JetStream server,
// or, with cluster, three peers of the cluster "proxbus-soak", each with its own store
// directory under dir, all routes listed on every peer (a peer ignores the route to itself).
func newNATSNodes(bin, dir string, cluster bool) ([]*natsNode, error) {
	if !cluster {
		port, err := harness.FreePort()
		if err != nil {
			return nil, err
		}
		n := &natsNode{name: "nats-server", port: port}
		n.proc = &proc{name: n.name, path: bin, logPath: filepath.Join(dir, "nats.log"),
			args: []string{"-js", "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-sd", filepath.Join(dir, "jetstream")}}
		return []*natsNode{n}, nil
	}
	const size = 3
	nodes := make([]*natsNode, size)
	routes := make([]string, size)
	for i := range nodes {
		n := &natsNode{name: fmt.Sprintf("soak-n%d", i+1)}
		for _, p := range []*int{&n.port, &n.clusterPort, &n.monitorPort} {
			port, err := harness.FreePort()
			if err != nil {
				return nil, err
			}
			*p = port
		}
		routes[i] = "nats://127.0.0.1:" + strconv.Itoa(n.clusterPort)
		nodes[i] = n
	}
	for _, n := range nodes {
		n.proc = &proc{name: n.name, path: bin, logPath: filepath.Join(dir, n.name+".log"), args: []string{
			"-js", "-n", n.name, "-a", "127.0.0.1", "-p", strconv.Itoa(n.port), "-m", strconv.Itoa(n.monitorPort),
			"-sd", filepath.Join(dir, "jetstream-"+n.name),
			"--cluster_name", "proxbus-soak", "--cluster", "nats://127.0.0.1:" + strconv.Itoa(n.clusterPort),
			"--routes", strings.Join(routes, ","),
		}}
	}
	return nodes, nil
}

// killRole is a leader the cluster-mode schedule kills: the leader of one of proxbus's
// streams, or the JetStream meta leader.
type killRole string

const (
	roleCommands killRole = "commands" // leader of PROXBUS_COMMANDS
	roleEvents   killRole = "events"   // leader of PROXBUS_EVENTS
	roleMeta     killRole = "meta"     // JetStream meta leader
)

// plannedKill is one entry of --cluster-kills: kill the current holder of role at frac of the
// publishing period.
type plannedKill struct {
	role killRole
	frac float64
}

// parseKillSchedule reads "role@fraction,…" (roles commands, events, meta; fractions in
// [0, 1], ascending). An empty string is no kill.
func parseKillSchedule(s string) ([]plannedKill, error) {
	var out []plannedKill
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		role, at, ok := strings.Cut(item, "@")
		if !ok {
			return nil, fmt.Errorf("cluster kill %q: want role@fraction", item)
		}
		r := killRole(strings.TrimSpace(role))
		if r != roleCommands && r != roleEvents && r != roleMeta {
			return nil, fmt.Errorf("cluster kill %q: role must be commands, events or meta", item)
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(at), 64)
		if err != nil || f < 0 || f > 1 {
			return nil, fmt.Errorf("cluster kill %q: fraction must be in [0, 1]", item)
		}
		if len(out) > 0 && f < out[len(out)-1].frac {
			return nil, fmt.Errorf("cluster kill %q: fractions must be ascending", item)
		}
		out = append(out, plannedKill{r, f})
	}
	return out, nil
}

// clusterView reads the cluster's leaders and health. Every call is bounded by its context
// and by a 2-second HTTP timeout.
type clusterView struct {
	js     jetstream.JetStream
	nodes  []*natsNode
	client *http.Client
	// streams maps a stream role to the stream's name.
	streams map[killRole]string
}

// leaderOf returns the name of the server holding role: a stream's leader from the
// JetStream API ($JS.API.STREAM.INFO.<stream> → cluster.leader), the meta leader from the
// monitoring endpoint /jsz of the first server that answers (meta_cluster.leader). The lookup
// is given 2 s (an API request can go unanswered for seconds under load).
func (v *clusterView) leaderOf(ctx context.Context, role killRole) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if role == roleMeta {
		var lastErr error
		for _, n := range v.nodes {
			if !n.proc.running() {
				continue
			}
			var jsz struct {
				Meta *struct {
					Leader string `json:"leader"`
				} `json:"meta_cluster"`
			}
			if err := v.getJSON(ctx, n, "/jsz", &jsz); err != nil {
				lastErr = err
				continue
			}
			if jsz.Meta != nil && jsz.Meta.Leader != "" {
				return jsz.Meta.Leader, nil
			}
			lastErr = fmt.Errorf("%s: /jsz names no meta leader", n.name)
		}
		return "", fmt.Errorf("meta leader: %w", lastErr)
	}
	name := v.streams[role]
	st, err := v.js.Stream(ctx, name)
	if err != nil {
		return "", fmt.Errorf("stream %s info: %w", name, err)
	}
	info := st.CachedInfo()
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return "", fmt.Errorf("stream %s: no leader", name)
	}
	return info.Cluster.Leader, nil
}

// getJSON GETs path from node n's monitoring port and decodes the JSON answer into out.
func (v *clusterView) getJSON(ctx context.Context, n *natsNode, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(n.monitorPort)+path, nil)
	if err != nil {
		return fmt.Errorf("%s %s: %w", n.name, path, err)
	}
	resp, err := v.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", n.name, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s", n.name, path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: %w", n.name, path, err)
	}
	return nil
}

// healthy reports whether every node runs and answers /healthz with 200: JetStream enabled,
// the meta layer and every stream and consumer replica current.
func (v *clusterView) healthy(ctx context.Context) (bool, string) {
	for _, n := range v.nodes {
		if !n.proc.running() {
			return false, n.name + " not running"
		}
		var h struct {
			Status string `json:"status"`
			Error  string `json:"error"`
		}
		if err := v.getJSON(ctx, n, "/healthz", &h); err != nil {
			return false, err.Error()
		}
	}
	return true, ""
}

// waitHealthy waits up to limit for [clusterView.healthy]; it returns the last reason when
// the cluster did not get healthy in time.
func (v *clusterView) waitHealthy(ctx context.Context, limit time.Duration) (bool, string) {
	deadline := time.Now().Add(limit)
	for {
		hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ok, why := v.healthy(hctx)
		cancel()
		if ok || time.Now().After(deadline) || ctx.Err() != nil {
			return ok, why
		}
		sleepCtx(ctx, 250*time.Millisecond)
	}
}

// rolesOf returns every role that server name holds right now (for the kill's log line),
// in the order commands, events, meta.
func (v *clusterView) rolesOf(ctx context.Context, name string) []string {
	var out []string
	for _, r := range []killRole{roleCommands, roleEvents, roleMeta} {
		if l, err := v.leaderOf(ctx, r); err == nil && l == name {
			out = append(out, roleLabel(r, v.streams))
		}
	}
	return out
}

// roleLabel is how a kill's log line names a role.
func roleLabel(r killRole, streams map[killRole]string) string {
	if r == roleMeta {
		return "JetStream meta leader"
	}
	return "leader of " + streams[r]
}

// node returns the node named name.
func (v *clusterView) node(name string) *natsNode {
	for _, n := range v.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

// leaders returns the holder of every role now ("" where none is known).
func (v *clusterView) leaders(ctx context.Context) map[killRole]string {
	out := map[killRole]string{}
	for _, r := range []killRole{roleCommands, roleEvents, roleMeta} {
		if l, err := v.leaderOf(ctx, r); err == nil {
			out[r] = l
		}
	}
	return out
}

// stepDown asks the leader of stream, server from, to hand over to server preferred
// ($JS.API.STREAM.LEADER.STEPDOWN.<stream> with a preferred placement; the request is given
// 3 s) and waits up to 3 s for the stream to report a leader other than from; it returns that
// leader.
func (v *clusterView) stepDown(ctx context.Context, stream, from, preferred string) (string, error) {
	req, err := json.Marshal(map[string]any{"placement": map[string]string{"preferred": preferred}})
	if err != nil {
		return "", fmt.Errorf("stepdown %s: %w", stream, err)
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second) // a busy leader may answer late: bound it
	defer cancel()
	msg, err := v.js.Conn().RequestWithContext(rctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, req)
	if err != nil {
		return "", fmt.Errorf("stepdown %s: %w", stream, err)
	}
	var resp struct {
		Success bool `json:"success"`
		Error   *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return "", fmt.Errorf("stepdown %s: %w", stream, err)
	}
	if !resp.Success {
		why := "refused"
		if resp.Error != nil {
			why = resp.Error.Description
		}
		return "", fmt.Errorf("stepdown %s: %s", stream, why)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		st, err := v.js.Stream(ctx, stream)
		if err == nil && st.CachedInfo().Cluster != nil {
			if l := st.CachedInfo().Cluster.Leader; l != "" && l != from {
				return l, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return "", fmt.Errorf("stepdown %s: the leader did not leave %s in 3s", stream, from)
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
}

// isolate moves the other roles away from the server that is to be killed for role, so that
// the kill hits that role alone where the cluster allows it, and returns the server to kill.
// Stream leaders move by [clusterView.stepDown]; the meta leader cannot be moved from the
// soak's account, so a stream role held by the meta leader is moved off it instead. A move
// that fails is logged and the kill goes ahead with whatever the server holds.
func (v *clusterView) isolate(ctx context.Context, role killRole, logf func(string, ...any)) string {
	lead := v.leaders(ctx)
	target := lead[role]
	if target == "" {
		return ""
	}
	others := func(exclude ...string) []string { // servers other than exclude, in node order
		var out []string
		for _, n := range v.nodes {
			if !slices.Contains(exclude, n.name) {
				out = append(out, n.name)
			}
		}
		return out
	}
	move := func(r killRole, to string, why string) bool {
		got, err := v.stepDown(ctx, v.streams[r], lead[r], to)
		if err != nil {
			logf("soak: moving the leader of %s off %s failed (%v); the kill goes ahead", v.streams[r], lead[r], err)
			return false
		}
		logf("soak: leader of %s moved %s → %s (%s)", v.streams[r], lead[r], got, why)
		lead[r] = got
		return true
	}
	if role != roleMeta && target == lead[roleMeta] {
		other := roleEvents
		if role == roleEvents {
			other = roleCommands
		}
		if to := others(lead[roleMeta], lead[other]); len(to) > 0 && move(role, to[0], "off the meta leader, so the kill hits the stream alone") {
			target = lead[role]
		}
	}
	for _, r := range []killRole{roleCommands, roleEvents} {
		if r == role || lead[r] != target {
			continue
		}
		to := others(target, lead[roleMeta])
		if len(to) == 0 {
			to = others(target)
		}
		move(r, to[0], "so that the kill of "+target+" hits the "+string(role)+" leader alone")
	}
	return target
}
