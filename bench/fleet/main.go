// Command fleet is proxbus's fleet-scale benchmark: a backlog of vm.snapshot.create commands
// (each one Proxmox task on its guest, lasting -task ± -task-spread as a real cluster's tasks
// vary, so that no wait is in step with its task's end) over 1,000 guests on 3 endpoints with
// max_parallel 8, drained by three `proxbus serve` replicas run as processes, with
// nats-server and a redis-server of its own as processes and one Proxmox simulator per
// endpoint (plus the NetBox simulator) in this process.
//
// For each backlog (-n) it runs the commands spread evenly over the guests ("uniform") and
// then with a share (-hot) of them on 10 hot guests, each in a fresh deployment, and reports
//
//   - the drain time (first publish → last result) against the ideal, commands × task ÷
//     (endpoints × max_parallel);
//   - deliveries per command (the durable's consumer sequence: every delivery, redeliveries
//     included, ÷ commands);
//   - Redis commands per command (INFO commandstats of its own Redis, before and after);
//   - Proxmox and NetBox requests per command;
//   - the peak RSS (VmHWM) of each replica;
//   - the queueing time (publish → the task step's started event) of the commands on the
//     cold guests, p50 and p99, and of those on the hot guests;
//   - how long after its end each task's end was seen (the simulator's end → the task
//     step's done event), p50 and p90.
//
// It is a benchmark, not a test: it exits 1 only when a run could not be carried out.
//
//	go -C bench run ./fleet                               # -n 1000,10000 -task 2s (about 32 minutes)
//	go -C bench run ./fleet -n 10000 -hot 0               # the headline run alone
//	go -C bench run ./fleet -n 600 -task 200ms            # a quick look
//	go -C bench run ./fleet -short                        # CI: -n 300 -task 100ms
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/proxbus/proxbus/bench/internal/harness"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// config is the command line.
type config struct {
	backlogs      []int
	hotShares     []float64
	task          time.Duration
	taskSpread    float64
	guests        int
	hotGuests     int
	endpoints     int
	maxParallel   int
	replicas      int
	concurrency   int
	maxAckPending int
	commandMaxAge time.Duration
	logLevel      string
	timeoutFactor float64
	sampleEvery   time.Duration
	progressEvery time.Duration
	traceDir      string
	keep          bool
	// waits are how the replicas wait for tasks, each a run of its own: false the watch of
	// each endpoint, true each command polling its own task (--no-task-watch).
	waits []bool
	// watchInterval is the replicas' --task-watch-interval (0: their default).
	watchInterval time.Duration
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
	fs.SetOutput(stderr)
	backlogs := fs.String("n", "1000,10000", "backlogs to drain, comma-separated (each a run of its own)")
	hot := fs.String("hot", "0,0.3", "shares of the commands on the hot guests, comma-separated (0: uniform); every backlog runs each")
	fs.DurationVar(&c.task, "task", 2*time.Second, "mean duration of the simulated Proxmox tasks")
	fs.Float64Var(&c.taskSpread, "task-spread", 0.15, "the tasks last -task × (1 ± this), evenly spread (0: all alike)")
	short := fs.Bool("short", false, "CI smoke run: -n 300 -task 100ms (unless given)")
	fs.IntVar(&c.guests, "guests", 1000, "guests of the fleet")
	fs.IntVar(&c.hotGuests, "hot-guests", 10, "hot guests of a hot run")
	fs.IntVar(&c.endpoints, "endpoints", 3, "Proxmox endpoints (one simulator each)")
	fs.IntVar(&c.maxParallel, "max-parallel", 8, "max_parallel of every endpoint")
	fs.IntVar(&c.replicas, "replicas", 3, "proxbus serve replicas")
	fs.IntVar(&c.concurrency, "concurrency", 16, "--concurrency of each replica (16: twice the slots, as docs/operations.md advises)")
	fs.IntVar(&c.maxAckPending, "max-ack-pending", 0, "--max-ack-pending of the replicas (0: replicas × concurrency, as docs/operations.md advises)")
	fs.DurationVar(&c.commandMaxAge, "command-max-age", 2*time.Hour, "--command-max-age of the replicas (the default 15 min would expire the tail of a long backlog)")
	fs.StringVar(&c.logLevel, "log-level", "info", "the replicas' log level")
	fs.Float64Var(&c.timeoutFactor, "timeout", 4, "give up on a run after this many ideal drain times (plus 2 minutes)")
	fs.DurationVar(&c.sampleEvery, "sample", 500*time.Millisecond, "how often the durable's state and the running tasks are sampled")
	fs.DurationVar(&c.progressEvery, "progress", 30*time.Second, "how often a progress line is logged (stderr)")
	fs.StringVar(&c.traceDir, "trace", "", "write each run's samples and per-command times as CSV files into this directory")
	fs.BoolVar(&c.keep, "keep", false, "keep the work directory (the processes' logs)")
	fs.DurationVar(&c.watchInterval, "watch-interval", 0, "--task-watch-interval of the replicas (0: their default)")
	wait := fs.String("wait", "watch,poll", "how the replicas wait for tasks, comma-separated, each a run of its own: watch (one watch per endpoint) or poll (--no-task-watch: a status poll per task)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	if *short {
		if !explicit["n"] {
			*backlogs = "300"
		}
		if !explicit["task"] {
			c.task = 100 * time.Millisecond
		}
		if !explicit["progress"] {
			c.progressEvery = 10 * time.Second
		}
	}
	var err error
	if c.backlogs, err = parseList(*backlogs, strconv.Atoi); err != nil {
		return c, fmt.Errorf("-n: %w", err)
	}
	if c.hotShares, err = parseList(*hot, func(s string) (float64, error) { return strconv.ParseFloat(s, 64) }); err != nil {
		return c, fmt.Errorf("-hot: %w", err)
	}
	for w := range strings.SplitSeq(*wait, ",") {
		switch strings.TrimSpace(w) {
		case "watch":
			c.waits = append(c.waits, false)
		case "poll":
			c.waits = append(c.waits, true)
		default:
			return c, fmt.Errorf("-wait: %q is neither watch nor poll", w)
		}
	}
	for _, n := range c.backlogs {
		if n <= 0 {
			return c, errors.New("-n: backlogs must be positive")
		}
	}
	for _, h := range c.hotShares {
		if h < 0 || h >= 1 {
			return c, errors.New("-hot: shares must be in [0, 1)")
		}
	}
	if c.guests <= c.hotGuests || c.hotGuests <= 0 || c.endpoints <= 0 || c.maxParallel <= 0 || c.replicas <= 0 || c.concurrency <= 0 {
		return c, errors.New("-guests must exceed -hot-guests; -hot-guests, -endpoints, -max-parallel, -replicas and -concurrency must be positive")
	}
	if c.task <= 0 {
		return c, errors.New("-task must be positive")
	}
	if c.taskSpread < 0 || c.taskSpread >= 1 {
		return c, errors.New("-task-spread must be in [0, 1)")
	}
	if c.maxAckPending == 0 {
		c.maxAckPending = c.replicas * c.concurrency
	}
	return c, nil
}

// parseList parses a comma-separated list.
func parseList[T any](s string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		v, err := parse(item)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", item, err)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, cfg, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

// run builds the binaries, runs every backlog and hot share, and prints the report to out
// (progress goes to logw).
func run(ctx context.Context, cfg config, out, logw io.Writer) (err error) {
	logf := func(format string, a ...any) {
		fmt.Fprintf(logw, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
	}
	workDir, err := os.MkdirTemp("", "proxbus-fleet-")
	if err != nil {
		return fmt.Errorf("work dir: %w", err)
	}
	defer func() { // kept when a run failed: its processes' logs say why
		if err != nil || cfg.keep {
			logf("work directory kept: %s", workDir)
			return
		}
		_ = os.RemoveAll(workDir)
	}()
	redisBin, err := exec.LookPath("redis-server")
	if err != nil {
		return fmt.Errorf("redis-server not on PATH: %w", err)
	}
	logf("building proxbus and nats-server into %s", workDir)
	proxbusBin, natsBin, err := harness.BuildBinaries(ctx, workDir)
	if err != nil {
		return err
	}
	bins := binaries{proxbus: proxbusBin, nats: natsBin, redis: redisBin}
	var results []runResult
	for _, n := range cfg.backlogs {
		for _, h := range cfg.hotShares {
			for _, poll := range cfg.waits {
				spec := runSpec{n: n, hotShare: h, poll: poll}
				load1, _ := loadAverage()
				r, err := runOne(ctx, cfg, bins, workDir, spec, logf)
				if err != nil {
					return fmt.Errorf("%s: %w", spec, err)
				}
				r.load = load1
				logf("%s: drain %s (%.3f × ideal), %.2f deliveries per command", r.spec, r.drain.Round(100*time.Millisecond),
					r.drain.Seconds()/r.ideal.Seconds(), float64(r.deliveries)/float64(n))
				results = append(results, r)
			}
		}
	}
	report(out, cfg, results)
	return nil
}

// loadAverage is the 1-minute load average of the machine (from /proc/loadavg).
func loadAverage() (float64, error) {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, fmt.Errorf("loadavg: %w", err)
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return 0, errors.New("loadavg: empty")
	}
	return strconv.ParseFloat(f[0], 64)
}
