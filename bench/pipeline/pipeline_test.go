package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"testing"

	"github.com/proxbus/proxbus/bench/internal/harness"
)

var runners = []struct {
	name string
	run  harness.Runner
}{
	{"proxbus", harness.Proxbus},
	{"baseline", harness.Baseline},
	{"raw", harness.Raw},
}

// BenchmarkThroughput publishes b.N commands, then times their drain: cmds/s is the rate
// between the first and the last result, ns/op the whole drain (start-up included) per command.
func BenchmarkThroughput(b *testing.B) {
	for _, c := range []int{1, 8, 64} {
		for _, r := range runners {
			b.Run(fmt.Sprintf("mode=%s/c=%d", r.name, c), func(b *testing.B) {
				e := startEnv(b, harness.Options{})
				t, err := e.MeasureThroughput(context.Background(), "t", b.N, c, r.run)
				if err != nil {
					b.Fatal(err)
				}
				if r.name != "raw" && t.Summary.Statuses[201] != b.N {
					b.Fatalf("statuses %v, want %d × 201", t.Summary.Statuses, b.N)
				}
				b.ReportMetric(t.Rate, "cmds/s")
				b.ReportMetric(float64(t.Elapsed.Nanoseconds())/float64(b.N), "ns/op")
			})
		}
	}
}

func startEnv(tb testing.TB, opts harness.Options) *harness.Env {
	tb.Helper()
	e, err := harness.Start(opts)
	if errors.Is(err, harness.ErrNoRedis) && os.Getenv("PROXBUS_TEST_REDIS") != "required" {
		tb.Skipf("skipped: %v (set PROXBUS_TEST_REDIS=required to make this a failure)", err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(e.Close)
	return e
}

// counted is what one runner did for n commands.
type counted struct {
	redis, pve, netbox map[string]int
	steps, results     int
	statuses           map[int]int
	shapes             map[string]string
}

func count(t *testing.T, r harness.Runner, n int) counted {
	t.Helper()
	e := startEnv(t, harness.Options{CountRedis: true})
	th, err := e.MeasureThroughput(context.Background(), "p", n, 8, r)
	if err != nil {
		t.Fatal(err)
	}
	return counted{redis: e.RedisCount.Snapshot(), pve: e.PVECount.Snapshot(), netbox: e.NetBoxCount.Snapshot(),
		steps: th.Summary.Steps, results: th.Summary.Results, statuses: th.Summary.Statuses, shapes: th.Summary.Shapes}
}

// startupProbes are the requests proxbus serve makes once at start to check its tokens
// (GET /version of each endpoint, NetBox's GET /api/status/), and the reads of its watch of
// the endpoint's tasks and guests (contract §3a: per endpoint and interval, not per command;
// bench/fleet counts them), none of them per command. storage.pbs.create locates no guest, so
// every /cluster/resources read here is the watch's.
var startupProbes = []string{"GET /api2/json/version", "GET /api/status/", "GET /api2/json/cluster/tasks", "GET /api2/json/cluster/resources"}

// withoutStartup is c without the start-up probes.
func withoutStartup(c map[string]int) map[string]int {
	out := maps.Clone(c)
	for _, k := range startupProbes {
		delete(out, k)
	}
	return out
}

// scripts is the number of Redis round trips that do the work (connection set-up excluded).
func scripts(c map[string]int) int {
	n := 0
	for k, v := range c {
		if k != "HELLO" && k != "CLIENT" && k != "PING" && k != "SCRIPT" {
			n += v
		}
	}
	return n
}

// TestRequestParity runs the same commands through proxbus and through the baseline and
// checks that the baseline makes exactly proxbus's Proxmox and NetBox requests and publishes
// exactly its step and result events, and that it makes 2 Redis round trips per command.
// It logs both Redis counts: proxbus's is the figure to watch.
func TestRequestParity(t *testing.T) {
	const n = 40
	p := count(t, harness.Proxbus, n)
	b := count(t, harness.Baseline, n)
	t.Logf("proxbus  redis: %s (%d work round trips for %d commands)", harness.FormatCounts(p.redis, 0), scripts(p.redis), n)
	t.Logf("baseline redis: %s (%d work round trips for %d commands)", harness.FormatCounts(b.redis, 0), scripts(b.redis), n)
	t.Logf("proxmox: %s; netbox: %s; steps %d, results %d", harness.FormatCounts(p.pve, 0), harness.FormatCounts(p.netbox, 0), p.steps, p.results)
	tests := []struct {
		name              string
		proxbus, baseline any
	}{
		{"proxmox requests", harness.FormatCounts(withoutStartup(p.pve), 0), harness.FormatCounts(b.pve, 0)},
		{"netbox requests", harness.FormatCounts(withoutStartup(p.netbox), 0), harness.FormatCounts(b.netbox, 0)},
		{"step events", p.steps, b.steps},
		{"result events", p.results, b.results},
		{"statuses", fmt.Sprint(p.statuses), fmt.Sprint(b.statuses)},
		{"step event shape", p.shapes["step"], b.shapes["step"]},
		{"result event shape", p.shapes["result"], b.shapes["result"]},
	}
	for _, tc := range tests {
		if tc.proxbus != tc.baseline {
			t.Errorf("%s: proxbus %v, baseline %v", tc.name, tc.proxbus, tc.baseline)
		}
	}
	if p.steps != n*harness.BaselineSteps {
		t.Errorf("proxbus published %d steps for %d commands, the baseline assumes %d each", p.steps, n, harness.BaselineSteps)
	}
	if got := scripts(b.redis); got != 2*n {
		t.Errorf("baseline made %d Redis round trips for %d commands, want 2 each", got, n)
	}
	if p.statuses[201] != n {
		t.Errorf("proxbus statuses %v, want %d × 201", p.statuses, n)
	}
}
