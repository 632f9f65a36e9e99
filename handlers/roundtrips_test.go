package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/netbox"
	"github.com/proxbus/proxbus/internal/proxmox"
	simnetbox "github.com/proxbus/proxbus/internal/sim/netbox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
	"github.com/proxbus/proxbus/internal/testenv"
	"github.com/proxbus/proxbus/store"
)

// redisCounter is a go-redis hook counting round trips: one per command sent on its own, one
// per pipeline. It keeps each round trip's first command and first key.
type redisCounter struct {
	mu    sync.Mutex
	trips []string
}

func (c *redisCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *redisCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.add(describeCmd(cmd))
		return next(ctx, cmd)
	}
}

func (c *redisCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 {
			c.add(fmt.Sprintf("pipeline of %d, first %s", len(cmds), describeCmd(cmds[0])))
		}
		return next(ctx, cmds)
	}
}

func (c *redisCounter) add(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trips = append(c.trips, s)
}

// take returns the round trips counted since the last take.
func (c *redisCounter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.trips
	c.trips = nil
	return out
}

// describeCmd is "name keys…" of a script call (EVALSHA sha n key…) or the command's name.
func describeCmd(cmd redis.Cmder) string {
	args := cmd.Args()
	name := strings.ToUpper(fmt.Sprint(args[0]))
	if (name == "EVALSHA" || name == "EVAL") && len(args) > 2 {
		n, _ := args[2].(int)
		var kinds []string
		for i := 0; i < n && 3+i < len(args); i++ {
			k := fmt.Sprint(args[3+i])
			if parts := strings.Split(k, ":"); len(parts) > 1 {
				kinds = append(kinds, parts[1])
			}
		}
		return name + " [" + strings.Join(kinds, " ") + "]"
	}
	return name
}

// httpLog records every request a simulator is sent: "METHOD /path?query".
type httpLog struct {
	next http.Handler
	mu   sync.Mutex
	reqs []string
	// after, when set, is called with each request's line once it has been answered.
	after func(line string)
}

func (h *httpLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	line := r.Method + " " + r.URL.Path
	if r.URL.RawQuery != "" {
		line += "?" + r.URL.RawQuery
	}
	h.mu.Lock()
	h.reqs = append(h.reqs, line)
	after := h.after
	h.mu.Unlock()
	h.next.ServeHTTP(w, r)
	if after != nil {
		after(line)
	}
}

func (h *httpLog) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.reqs
	h.reqs = nil
	return out
}

// collector is a Publisher keeping every event it is given, built by a real emitter.
type collector struct {
	mu   sync.Mutex
	msgs []*nats.Msg
}

func (c *collector) Publish(_ context.Context, o events.Origin, data events.Payload) error {
	_, m, err := testEmitter.Event(o, data)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, m)
	return nil
}

// LastStep and HasResult make the collector the pipeline's History: these tests run only
// first deliveries, which never ask.
func (c *collector) LastStep(context.Context, string) (events.Step, bool, error) {
	return events.Step{}, false, nil
}

func (c *collector) HasResult(context.Context, string) (bool, error) { return false, nil }

// waiting reports whether command id has published a waiting step.
func (c *collector) waiting(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.msgs {
		var ev struct {
			Data events.Step `json:"data"`
		}
		if strings.HasSuffix(m.Subject, ".step") && json.Unmarshal(m.Data, &ev) == nil &&
			ev.Data.CommandID == id && ev.Data.Status == events.StepWaiting {
			return true
		}
	}
	return false
}

// result returns the result event of command id.
func (c *collector) result(t *testing.T, id string) events.Result {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.msgs {
		if strings.HasSuffix(m.Subject, ".result") {
			var ev struct {
				ID   string        `json:"id"`
				Data events.Result `json:"data"`
			}
			if err := json.Unmarshal(m.Data, &ev); err == nil && ev.Data.CommandID == id {
				return ev.Data
			}
		}
	}
	t.Fatalf("no result event for %s", id)
	return events.Result{}
}

// rtEnv is the real pipeline against real Redis, sim/pve (tasks end at once) and sim/netbox,
// with every Redis round trip and simulator request recorded.
type rtEnv struct {
	p      *Pipeline
	redis  *redisCounter
	pve    *simpve.Server
	pveLog *httpLog
	nbLog  *httpLog
	nb     *simnetbox.Server
	pub    *collector
}

func newRTEnv(t *testing.T) *rtEnv {
	t.Helper()
	return newRTEnvWith(t, store.Options{})
}

// newRTEnvWith is newRTEnv with the store's options (its key prefix is the test's own) and
// changes to the endpoint's configuration.
func newRTEnvWith(t *testing.T, so store.Options, tweaks ...func(*proxmox.EndpointConfig)) *rtEnv {
	t.Helper()
	e := &rtEnv{redis: &redisCounter{}, pub: &collector{}}
	r := testenv.StartRedis(t)
	opts := r.Client.Options()
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	rdb.AddHook(e.redis)
	so.Prefix = r.Prefix
	st, err := store.New(rdb, so)
	if err != nil {
		t.Fatal(err)
	}

	e.pve = simpve.New(simpve.Options{Scenario: "demo", TaskDuration: -1})
	e.pveLog = &httpLog{next: e.pve.Handler()}
	pveSrv := httptest.NewServer(e.pveLog)
	t.Cleanup(pveSrv.Close)
	e.nb = simnetbox.New(simnetbox.Options{Scenario: simnetbox.ScenarioDemo})
	e.nbLog = &httpLog{next: e.nb.Handler()}
	nbSrv := httptest.NewServer(e.nbLog)
	t.Cleanup(nbSrv.Close)

	ep := proxmox.EndpointConfig{ID: 1, Name: "lab", URLs: []string{pveSrv.URL},
		TokenID: simpve.DemoTokenID, TokenSecretEnv: "PVE_SECRET", Timeout: 5 * time.Second}
	for _, tweak := range tweaks {
		tweak(&ep)
	}
	clients, err := proxmox.NewClients([]proxmox.EndpointConfig{ep},
		func(string) string { return simpve.DemoSecret }, proxmox.WithTaskPollInterval(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	nbc, err := netbox.New(netbox.Config{URL: nbSrv.URL, Token: simnetbox.TokenV1, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e.p, err = New(Config{
		Registry: NewRegistry(Builtin()...), Store: st, Endpoints: netbox.NewEndpointCache(nbc, 30*time.Second, nil),
		Journal: nbc, Proxmox: clients, Publisher: e.pub, History: e.pub,
		Instance: "rt",
	})
	if err != nil {
		t.Fatal(err)
	}
	followTable(t, e.p)
	return e
}

// resultOf handles one command of verb as its first delivery (arrived in the stream now) and
// returns its result.
func (e *rtEnv) resultOf(t *testing.T, verb, id, data string) events.Result {
	t.Helper()
	cmd := events.Command{ID: id, Source: "/test/" + verb, Type: events.TypePrefix + verb, Verb: verb,
		EndpointID: 1, HasEndpointID: true, Data: json.RawMessage(data)}
	if d := e.p.Handle(context.Background(), cmd, events.Delivery{Number: 1, Stored: time.Now()}); d.Action != events.Ack {
		t.Fatalf("%s: decision %+v, want done", id, d)
	}
	return e.pub.result(t, id)
}

// run handles cmd as its first delivery and checks its result.
func (e *rtEnv) run(t *testing.T, verb, id, data string, status int, result string) {
	t.Helper()
	cmd := events.Command{ID: id, Source: "/test/roundtrips", Type: events.TypePrefix + verb, Verb: verb,
		EndpointID: 1, HasEndpointID: true, Data: json.RawMessage(data)}
	d := e.p.Handle(context.Background(), cmd, events.Delivery{Number: 1})
	if d.Action != events.Ack {
		t.Fatalf("%s %s: decision %+v, want done", verb, id, d)
	}
	if res := e.pub.result(t, id); res.Status != status || res.Result != result || !res.Finalized() {
		t.Fatalf("%s %s: result %d %s (journal finalized %v), want %d %s", verb, id, res.Status, res.Result, res.Finalized(), status, result)
	}
}

// pbsData is a storage.pbs.create body for a new storage id.
func pbsData(storage string) string {
	return `{"storage":"` + storage + `","server":"pbs.lan","datastore":"store1","username":"backup@pbs!proxbus",` +
		`"password":"s3cret","fingerprint":"` + testPBSFingerprint + `"}`
}

// TestRoundTripsPerCommand pins the cost of a write command on the happy path, after the
// first command has loaded the Lua scripts (EVALSHA's NOSCRIPT fallback) and the gate's
// endpoint cache: three Redis round trips (claim with guards, the mark of its one Proxmox
// write right before it leaves, complete with their release) and the exact NetBox and Proxmox
// requests listed in docs/benchmarks.md. The mark is what lets a resumed command tell a write
// that never left (run it) from one that may have (confirm it): without it, a crash between
// the write-ahead journal entry and the write was answered 502 unconfirmed.
func TestRoundTripsPerCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, verb, warmData, data string
		status                     int
		result                     string
		redis, netbox, pve         []string // expected request lines, by prefix
	}{
		{
			name: "storage.pbs.create new storage", verb: "storage.pbs.create",
			warmData: pbsData("pbs-warm"), data: pbsData("pbs-rt"), status: 201, result: ResultCreated,
			redis:  []string{"EVALSHA [cmd fence slots]", "EVALSHA [cmd]", "EVALSHA [cmd slots]"},
			netbox: []string{"POST /api/extras/journal-entries/", "PATCH /api/extras/journal-entries/"},
			pve:    []string{"GET /api2/json/storage", "POST /api2/json/storage"},
		},
		{
			name: "vm.start stopped VM", verb: "vm.start",
			warmData: `{"vm":"103"}`, data: `{"vm":"101"}`, status: 200, result: ResultOK,
			redis: []string{"EVALSHA [cmd fence lock slots]", "EVALSHA [cmd]", "EVALSHA [cmd lock slots]"},
			netbox: []string{"GET /api/virtualization/virtual-machines/?cf_proxmox_vm_id=101",
				"POST /api/extras/journal-entries/", "PATCH /api/extras/journal-entries/"},
			pve: []string{"GET /api2/json/cluster/resources", "GET /api2/json/nodes/pve2/qemu/101/status/current",
				"POST /api2/json/nodes/pve2/qemu/101/status/start", "GET /api2/json/nodes/pve2/tasks/"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newRTEnv(t)
			e.run(t, tt.verb, "warm-"+tt.verb, tt.warmData, tt.status, tt.result)
			warm := e.redis.take()
			e.nbLog.take()
			e.pveLog.take()

			e.run(t, tt.verb, "rt-"+tt.verb, tt.data, tt.status, tt.result)
			got := map[string][]string{"redis": e.redis.take(), "netbox": e.nbLog.take(), "pve": e.pveLog.take()}
			want := map[string][]string{"redis": tt.redis, "netbox": tt.netbox, "pve": tt.pve}
			for _, kind := range []string{"redis", "netbox", "pve"} {
				t.Logf("%s: %d round trips", kind, len(got[kind]))
				for i, line := range got[kind] {
					t.Logf("  %d. %s", i+1, line)
				}
				assertPrefixes(t, kind, got[kind], want[kind])
			}
			if len(got["redis"]) > 3 {
				t.Fatalf("%d Redis round trips, want at most 3", len(got["redis"]))
			}
			// the first command paid the scripts' first use (NOSCRIPT → EVAL) only
			t.Logf("warm-up command: %d Redis round trips (%v)", len(warm), warm)
		})
	}
}

// assertPrefixes checks that got has exactly len(want) lines, each starting with want's line.
func assertPrefixes(t *testing.T, kind string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d requests %q, want %d %q", kind, len(got), got, len(want), want)
		return
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("%s request %d: %q, want %q…", kind, i+1, got[i], want[i])
		}
	}
}

// TestLeaseRenewedWhileCommandRuns: a command running for many lease lifetimes keeps its lease
// (one renewal script every third of the TTL) and completes as the lease's owner; the
// renewals stop with the command.
func TestLeaseRenewedWhileCommandRuns(t *testing.T) {
	t.Parallel()
	const ttl = 150 * time.Millisecond
	e := newRTEnvWith(t, store.Options{LeaseTTL: ttl})
	e.run(t, "vm.start", "warm-lease", `{"vm":"103"}`, 200, ResultOK)
	e.redis.take()

	e.pve.SetTaskDuration(6 * ttl) // the start task outlives the lease six times over
	e.run(t, "vm.start", "long-lease", `{"vm":"101"}`, 200, ResultOK)
	got := e.redis.take()
	// claim and complete, plus the renewals in between
	if renewals := len(got) - 2; renewals < 6 {
		t.Errorf("%d Redis round trips %q: %d renewals, want at least 6 over six lease lifetimes", len(got), got, renewals)
	}
	time.Sleep(2 * ttl)
	if after := e.redis.take(); len(after) != 0 {
		t.Errorf("Redis round trips after the command ended: %q, want none (renewals stop with it)", after)
	}
}
