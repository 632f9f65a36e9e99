package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/bench/internal/harness"
	"github.com/proxbus/proxbus/events"
	simnetbox "github.com/proxbus/proxbus/internal/sim/netbox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// Credentials of the simulators (contract §10).
const (
	pveTokenID   = "proxbus@pve!demo"
	pveSecret    = "demo-secret"
	secretEnvVar = "PROXBUS_FLEET_PVE_SECRET"
)

// env is one run's deployment: nats-server, redis-server and the proxbus replicas as
// processes; one Proxmox simulator per endpoint and the NetBox simulator in this process,
// each behind a request counter.
type env struct {
	dir       string
	subjects  events.Subjects
	nats      *proc
	natsPort  int
	redis     *proc
	redisPort int
	// redisCount sits between the replicas and Redis and counts the commands they send
	// (round trips; INFO commandstats also counts the commands inside Lua scripts).
	redisCount *harness.RedisCounter
	replicas   []*proc

	pves        []*simpve.Server
	pveCounts   []*harness.HTTPCounter
	netbox      *simnetbox.Server
	netboxCount *harness.HTTPCounter
	servers     []*http.Server
	serveDone   chan struct{}

	nc *nats.Conn
	js jetstream.JetStream
}

func (e *env) natsURL() string   { return "nats://127.0.0.1:" + strconv.Itoa(e.natsPort) }
func (e *env) redisAddr() string { return "127.0.0.1:" + strconv.Itoa(e.redisPort) }

// startEnv starts everything of one run in dir and returns once every replica serves. The
// guests are added to their endpoint's simulator.
func startEnv(ctx context.Context, cfg config, bins binaries, dir string, guests []guest, poll bool) (_ *env, err error) {
	e := &env{dir: dir, subjects: events.NewSubjects("proxbus"), serveDone: make(chan struct{}, cfg.endpoints+1)}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	if e.natsPort, err = harness.FreePort(); err != nil {
		return nil, err
	}
	if e.redisPort, err = harness.FreePort(); err != nil {
		return nil, err
	}
	e.nats = &proc{name: "nats-server", path: bins.nats, logPath: filepath.Join(dir, "nats.log"),
		args: []string{"-js", "-a", "127.0.0.1", "-p", strconv.Itoa(e.natsPort), "-sd", filepath.Join(dir, "jetstream")}}
	// A Redis of the benchmark's own, without persistence: its INFO commandstats count only
	// this run's commands.
	e.redis = &proc{name: "redis-server", path: bins.redis, logPath: filepath.Join(dir, "redis.log"),
		args: []string{"--port", strconv.Itoa(e.redisPort), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir}}
	for _, s := range []struct {
		p    *proc
		port int
	}{{e.nats, e.natsPort}, {e.redis, e.redisPort}} {
		if err := s.p.start(); err != nil {
			return nil, err
		}
		if err := harness.WaitPort(ctx, s.port, 15*time.Second); err != nil {
			return nil, fmt.Errorf("%s: %w", s.p.name, err)
		}
	}

	if e.redisCount, err = harness.StartRedisCounter(e.redisAddr(), nil); err != nil {
		return nil, err
	}

	simLog := slog.New(slog.DiscardHandler)
	urls := make([]string, cfg.endpoints)
	for i := range cfg.endpoints {
		pve := simpve.New(simpve.Options{Scenario: simpve.ScenarioEmpty, Logger: simLog, TaskDuration: cfg.task, TaskSpread: cfg.taskSpread})
		count := harness.NewHTTPCounter(nil)
		if urls[i], err = e.serve(count.Wrap(pve.Handler())); err != nil {
			return nil, fmt.Errorf("pve simulator %d: %w", i+1, err)
		}
		e.pves, e.pveCounts = append(e.pves, pve), append(e.pveCounts, count)
	}
	for _, g := range guests {
		e.pves[g.endpoint].AddGuest(simpve.GuestSpec{VMID: g.vmid, Node: g.node, Name: g.name(), Status: "running"})
	}
	e.netbox = simnetbox.New(simnetbox.Options{Logger: simLog})
	for i := range cfg.endpoints {
		e.netbox.AddEndpoint(int64(i+1), fmt.Sprintf("fleet-%d", i+1), true)
	}
	e.netboxCount = harness.NewHTTPCounter(nil)
	netboxURL, err := e.serve(e.netboxCount.Wrap(e.netbox.Handler()))
	if err != nil {
		return nil, fmt.Errorf("netbox simulator: %w", err)
	}

	endpoints := filepath.Join(dir, "endpoints.yaml")
	var y strings.Builder
	y.WriteString("endpoints:\n")
	for i, u := range urls {
		fmt.Fprintf(&y, "  - id: %d\n    name: fleet-%d\n    urls: [%q]\n    token_id: %q\n    token_secret_env: %s\n    max_parallel: %d\n    timeout: 10s\n",
			i+1, i+1, u, pveTokenID, secretEnvVar, cfg.maxParallel)
	}
	if err := os.WriteFile(endpoints, []byte(y.String()), 0o600); err != nil {
		return nil, fmt.Errorf("endpoints file: %w", err)
	}
	base := append(os.Environ(),
		"PROXBUS_NATS_URL="+e.natsURL(), "PROXBUS_REDIS_URL=redis://"+e.redisCount.Addr()+"/0",
		"PROXBUS_NETBOX_URL="+netboxURL, "PROXBUS_NETBOX_TOKEN="+simnetbox.TokenV1,
		"PROXBUS_ENDPOINTS_FILE="+endpoints, "PROXBUS_LOG_FORMAT=json", "PROXBUS_LOG_LEVEL="+cfg.logLevel,
		secretEnvVar+"="+pveSecret)
	for i := range cfg.replicas {
		name := fmt.Sprintf("fleet-r%d", i+1)
		args := []string{"serve", "--instance", name, "--concurrency", strconv.Itoa(cfg.concurrency),
			"--max-ack-pending", strconv.Itoa(cfg.maxAckPending), "--command-max-age", cfg.commandMaxAge.String()}
		if poll {
			args = append(args, "--no-task-watch")
		}
		if cfg.watchInterval > 0 {
			args = append(args, "--task-watch-interval", cfg.watchInterval.String())
		}
		e.replicas = append(e.replicas, &proc{name: name, path: bins.proxbus, logPath: filepath.Join(dir, name+".log"), env: base, args: args})
	}

	if e.nc, err = nats.Connect(e.natsURL(), nats.Name("bench-fleet")); err != nil {
		return nil, fmt.Errorf("nats: %w", err)
	}
	if e.js, err = jetstream.New(e.nc); err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	// A rolling start, as an operator would do it: the first replica provisions the streams
	// and the durable, then the others join.
	if err := e.startReplicas(ctx, e.replicas[:1]); err != nil {
		return nil, err
	}
	if err := e.startReplicas(ctx, e.replicas[1:]); err != nil {
		return nil, err
	}
	return e, nil
}

// binaries are the programs a run starts.
type binaries struct{ proxbus, nats, redis string }

// startReplicas starts rs and waits until each logs that it serves and the durable has a
// pull request of each replica started so far.
func (e *env) startReplicas(ctx context.Context, rs []*proc) error {
	for _, r := range rs {
		if err := r.start(); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, r := range rs {
		for !r.logContains(`"proxbus serving"`) {
			if !r.alive() {
				return fmt.Errorf("%s exited at start (see %s)", r.name, r.logPath)
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s not serving after 60s (see %s)", r.name, r.logPath)
			}
			if err := sleep(ctx, 50*time.Millisecond); err != nil {
				return err
			}
		}
	}
	started := 0
	for _, r := range e.replicas {
		if r.alive() {
			started++
		}
	}
	for {
		info, err := e.consumerInfo(ctx)
		if err == nil && info.NumWaiting >= started {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the durable has %d pull requests for %d replicas after 60s (err %v)", info.NumWaiting, started, err)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// consumerInfo reads the shared durable's state (a zero value when it cannot).
func (e *env) consumerInfo(ctx context.Context) (jetstream.ConsumerInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := e.js.Consumer(ctx, e.subjects.CommandsStream(), "proxbus")
	if err != nil {
		return jetstream.ConsumerInfo{}, fmt.Errorf("consumer: %w", err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return jetstream.ConsumerInfo{}, fmt.Errorf("consumer info: %w", err)
	}
	return *info, nil
}

// serve serves h on a free loopback port until close.
func (e *env) serve(h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	e.servers = append(e.servers, srv)
	go func() { // ends with srv.Close in close
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "fleet: simulator server:", err)
		}
		e.serveDone <- struct{}{}
	}()
	return "http://" + ln.Addr().String(), nil
}

// close stops every process and simulator of the run.
func (e *env) close() {
	for _, r := range e.replicas {
		r.stop(30 * time.Second)
	}
	if e.nc != nil {
		e.nc.Close()
	}
	if e.redisCount != nil {
		_ = e.redisCount.Close()
	}
	for _, p := range []*proc{e.nats, e.redis} {
		if p != nil {
			p.stop(10 * time.Second)
		}
	}
	for _, s := range e.servers {
		_ = s.Close()
		<-e.serveDone
	}
	for _, p := range e.pves {
		_ = p.Close()
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
