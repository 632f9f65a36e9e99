package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/proxbus/proxbus/bench/internal/harness"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	simnetbox "github.com/proxbus/proxbus/internal/sim/netbox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// Demo credentials of the simulators (contract §10).
const (
	pveTokenID   = "proxbus@pve!demo"
	pveSecret    = "demo-secret"
	netboxToken  = "0123456789abcdef0123456789abcdef01234567"
	secretEnvVar = "PROXBUS_SOAK_PVE_SECRET"
)

// env is everything the soak runs: the child processes and the in-process simulators.
type env struct {
	dir string
	// natsNodes are the NATS servers: one, or the three peers of the cluster (--cluster).
	natsNodes []*natsNode
	redis     *redisSet
	replicas  []*proc
	pve       *simpve.Server
	netbox    *simnetbox.Server
	faults    *faults
	servers   []*http.Server
	serveErr  chan error
}

// natsURL is every NATS server's client URL, comma-separated (as nats.Connect and
// PROXBUS_NATS_URL take a server list).
func (e *env) natsURL() string {
	urls := make([]string, len(e.natsNodes))
	for i, n := range e.natsNodes {
		urls[i] = n.url()
	}
	return strings.Join(urls, ",")
}

func (e *env) redisURL() string { return e.redis.url() }

// serveSim serves h (behind the fault middleware) on a free loopback port; the server is
// closed by env.close.
func (e *env) serveSim(h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	e.servers = append(e.servers, srv)
	go func() { // owned by env: close() shuts srv down and reads the error
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		e.serveErr <- err
	}()
	return "http://" + ln.Addr().String(), nil
}

// startNATS starts the NATS peers and waits until each listens and still runs. The ports were
// free when they were picked; a peer that finds one taken by another process meanwhile (a
// shared machine) ends at once, and then every peer starts again on fresh ports and a fresh
// store, up to three times.
func (e *env) startNATS(ctx context.Context, bin, dir string, cluster bool) error {
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		if e.natsNodes, err = newNATSNodes(bin, dir, cluster); err != nil {
			return err
		}
		for _, n := range e.natsNodes { // every peer first, then wait: a peer waits for its routes
			if err := n.proc.start(); err != nil {
				return err
			}
		}
		if err = natsUp(ctx, e.natsNodes); err == nil {
			return nil
		}
		for _, n := range e.natsNodes {
			_ = n.proc.kill()
		}
		for _, d := range []string{"jetstream", "jetstream-soak-n1", "jetstream-soak-n2", "jetstream-soak-n3"} {
			_ = os.RemoveAll(filepath.Join(dir, d))
		}
		if attempt < 3 {
			fmt.Fprintf(os.Stderr, "%s  nats: %v; starting the peers again on other ports\n", time.Now().Format("15:04:05.000"), err)
		}
	}
	return err
}

// natsUp waits until every peer listens, then makes sure none ended since (a peer listens for
// clients before it binds its route port).
func natsUp(ctx context.Context, nodes []*natsNode) error {
	for _, n := range nodes {
		if err := harness.WaitPort(ctx, n.port, 15*time.Second); err != nil {
			return fmt.Errorf("%s: %w", n.proc.name, err)
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Second):
	}
	for _, n := range nodes {
		select {
		case <-n.proc.exited:
			return fmt.Errorf("%s ended after it started listening (see its log)", n.proc.name)
		default:
		}
	}
	return nil
}

// startEnv starts NATS (one server, or with cfg.cluster three routed peers), Redis and both
// simulators, and prepares the replicas ([env.startReplicas] starts them).
func startEnv(ctx context.Context, cfg config, dir string) (*env, error) {
	e := &env{dir: dir, faults: &faults{}, serveErr: make(chan error, 2)}
	proxbusBin, natsBin, err := harness.BuildBinaries(ctx, dir)
	if err != nil {
		return e, err
	}
	attempts, err := attemptsFlag(ctx, proxbusBin)
	if err != nil {
		return e, err
	}
	if err := e.startNATS(ctx, natsBin, dir, cfg.cluster); err != nil {
		return e, err
	}
	// Redis as operators should run it: with an append-only file synced on every write, so a
	// restart is an outage, not a loss (--redis-ephemeral shows the loss); with --redis
	// sentinel or cluster, replicated and failed over.
	if e.redis, err = newRedisSet(cfg.redisMode, cfg.redisBin, dir, cfg.redisEphemeral); err != nil {
		return e, fmt.Errorf("redis: %w", err)
	}
	if err := e.redis.start(ctx); err != nil {
		return e, fmt.Errorf("redis: %w", err)
	}

	simLog := slog.New(slog.DiscardHandler)
	e.pve = simpve.New(simpve.Options{Scenario: simpve.ScenarioDemo, Logger: simLog, TaskDuration: cfg.taskDuration})
	e.netbox = simnetbox.New(simnetbox.Options{Scenario: simnetbox.ScenarioDemo, Logger: simLog})
	pveURL, err := e.serveSim(e.faults.pve(e.pve.Handler()))
	if err != nil {
		return e, fmt.Errorf("pve simulator: %w", err)
	}
	netboxURL, err := e.serveSim(e.faults.netbox(e.netbox.Handler()))
	if err != nil {
		return e, fmt.Errorf("netbox simulator: %w", err)
	}

	endpoints := filepath.Join(dir, "endpoints.yaml")
	yaml := fmt.Sprintf("endpoints:\n  - id: 1\n    name: lab\n    urls: [%q]\n    token_id: %q\n    token_secret_env: %s\n"+
		"    max_parallel: 8\n    timeout: 10s\n", pveURL, pveTokenID, secretEnvVar)
	if len(cfg.approval) > 0 {
		yaml += fmt.Sprintf("    approval: {verbs: [%s]}\n", strings.Join(cfg.approval, ", "))
	}
	if err := os.WriteFile(endpoints, []byte(yaml), 0o600); err != nil {
		return e, fmt.Errorf("endpoints file: %w", err)
	}
	base := append(os.Environ(),
		"PROXBUS_NATS_URL="+e.natsURL(), "PROXBUS_REDIS_URL="+e.redisURL(),
		"PROXBUS_NETBOX_URL="+netboxURL, "PROXBUS_NETBOX_TOKEN="+netboxToken,
		"PROXBUS_ENDPOINTS_FILE="+endpoints, "PROXBUS_LOG_FORMAT=json", "PROXBUS_LOG_LEVEL="+cfg.logLevel,
		secretEnvVar+"="+pveSecret)
	for i := range cfg.replicas {
		name := fmt.Sprintf("soak-r%d", i+1)
		args := []string{"serve", "--instance", name, "--concurrency", strconv.Itoa(cfg.concurrency),
			"--lease-ttl", cfg.leaseTTL.String(), "--ack-wait", cfg.ackWait.String(),
			attempts, strconv.Itoa(cfg.maxAttempts)}
		if cfg.maxAckPending > 0 {
			args = append(args, "--max-ack-pending", strconv.Itoa(cfg.maxAckPending))
		}
		if cfg.cluster {
			args = append(args, "--stream-replicas", "3")
		}
		e.replicas = append(e.replicas, &proc{name: name, path: proxbusBin, logPath: filepath.Join(dir, name+".log"), env: base, args: args})
	}
	return e, nil
}

// startReplicas starts the proxbus replicas replicas[from:to].
func (e *env) startReplicas(from, to int) error {
	for _, r := range e.replicas[from:to] {
		if err := r.start(); err != nil {
			return err
		}
	}
	return nil
}

// close stops every process and simulator.
func (e *env) close() {
	for _, r := range e.replicas {
		_ = r.stop(10 * time.Second)
	}
	for _, n := range e.natsNodes {
		_ = n.proc.stop(5 * time.Second)
	}
	if e.redis != nil {
		e.redis.stop()
	}
	for _, s := range e.servers {
		_ = s.Close()
		<-e.serveErr
	}
	if e.pve != nil {
		_ = e.pve.Close()
	}
}
