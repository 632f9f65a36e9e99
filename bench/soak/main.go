// Command soak is proxbus's chaos soak (issue 5): it runs NATS JetStream, Redis and three
// `proxbus serve` replicas as real processes, the Proxmox and NetBox simulators in process,
// publishes a mixed load of commands while it kills and restarts replicas, restarts NATS and
// Redis, fails NetBox PATCHes, loses Proxmox answers and adds latency spikes, and then checks
// that nothing was lost, every command has exactly one first-hand answer and that answer is
// true to the Proxmox simulator's state, no Proxmox write happened twice, no journal entry
// stayed in_progress, nothing that wrote or finished was dead-lettered and no secret leaked.
// It prints the figures and exits 1 when any of those zeros is not zero (2 when the soak
// itself could not run).
//
// With --cluster NATS is a JetStream cluster of three nats-server processes (streams R3) and
// the NATS fault is a SIGKILL of the leader of PROXBUS_COMMANDS, of PROXBUS_EVENTS and of the
// JetStream meta layer during the load (--cluster-kills); commands come from three producers
// (nats.go binary mode, and the CloudEvents Go SDK's JetStream binding in binary and in
// structured mode), and a share of them (--hot-share) acts on two guests only, one of which
// it migrates between the nodes.
//
// The endpoint lists verbs that need a second person (--approval); a decider approves or
// rejects each of their commands, some before the command arrives, the others while it waits,
// and the checks judge that every taken decision was honoured.
//
// go -C bench run ./soak [--short] [--cluster] [--commands N] …
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
	"slices"
	"strings"
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
	// maxAttempts is passed to every replica as --max-attempts, or as --max-deliver to a
	// proxbus that predates the attempt count (see attemptsFlag).
	maxAttempts  int
	killEvery    time.Duration
	restartAfter time.Duration
	faultList    string
	quiet        time.Duration
	settle       time.Duration
	repairWait   time.Duration
	taskDuration time.Duration
	logLevel     string
	keep         bool
	redisBin     string
	// redisEphemeral runs Redis without persistence, so its restart loses every record.
	redisEphemeral bool
	// redisMode is the Redis topology: redisSingle, redisSentinel or redisCluster.
	redisMode string

	// cluster runs three routed nats-server peers and R3 streams instead of one server.
	cluster bool
	// kills is the cluster-mode leader-kill schedule (--cluster-kills); serverDown how long
	// a killed peer stays down before it is restarted on its ports and store directory.
	kills      []plannedKill
	serverDown time.Duration
	// producers are the publishers the load is spread over, in the order named (see
	// producerNames); hotShare is the share of the load drawn on the two hot guests.
	producers []string
	hotShare  float64
	// approval lists the verbs whose commands need a second person on the soak's endpoint
	// (its endpoints file's approval: {verbs: …}); the soak's decider approves or rejects
	// every such command (none: no decider).
	approval []string
}

// Defaults that depend on the mode (--cluster) and on --short, unless the flag is given.
const (
	defaultCommands, defaultShortCommands               = 2000, 300
	defaultClusterCommands, defaultClusterShortCommands = 450, 150
	defaultRate, defaultClusterRate                     = 8, 6
	defaultHotShare                                     = 0.25
	defaultClusterKills                                 = "commands@0.2,events@0.45,meta@0.7"
)

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&c.commands, "commands", defaultCommands, "commands to publish (--cluster: 450)")
	fs.BoolVar(&c.short, "short", false, "CI run: 300 commands, --cluster 150 (unless --commands is given)")
	fs.Float64Var(&c.rate, "rate", defaultRate, "commands published per second (--cluster: 6)")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the load generator")
	fs.IntVar(&c.replicas, "replicas", 3, "proxbus serve replicas")
	fs.IntVar(&c.concurrency, "concurrency", 4, "--concurrency of each replica")
	fs.IntVar(&c.maxAckPending, "max-ack-pending", 0, "--max-ack-pending of each replica (0: --concurrency, or replicas × concurrency with --approval verbs; replicas × concurrency lets each replica hold messages ahead of its workers)")
	fs.DurationVar(&c.leaseTTL, "lease-ttl", 3*time.Second, "--lease-ttl of each replica")
	fs.DurationVar(&c.ackWait, "ack-wait", 4*time.Second, "--ack-wait of each replica")
	fs.IntVar(&c.maxAttempts, "max-attempts", 8, "--max-attempts of each replica (--max-deliver where proxbus has no --max-attempts)")
	fs.IntVar(&c.maxAttempts, "max-deliver", 8, "the old name of --max-attempts")
	fs.DurationVar(&c.killEvery, "kill-every", 5*time.Second, "SIGKILL a random replica this often")
	fs.DurationVar(&c.restartAfter, "restart-after", time.Second, "restart a killed replica after this")
	fs.StringVar(&c.faultList, "faults", "kill,nats,redis,netbox,lost,latency", "faults to inject (comma-separated)")
	fs.DurationVar(&c.quiet, "quiet", 20*time.Second, "quiet period after the last result, for the journal repairer")
	fs.DurationVar(&c.settle, "settle", 3*time.Minute, "how long to wait for every command's outcome after publishing")
	fs.DurationVar(&c.repairWait, "repair-wait", time.Minute, "after the quiet period, how long journal entries may still be in_progress")
	fs.DurationVar(&c.taskDuration, "task-duration", 50*time.Millisecond, "how long each simulated Proxmox task runs")
	fs.StringVar(&c.logLevel, "log-level", "debug", "replicas' log level (debug logs more places a secret could leak)")
	fs.BoolVar(&c.keep, "keep", false, "keep the work directory (logs, store) after the run")
	fs.StringVar(&c.redisMode, "redis", redisSingle, "Redis topology: single (one server, the fault restarts it), sentinel (a primary, two replicas, three Sentinels) or cluster (three primaries with a replica each); with sentinel and cluster the fault SIGKILLs the primary and brings it back as a replica")
	fs.BoolVar(&c.redisEphemeral, "redis-ephemeral", false, "run Redis without persistence (its restart loses the records: see docs/reliability.md)")
	fs.BoolVar(&c.cluster, "cluster", false, "NATS as a three-server JetStream cluster (streams R3); the NATS fault kills leaders")
	killList := fs.String("cluster-kills", defaultClusterKills, "--cluster: leaders to SIGKILL, role@fraction of the publishing period (roles commands, events, meta)")
	fs.DurationVar(&c.serverDown, "server-down", 3*time.Second, "--cluster: how long a killed NATS server stays down")
	producerList := fs.String("producers", "", "publishers of the load, comma-separated: "+strings.Join(producerNames, ", ")+
		" (default nats.go only; --cluster: all three)")
	fs.Float64Var(&c.hotShare, "hot-share", 0, "share of the load drawn as power, snapshot and migrate commands on the two hot guests (--cluster: 0.25)")
	approvalList := fs.String("approval", defaultApprovalVerbs, "verbs that need a second person on the soak's endpoint, comma-separated; the soak approves three in four of their commands and rejects the others (\"\": none)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	if !explicit["commands"] {
		switch {
		case c.cluster && c.short:
			c.commands = defaultClusterShortCommands
		case c.cluster:
			c.commands = defaultClusterCommands
		case c.short:
			c.commands = defaultShortCommands
		}
	}
	if c.cluster && !explicit["rate"] {
		c.rate = defaultClusterRate
	}
	if c.cluster && !explicit["hot-share"] {
		c.hotShare = defaultHotShare
	}
	if c.commands <= 0 || c.rate <= 0 || c.replicas <= 0 {
		return c, fmt.Errorf("commands, rate and replicas must be positive")
	}
	if c.hotShare < 0 || c.hotShare > 0.8 {
		return c, fmt.Errorf("--hot-share must be in [0, 0.8]")
	}
	var err error
	if c.kills, err = parseKillSchedule(*killList); err != nil {
		return c, err
	}
	switch {
	case *producerList != "":
		c.producers = strings.Split(*producerList, ",")
	case c.cluster:
		c.producers = slices.Clone(producerNames)
	default:
		c.producers = slices.Clone(producerNames[:1])
	}
	for i, p := range c.producers {
		c.producers[i] = strings.TrimSpace(p)
		if !slices.Contains(producerNames, c.producers[i]) {
			return c, fmt.Errorf("--producers: unknown producer %q (want %s)", p, strings.Join(producerNames, ", "))
		}
	}
	for _, v := range strings.Split(*approvalList, ",") {
		if v = strings.TrimSpace(v); v != "" {
			c.approval = append(c.approval, v)
		}
	}
	if len(c.approval) > 0 && !explicit["max-ack-pending"] {
		// A command awaiting approval holds one of the durable's ack-pending slots between its
		// polls: with as many awaiting as MaxAckPending, nothing else is delivered, the
		// decisions that would free them included. replicas × concurrency, as operations.md
		// advises for N replicas, leaves room.
		c.maxAckPending = c.replicas * c.concurrency
	}
	if c.redisMode != redisSingle && c.redisMode != redisSentinel && c.redisMode != redisCluster {
		return c, fmt.Errorf("--redis must be single, sentinel or cluster (got %q)", c.redisMode)
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
