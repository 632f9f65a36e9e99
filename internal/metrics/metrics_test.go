package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/testenv"
)

// fakeClock is a settable clock.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func newTestMetrics(t *testing.T, o Options) (*Metrics, *fakeClock) {
	t.Helper()
	clk := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	if o.Now == nil {
		o.Now = clk.now
	}
	if o.Verbs == nil {
		o.Verbs = []string{"vm.start"}
	}
	return New(o), clk
}

// scrape returns the /metrics text of m.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return string(b)
}

// TestResultEventsCountCommands: a result counts its command by verb, result and status, a
// replay only as a duplicate event, and an unknown verb as "other"; a journal event counts as
// repaired.
func TestResultEventsCountCommands(t *testing.T) {
	t.Parallel()
	m, _ := newTestMetrics(t, Options{})
	publish := func(verb, id string, status int, word string, dup bool) {
		res := events.Result{CommandID: id, CommandSource: "/t", Verb: verb, Status: status, Result: word}
		m.Published(context.Background(), res, dup)
	}
	publish("vm.start", "a", 200, "ok", false)
	publish("vm.start", "a", 200, "ok", true) // a replay: not a second command
	publish("vm.start", "b", 409, "refused", false)
	publish("made.up.verb", "c", 400, "refused", false)
	repaired := events.JournalRepaired{CommandID: "a", JournalEntryURL: "https://netbox.example/api/extras/journal-entries/1/", RepairedBy: "repairer"}
	m.Published(context.Background(), repaired, false)
	if got := toFloat64(t, m.events.WithLabelValues("repaired", "false")); got != 1 {
		t.Errorf("repaired events = %v, want 1", got)
	}

	tests := []struct {
		verb, result, status string
		want                 float64
	}{
		{"vm.start", "ok", "200", 1},
		{"vm.start", "refused", "409", 1},
		{OtherVerb, "refused", "400", 1},
	}
	for _, tc := range tests {
		if got := toFloat64(t, m.commands.WithLabelValues(tc.verb, tc.result, tc.status)); got != tc.want {
			t.Errorf("commands_total{%s,%s,%s} = %v, want %v", tc.verb, tc.result, tc.status, got, tc.want)
		}
	}
	if got := toFloat64(t, m.events.WithLabelValues("result", "true")); got != 1 {
		t.Errorf("duplicate result events = %v, want 1", got)
	}
	if strings.Contains(scrape(t, m), "made.up.verb") {
		t.Error("an unknown verb became a label value")
	}
}

// TestStepEventsTimeSteps: a step is timed from its started event to its done or error
// event; an unfinished step is not observed and the command's result forgets it.
func TestStepEventsTimeSteps(t *testing.T) {
	t.Parallel()
	m, clk := newTestMetrics(t, Options{})
	o := events.Origin{ID: "cmd-1", Source: "/t", Verb: "vm.start"}
	step := func(seq int, name string, st events.StepStatus, at time.Time) {
		ev := events.Step{CommandID: o.ID, CommandSource: o.Source, Verb: o.Verb, Seq: seq, Step: name, Status: st, At: at}
		m.Published(context.Background(), ev, false)
	}
	t0 := clk.t
	step(1, "power", events.StepStarted, t0)
	step(2, "power", events.StepDone, t0.Add(3*time.Second))
	step(3, "journal", events.StepStarted, t0.Add(3*time.Second))
	step(4, "journal", events.StepError, t0.Add(4*time.Second))
	step(5, "wait", events.StepStarted, t0.Add(4*time.Second))
	if n := m.steps.size(); n != 1 {
		t.Errorf("%d steps tracked, want 1 (wait)", n)
	}
	result := events.Result{CommandID: o.ID, CommandSource: o.Source, Verb: o.Verb, Status: 200, Result: "ok"}
	m.Published(context.Background(), result, false)
	if n := m.steps.size(); n != 0 {
		t.Errorf("%d steps tracked after the result, want 0", n)
	}

	text := scrape(t, m)
	for _, want := range []string{
		`proxbus_step_duration_seconds_sum{status="done",step="power",verb="vm.start"} 3`,
		`proxbus_step_duration_seconds_count{status="done",step="power",verb="vm.start"} 1`,
		`proxbus_step_duration_seconds_sum{status="error",step="journal",verb="vm.start"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if strings.Contains(text, `step="wait"`) {
		t.Error("an unfinished step was observed")
	}
}

func TestStepTrackerIsBounded(t *testing.T) {
	t.Parallel()
	tr := newStepTracker(2)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr.start("/s", "a", "x", t0)
	tr.start("/s", "b", "x", t0)
	tr.start("/s", "c", "x", t0.Add(time.Minute)) // full, nothing old enough: dropped
	if _, ok := tr.finish("/s", "c", "x"); ok {
		t.Error("a step beyond the bound was tracked")
	}
	tr.start("/s", "d", "x", t0.Add(2*time.Hour)) // evicts a and b
	if _, ok := tr.finish("/s", "d", "x"); !ok {
		t.Error("a step after eviction was not tracked")
	}
	if n := tr.size(); n != 0 {
		t.Errorf("size %d, want 0", n)
	}
}

// TestMiddlewareAndDeadLetters: the middleware counts the delivery in flight while the
// handler runs, its duration by verb and disposition, and every delivery after the first as a
// redelivery; dead letters are counted by verb and bounded reason.
func TestMiddlewareAndDeadLetters(t *testing.T) {
	t.Parallel()
	m, clk := newTestMetrics(t, Options{})
	h := m.Middleware(consumer.HandlerFunc(func(_ context.Context, _ events.Command, d events.Delivery) events.Disposition {
		if got := toFloat64(t, m.inFlight); got != 1 {
			t.Errorf("in flight %v, want 1", got)
		}
		if d.Number == 1 {
			clk.t = clk.t.Add(2 * time.Second)
		}
		return events.Disposition{Action: events.Redeliver}
	}))
	for i, verb := range []string{"vm.start", "vm.start", "nonsense"} {
		h.Handle(context.Background(), events.Command{Verb: verb}, events.Delivery{Number: uint64(i + 1)})
	}
	if got := toFloat64(t, m.inFlight); got != 0 {
		t.Errorf("in flight %v, want 0", got)
	}
	m.DeadLettered("vm.start", "attempts_exhausted")
	m.DeadLettered("vm.start", "Weird Reason!")

	text := scrape(t, m)
	for _, want := range []string{
		`proxbus_command_duration_seconds_sum{disposition="redeliver",verb="vm.start"} 2`,
		`proxbus_redeliveries_total{verb="vm.start"} 1`,
		`proxbus_redeliveries_total{verb="other"} 1`,
		`proxbus_dead_letters_total{reason="attempts_exhausted",verb="vm.start"} 1`,
		`proxbus_dead_letters_total{reason="other",verb="vm.start"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}

func TestNetBoxOperation(t *testing.T) {
	t.Parallel()
	tests := []struct{ method, url, want string }{
		{"GET", "https://nb/api/status/", "GET /api/status/"},
		{"PATCH", "https://nb/api/virtualization/virtual-machines/123/?brief=1", "PATCH /api/virtualization/virtual-machines/{id}/"},
		{"GET", "https://user:pw@nb/api/plugins/proxbox/endpoints/7/", "GET /api/plugins/proxbox/endpoints/{id}/"},
		{"GET", "https://nb/api/dcim/devices/Some%20Name/", "GET /api/dcim/devices/{id}/"},
		{"GET", "https://nb/elsewhere", "GET other"},
	}
	for _, tc := range tests {
		r := httptest.NewRequest(tc.method, tc.url, nil)
		if got := NetBoxOperation(r); got != tc.want {
			t.Errorf("NetBoxOperation(%s %s) = %q, want %q", tc.method, tc.url, got, tc.want)
		}
	}
}

func TestHTTPTransports(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "fail") {
			w.WriteHeader(http.StatusBadGateway)
		}
	}))
	t.Cleanup(srv.Close)
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()

	m, _ := newTestMetrics(t, Options{})
	pve := &http.Client{Transport: m.ProxmoxTransport("1", func(r *http.Request) string { return r.Method + " /op" }, http.DefaultTransport)}
	nb := &http.Client{Transport: m.NetBoxTransport(nil, http.DefaultTransport)}
	get := func(c *http.Client, url string) {
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
		}
	}
	get(pve, srv.URL+"/api2/json/ok?secret=CANARY")
	get(pve, srv.URL+"/api2/json/fail")
	get(pve, closedURL+"/api2/json/x")
	get(nb, srv.URL+"/api/virtualization/virtual-machines/42/?token=CANARY")
	get(nb, srv.URL+"/api/fail/")

	text := scrape(t, m)
	for _, want := range []string{
		`proxbus_proxmox_request_duration_seconds_count{code="2xx",endpoint="1",operation="GET /op"} 1`,
		`proxbus_proxmox_request_duration_seconds_count{code="5xx",endpoint="1",operation="GET /op"} 1`,
		`proxbus_proxmox_request_duration_seconds_count{code="error",endpoint="1",operation="GET /op"} 1`,
		`proxbus_proxmox_request_errors_total{endpoint="1",kind="status_5xx",operation="GET /op"} 1`,
		`proxbus_proxmox_request_errors_total{endpoint="1",kind="transport",operation="GET /op"} 1`,
		`proxbus_netbox_request_duration_seconds_count{code="2xx",operation="GET /api/virtualization/virtual-machines/{id}/"} 1`,
		`proxbus_netbox_request_errors_total{kind="status_5xx",operation="GET /api/fail/"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if strings.Contains(text, "CANARY") || strings.Contains(text, "/42/") {
		t.Error("a query value or id reached a label")
	}
}

func TestRedisHook(t *testing.T) {
	t.Parallel()
	r := testenv.StartRedis(t)
	m, _ := newTestMetrics(t, Options{})
	opts := r.Client.Options()
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	c.AddHook(m.RedisHook())
	ctx := context.Background()
	key := r.Prefix + "hook"
	if err := c.HSet(ctx, key, "f", "v").Err(); err != nil {
		t.Fatalf("hset: %v", err)
	}
	if err := c.Get(ctx, r.Prefix+"missing").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("get missing: %v", err)
	}
	if err := c.Incr(ctx, key).Err(); err == nil {
		t.Fatal("incr on a hash succeeded")
	}
	if got := toFloat64(t, m.redisErrors.WithLabelValues("incr")); got != 1 {
		t.Errorf("incr errors %v, want 1", got)
	}
	if got := toFloat64(t, m.redisErrors.WithLabelValues("get")); got != 0 {
		t.Errorf("a missing key counted as an error: %v", got)
	}

	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = down.Close() })
	down.AddHook(m.RedisHook())
	_ = down.Ping(ctx).Err()
	if got := toFloat64(t, m.redisErrors.WithLabelValues("dial")); got < 1 {
		t.Errorf("dial errors %v, want at least 1", got)
	}
}

func TestPendingRepairsAtScrape(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		fn   func(context.Context) (int, error)
		want string
	}{
		{"value", func(context.Context) (int, error) { return 3, nil }, "proxbus_journal_repairs_pending 3"},
		{"error omits", func(context.Context) (int, error) { return 0, errors.New("down") }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, _ := newTestMetrics(t, Options{PendingRepairs: tc.fn})
			text := scrape(t, m)
			has := strings.Contains(text, "\nproxbus_journal_repairs_pending ")
			if tc.want == "" && has {
				t.Error("a failed read produced a sample")
			}
			if tc.want != "" && !strings.Contains(text, tc.want) {
				t.Errorf("scrape lacks %s", tc.want)
			}
		})
	}
}

// toFloat64 reads the value of one counter or gauge.
func toFloat64(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		t.Fatalf("read metric: %v", err)
	}
	switch {
	case d.Counter != nil:
		return d.Counter.GetValue()
	case d.Gauge != nil:
		return d.Gauge.GetValue()
	}
	t.Fatalf("metric is neither counter nor gauge")
	return 0
}
