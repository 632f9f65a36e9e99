// Command durability measures what the shipped durable settings cost (issue #39): JetStream
// `sync_interval: always` (fsync after every write instead of every two minutes) and Redis
// `appendfsync always` (instead of everysec), side by side in one run with the defaults.
//
// Four settings run in every round, each on a fresh deployment (an embedded JetStream server
// and a redis-server of its own with AOF, both storing in the temporary directory, proxbus
// in-process, the simulators): the defaults, each of the two alone, and both (what deploy/
// ships). Each first drains -n pre-published storage.pbs.create commands (commands per
// second) and then takes an open-loop load of -rate commands per second for -d (publish →
// result p50 and p99). The order of the settings rotates every round, so a busy machine does
// not favour one; the table has the medians of the drain rates and the percentiles over the
// samples of every round, and what each setting adds to the defaults.
//
//	go -C bench run ./durability                 # -n 400 -rounds 3 -c 8 -rate 40 -d 6s
//	go -C bench run ./durability -short          # CI: a few commands, one round
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/proxbus/proxbus/bench/internal/harness"
)

func main() {
	n := flag.Int("n", 400, "commands per drain")
	rounds := flag.Int("rounds", 3, "rounds (each runs every setting once)")
	c := flag.Int("c", 8, "concurrency (proxbus --concurrency)")
	rate := flag.Float64("rate", 40, "offered load of the latency run, commands per second")
	d := flag.Duration("d", 6*time.Second, "duration of each latency run")
	short := flag.Bool("short", false, "CI smoke run: 20 commands, one round, one second")
	flag.Parse()
	if *short {
		*n, *rounds, *d = 20, 1, time.Second
	}
	if err := run(*n, *rounds, *c, *rate, *d); err != nil {
		log.Fatal(err)
	}
}

// setting is one combination of the two durability knobs.
type setting struct {
	name       string
	natsAlways bool
	redisFsync string
}

var settings = []setting{
	{"defaults", false, "everysec"},
	{"NATS sync always", true, "everysec"},
	{"Redis appendfsync always", false, "always"},
	{"both (shipped)", true, "always"},
}

// result is what one setting measured over the rounds.
type result struct {
	rates   []float64
	samples []time.Duration
	p99s    []time.Duration
}

func run(n, rounds, c int, rate float64, d time.Duration) error {
	ctx := context.Background()
	got := make([]result, len(settings))
	for r := range rounds {
		for i := range settings {
			k := (i + r) % len(settings) // rotate the order every round
			s := settings[k]
			rt, lat, err := measure(ctx, s, fmt.Sprintf("d%d%d", r, k), n, c, rate, d)
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			got[k].rates = append(got[k].rates, rt)
			got[k].samples = append(got[k].samples, lat.Sorted...)
			got[k].p99s = append(got[k].p99s, lat.P99)
		}
	}
	fmt.Printf("# durability: %d commands per drain at concurrency %d; latency at %.0f cmds/s for %s; %d rounds; GOMAXPROCS %d, %s\n",
		n, c, rate, d, rounds, runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Printf("# stores in %s\n\n", os.TempDir())
	fmt.Println("| setting | JetStream sync | Redis appendfsync | cmds/s (median) | vs defaults | p50 | p99 | p99 added | cmds/s of each round | p99 of each round |")
	fmt.Println("|---|---|---|---:|---:|---:|---:|---:|---|---|")
	base := harness.Median(got[0].rates)
	baseLat := harness.LatencyOf(got[0].samples)
	for i, s := range settings {
		med := harness.Median(got[i].rates)
		l := harness.LatencyOf(got[i].samples)
		sync := "every 2 min (default)"
		if s.natsAlways {
			sync = "always"
		}
		fmt.Printf("| %s | %s | %s | %.0f | %+.0f%% | %s | %s | %s | %s | %s |\n", s.name, sync, s.redisFsync, med, 100*(med/base-1),
			ms(l.P50), ms(l.P99), ms(l.P99-baseLat.P99), rates(got[i].rates), list(got[i].p99s))
	}
	return nil
}

// measure runs one setting once: a drain of n commands, then the latency run, each on a fresh
// deployment with a fresh redis-server.
func measure(ctx context.Context, s setting, run string, n, c int, rate float64, d time.Duration) (float64, harness.Latency, error) {
	rs, err := startRedis(ctx, s.redisFsync)
	if err != nil {
		return 0, harness.Latency{}, err
	}
	defer rs.close()
	runtime.GC()
	e, err := harness.Start(harness.Options{RedisURL: rs.url, NATSSyncAlways: s.natsAlways})
	if err != nil {
		return 0, harness.Latency{}, err
	}
	t, err := e.MeasureThroughput(ctx, run+"t", n, c, harness.Proxbus)
	e.Close()
	if err != nil {
		return 0, harness.Latency{}, err
	}
	runtime.GC()
	e, err = harness.Start(harness.Options{RedisURL: rs.url, NATSSyncAlways: s.natsAlways})
	if err != nil {
		return 0, harness.Latency{}, err
	}
	defer e.Close()
	l, err := e.MeasureLatency(ctx, run+"l", rate, d, c, harness.Proxbus)
	if err != nil {
		return 0, harness.Latency{}, err
	}
	if l.Achieved < 0.9*rate {
		fmt.Fprintf(os.Stderr, "%s: the publisher kept %.0f of %.0f cmds/s\n", s.name, l.Achieved, rate)
	}
	return t.Rate, l, nil
}

// redisServer is a redis-server of this program with AOF in a directory of its own.
type redisServer struct {
	cmd  *exec.Cmd
	done chan struct{}
	dir  string
	url  string
}

// startRedis starts redis-server with `appendonly yes` and `appendfsync fsync` on a free
// loopback port and waits until it answers.
func startRedis(ctx context.Context, fsync string) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server is needed (apt-get install redis-server): %w", err)
	}
	dir, err := os.MkdirTemp("", "proxbus-bench-redis-*")
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "yes", "--appendfsync", fsync, "--dir", dir)
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("redis-server: %w", err)
	}
	rs := &redisServer{cmd: cmd, done: make(chan struct{}), dir: dir, url: fmt.Sprintf("redis://127.0.0.1:%d/0", port)}
	go func() { // owned by rs: close waits for it
		_ = cmd.Wait()
		close(rs.done)
	}()
	rc := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	defer rc.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		err := rc.Ping(ctx).Err()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			rs.close()
			return nil, errors.Join(errors.New("redis-server did not answer within 10s"), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got, err := rc.ConfigGet(ctx, "appendfsync").Result(); err != nil || got["appendfsync"] != fsync {
		rs.close()
		return nil, fmt.Errorf("redis-server: appendfsync is %v (%v), want %s", got, err, fsync)
	}
	return rs, nil
}

// close stops the server and removes its files.
func (r *redisServer) close() {
	_ = r.cmd.Process.Kill()
	<-r.done
	_ = os.RemoveAll(r.dir)
}

func rates(rs []float64) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = fmt.Sprintf("%.0f", r)
	}
	return strings.Join(s, " / ")
}

// list formats durations as milliseconds, separated by slashes.
func list(ds []time.Duration) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond))
	}
	return strings.Join(s, " / ")
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
