// Command soak is proxbus's chaos soak (issue 5): it runs NATS JetStream, Redis and three
// `proxbus serve` replicas as real processes, the Proxmox and NetBox simulators in process,
// publishes a mixed load of commands while it kills and restarts replicas, restarts NATS and
// Redis, fails NetBox PATCHes, loses Proxmox answers and adds latency spikes, and then checks
// that nothing was lost, no Proxmox write happened twice, no journal entry stayed
// in_progress and no secret leaked. It prints the figures and exits 1 when any of those
// zeros is not zero (2 when the soak itself could not run).
//
// Run it from the repository root: go run ./bench/soak [--short] [--commands N] …
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// config is the soak's command line.
type config struct {
	commands    int
	short       bool
	rate        float64
	seed        uint64
	replicas    int
	concurrency int
	// maxAckPending is the durable's MaxAckPending (0: the default, --concurrency).
	maxAckPending int
	leaseTTL      time.Duration
	ackWait       time.Duration
	maxDeliver    int
	killEvery     time.Duration
	restartAfter  time.Duration
	faultList     string
	quiet         time.Duration
	settle        time.Duration
	repairWait    time.Duration
	taskDuration  time.Duration
	logLevel      string
	keep          bool
	redisBin      string
	// redisEphemeral runs Redis without persistence, so its restart loses every record.
	redisEphemeral bool
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&c.commands, "commands", 2000, "commands to publish")
	fs.BoolVar(&c.short, "short", false, "CI run: 300 commands (unless --commands is given)")
	fs.Float64Var(&c.rate, "rate", 8, "commands published per second")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the load generator")
	fs.IntVar(&c.replicas, "replicas", 3, "proxbus serve replicas")
	fs.IntVar(&c.concurrency, "concurrency", 4, "--concurrency of each replica")
	fs.IntVar(&c.maxAckPending, "max-ack-pending", 0, "--max-ack-pending of each replica (0: --concurrency; replicas × concurrency lets each replica hold messages ahead of its workers)")
	fs.DurationVar(&c.leaseTTL, "lease-ttl", 3*time.Second, "--lease-ttl of each replica")
	fs.DurationVar(&c.ackWait, "ack-wait", 4*time.Second, "--ack-wait of each replica")
	fs.IntVar(&c.maxDeliver, "max-deliver", 8, "--max-deliver of each replica")
	fs.DurationVar(&c.killEvery, "kill-every", 5*time.Second, "SIGKILL a random replica this often")
	fs.DurationVar(&c.restartAfter, "restart-after", time.Second, "restart a killed replica after this")
	fs.StringVar(&c.faultList, "faults", "kill,nats,redis,netbox,lost,latency", "faults to inject (comma-separated)")
	fs.DurationVar(&c.quiet, "quiet", 20*time.Second, "quiet period after the last result, for the journal repairer")
	fs.DurationVar(&c.settle, "settle", 3*time.Minute, "how long to wait for every command's outcome after publishing")
	fs.DurationVar(&c.repairWait, "repair-wait", time.Minute, "after the quiet period, how long journal entries may still be in_progress")
	fs.DurationVar(&c.taskDuration, "task-duration", 50*time.Millisecond, "how long each simulated Proxmox task runs")
	fs.StringVar(&c.logLevel, "log-level", "debug", "replicas' log level (debug logs more places a secret could leak)")
	fs.BoolVar(&c.keep, "keep", false, "keep the work directory (logs, store) after the run")
	fs.BoolVar(&c.redisEphemeral, "redis-ephemeral", false, "run Redis without persistence (its restart loses the records: see docs/reliability.md)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.short {
		explicit := false
		fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "commands" })
		if !explicit {
			c.commands = 300
		}
	}
	if c.commands <= 0 || c.rate <= 0 || c.replicas <= 0 {
		return c, fmt.Errorf("commands, rate and replicas must be positive")
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return c, fmt.Errorf("redis-server not on PATH: %w", err)
	}
	c.redisBin = bin
	return c, nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if err == flag.ErrHelp {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, cfg, os.Stdout)
	stop()
	os.Exit(code)
}

// newCanary is a unique secret value: it must never be seen anywhere proxbus writes.
func newCanary() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "canary-pw-" + hex.EncodeToString(b)
}
