// Package e2e_test runs proxbus end to end: real NATS JetStream (embedded), real Redis, and
// the Proxmox and NetBox simulators, through the same wiring `proxbus serve` uses.
package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/handlers"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/embedded"
	"github.com/proxbus/proxbus/internal/netbox"
	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/internal/repair"
	simnetbox "github.com/proxbus/proxbus/internal/sim/netbox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
	"github.com/proxbus/proxbus/internal/testenv"
	"github.com/proxbus/proxbus/store"
)

// canary is the password every test sends; it must never appear in anything proxbus emits.
const canary = "CANARY-pbs-s3cr3t-7f1e9a"

const fingerprint = "AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89"

// env is one isolated proxbus deployment.
type env struct {
	t        *testing.T
	nats     *testenv.NATS
	redis    *testenv.Redis
	pve      *simpve.Server
	netbox   *simnetbox.Server
	subjects events.Subjects
	logs     *testenv.Buffer
	base     app.Config
	store    *store.Store
	seq      atomic.Int64
}

// tune changes the configuration before a replica starts.
type tune func(*app.Config)

func newEnv(t *testing.T) *env {
	t.Helper()
	// A 4 MiB payload limit lets the over-1-MiB poison rule be exercised (NATS's default of 1 MB
	// refuses such a message at publish).
	e := &env{t: t, nats: testenv.StartNATSWith(t, embedded.NATSOptions{MaxPayload: 4 << 20}), redis: testenv.StartRedis(t), logs: &testenv.Buffer{}}
	e.pve = simpve.New(simpve.Options{Scenario: "demo"})
	pveURL, err := e.pve.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("pve sim: %v", err)
	}
	t.Cleanup(func() { _ = e.pve.Close() })
	e.netbox = simnetbox.New(simnetbox.Options{Scenario: "demo"})
	nbURL, err := e.netbox.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("netbox sim: %v", err)
	}
	t.Cleanup(func() { _ = e.netbox.Close() })
	e.subjects = events.NewSubjects("proxbus")
	ep := func(id int64, name string, readOnly bool) proxmox.EndpointConfig {
		return proxmox.EndpointConfig{ID: id, Name: name, URLs: []string{pveURL}, TokenID: app.DemoPVETokenID,
			TokenSecretEnv: "PVE_SECRET", ReadOnly: readOnly, Timeout: 5 * time.Second}
	}
	e.base = app.Config{
		NATSURL: e.nats.URL, RedisURL: e.redis.URL,
		NetBoxURL: nbURL, NetBoxToken: app.DemoNetBoxToken,
		Endpoints: []proxmox.EndpointConfig{ep(1, "lab", false), ep(2, "lab-readonly", false), ep(3, "local-readonly", true)},
		Getenv: func(name string) string {
			if name == "PVE_SECRET" {
				return app.DemoPVESecret
			}
			return ""
		},
		Consumer: consumer.Config{Concurrency: 4, AckWait: 2 * time.Second},
		Store:    store.Options{Prefix: e.redis.Prefix, Window: 60 * time.Second, LeaseTTL: 3 * time.Second},
		Pipeline: handlers.Settings{
			MaxAttempts: 3, BusyDelay: 50 * time.Millisecond, MaxWait: 200 * time.Millisecond, ConfirmFor: 3 * time.Second,
			JournalRetryDelay: 10 * time.Millisecond,
		},
		Repair:           repair.Config{Interval: time.Hour},
		TaskPollInterval: 10 * time.Millisecond,
		LogHandler:       slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}),
	}
	e.store = newStore(t, e.redis.Client, store.Options{Prefix: e.redis.Prefix, LeaseTTL: e.base.Store.LeaseTTL})
	return e
}

// newStore is store.New on rdb with opts, failing the test when opts are refused.
func newStore(t *testing.T, rdb redis.UniversalClient, opts store.Options) *store.Store {
	t.Helper()
	st, err := store.New(rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// replica starts one `proxbus serve` in-process; stop drains it and waits for Serve to return.
func (e *env) replica(name string, tunes ...tune) (stop func() error) {
	e.t.Helper()
	cfg := e.base
	cfg.Instance = name
	ready := make(chan struct{})
	var once sync.Once
	cfg.OnReady = func() { once.Do(func() { close(ready) }) }
	for _, f := range tunes {
		f(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Serve(ctx, cfg) }()
	select {
	case err := <-done:
		cancel()
		e.t.Fatalf("replica %s did not start: %v", name, err)
	case <-ready:
	case <-time.After(20 * time.Second):
		cancel()
		e.t.Fatalf("replica %s not ready after 20s", name)
	}
	var stopped atomic.Bool
	var result error
	stopFn := func() error {
		if stopped.CompareAndSwap(false, true) {
			cancel()
			result = <-done
		}
		return result
	}
	e.t.Cleanup(func() { _ = stopFn() })
	return stopFn
}

// start runs the default single replica.
func (e *env) start(tunes ...tune) func() error { return e.replica("r1", tunes...) }

// command builds a storage.pbs.create command for endpoint 1.
func (e *env) command(data string) events.Command {
	n := e.seq.Add(1)
	return events.Command{
		ID: fmt.Sprintf("cmd-%d-%d", time.Now().UnixNano(), n), Source: "/test/e2e", Type: "proxbus.storage.pbs.create",
		Verb: "storage.pbs.create", EndpointID: 1, HasEndpointID: true, Actor: "tester", Data: json.RawMessage(data),
	}
}

// pbs renders storage.pbs.create data with the canary password; extra fields override.
func pbs(storage string, extra ...string) string {
	fields := map[string]any{
		"storage": storage, "server": "pbs.example.net", "datastore": "store1",
		"username": "backup@pbs!proxbus", "password": canary, "fingerprint": fingerprint,
	}
	for i := 0; i+1 < len(extra); i += 2 {
		var v any
		if err := json.Unmarshal([]byte(extra[i+1]), &v); err != nil {
			v = extra[i+1]
		}
		if extra[i+1] == "<delete>" {
			delete(fields, extra[i])
			continue
		}
		fields[extra[i]] = v
	}
	b, _ := json.Marshal(fields)
	return string(b)
}

// publish sends a command in binary mode.
func (e *env) publish(cmd events.Command) {
	e.t.Helper()
	msg, err := events.EncodeBinary(e.subjects, cmd)
	if err != nil {
		e.t.Fatalf("encode: %v", err)
	}
	e.publishMsg(msg)
}

func (e *env) publishMsg(msg *nats.Msg) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := e.nats.JS.PublishMsg(ctx, msg); err != nil {
		e.t.Fatalf("publish: %v", err)
	}
}

// result waits for the command's result event.
func (e *env) result(cmd events.Command) events.Result {
	e.t.Helper()
	return e.resultFor(cmd.Source, cmd.ID)
}

func (e *env) resultFor(source, id string) events.Result {
	e.t.Helper()
	var res events.Result
	e.waitEvent(e.subjects.Result(events.Ref(source, id)), 20*time.Second, func(data []byte) {
		if err := json.Unmarshal(data, &res); err != nil {
			e.t.Fatalf("result not JSON: %v", err)
		}
	})
	return res
}

// send publishes and waits for the result.
func (e *env) send(cmd events.Command) events.Result {
	e.t.Helper()
	e.publish(cmd)
	return e.result(cmd)
}

// waitEvent waits for the first event on subject and passes its CloudEvents data to fn.
func (e *env) waitEvent(subject string, timeout time.Duration, fn func(data []byte)) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		m, err := e.nats.JS.Stream(ctx, e.subjects.EventsStream())
		if err == nil {
			raw, err := m.GetLastMsgForSubject(ctx, subject)
			if err == nil {
				ev, err := events.ParseEvent(raw.Data)
				if err != nil {
					e.t.Fatalf("event on %s not parseable: %v", subject, err)
				}
				fn(ev.Data)
				return
			}
		}
		select {
		case <-ctx.Done():
			e.t.Fatalf("no event on %s within %s", subject, timeout)
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// steps returns the step events of a command, in order.
func (e *env) steps(cmd events.Command) []events.Step {
	e.t.Helper()
	var out []events.Step
	for _, raw := range e.streamMessages(e.subjects.EventsStream(), e.subjects.Step(cmd.Ref())) {
		ev, err := events.ParseEvent(raw.Data)
		if err != nil {
			e.t.Fatalf("step not parseable: %v", err)
		}
		var st events.Step
		if err := json.Unmarshal(ev.Data, &st); err != nil {
			e.t.Fatalf("step not JSON: %v", err)
		}
		out = append(out, st)
	}
	return out
}

// streamMessages returns every message of a stream matching filter.
func (e *env) streamMessages(stream, filter string) []*jetstream.RawStreamMsg {
	e.t.Helper()
	out, err := e.streamMessagesNow(stream, filter)
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// streamMessagesNow is streamMessages reporting an error instead of failing the test: a
// cluster that lost a server may be electing the stream's leader.
func (e *env) streamMessagesNow(stream, filter string) ([]*jetstream.RawStreamMsg, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := e.nats.JS.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("stream %s info: %w", stream, err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue // deleted
		}
		if filter == "" || subjectMatches(filter, m.Subject) {
			out = append(out, m)
		}
	}
	return out, nil
}

func subjectMatches(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, tok := range f {
		if tok == ">" {
			return len(s) > i
		}
		if i >= len(s) || (tok != "*" && tok != s[i]) {
			return false
		}
	}
	return len(f) == len(s)
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// redisDump returns every key and value under the test's prefix, as text.
func (e *env) redisDump() string {
	e.t.Helper()
	ctx := context.Background()
	var b strings.Builder
	iter := e.redis.Client.Scan(ctx, 0, e.redis.Prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		b.WriteString(key + "\n")
		typ, _ := e.redis.Client.Type(ctx, key).Result()
		switch typ {
		case "string":
			v, _ := e.redis.Client.Get(ctx, key).Result()
			b.WriteString(v + "\n")
		case "hash":
			v, _ := e.redis.Client.HGetAll(ctx, key).Result()
			for k, val := range v {
				b.WriteString(k + "=" + val + "\n")
			}
		case "zset":
			v, _ := e.redis.Client.ZRangeWithScores(ctx, key, 0, -1).Result()
			for _, z := range v {
				fmt.Fprintf(&b, "%v\n", z.Member)
			}
		case "list":
			v, _ := e.redis.Client.LRange(ctx, key, 0, -1).Result()
			b.WriteString(strings.Join(v, "\n"))
		case "set":
			v, _ := e.redis.Client.SMembers(ctx, key).Result()
			b.WriteString(strings.Join(v, "\n"))
		}
	}
	return b.String()
}

// deadReplica plays a replica that claimed cmd with a lease of leaseTTL, wrote its
// write-ahead journal entry (on the object the pipeline journals on) when wroteEntry, marked
// the writes named by marked as leaving (store.Dispatching, as a replica does right before it
// sends each one), and vanished without recording anything else. A resumed command treats a
// marked write as "may have been sent", and one without a mark as never sent.
func (e *env) deadReplica(cmd events.Command, leaseTTL time.Duration, wroteEntry bool, marked ...string) {
	e.t.Helper()
	st := newStore(e.t, e.redis.Client, store.Options{Prefix: e.redis.Prefix, LeaseTTL: leaseTTL})
	ctx := context.Background()
	claim, err := st.Claim(ctx, store.ClaimRequest{Command: store.CommandKey{Source: cmd.Source, ID: cmd.ID}, Owner: "dead", Fingerprint: "x"})
	if err != nil || claim.State != store.Claimed {
		e.t.Fatalf("dead replica's claim: %v %v", claim.State, err)
	}
	if !wroteEntry {
		return
	}
	nb, err := netbox.New(netbox.Config{URL: e.base.NetBoxURL, Token: e.base.NetBoxToken, Timeout: 5 * time.Second})
	if err != nil {
		e.t.Fatal(err)
	}
	objectType, objectID := netbox.ObjectTypeEndpoint, cmd.EndpointID
	var guest struct {
		VM json.Number `json:"vm"`
	}
	if json.Unmarshal(cmd.Data, &guest) == nil && guest.VM != "" {
		vmid, _ := guest.VM.Int64()
		if vms, err := nb.VMsByProxmoxID(ctx, vmid); err == nil && len(vms) == 1 {
			objectType, objectID = netbox.ObjectTypeVM, vms[0].ID
		}
	}
	ref, err := nb.CreateJournalEntry(ctx, netbox.JournalEntry{ObjectType: objectType, ObjectID: objectID, Kind: netbox.KindInfo,
		Comments: "- verb: " + cmd.Verb + "\n- actor: tester\n- result: in_progress\n- command_id: " + cmd.ID + "\n"})
	if err != nil {
		e.t.Fatalf("dead replica's journal entry: %v", err)
	}
	for _, step := range marked {
		if err := st.Dispatching(ctx, claim.Lease, store.Progress{JournalID: ref.ID, JournalURL: ref.URL}, step); err != nil {
			e.t.Fatalf("dead replica's mark of %s: %v", step, err)
		}
	}
}
