package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/handlers"
	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/embedded"
	"github.com/proxbus/proxbus/internal/health"
	"github.com/proxbus/proxbus/internal/netbox"
	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/internal/repair"
	simnetbox "github.com/proxbus/proxbus/internal/sim/netbox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
	"github.com/proxbus/proxbus/internal/testenv"
	"github.com/proxbus/proxbus/internal/tracing"
	"github.com/proxbus/proxbus/store"
)

// TestConfigDefaultsAndRefusals pins Config's own defaults, and that what cannot work is an
// error wrapping config.ErrInvalid naming the setting, never replaced by a default.
func TestConfigDefaultsAndRefusals(t *testing.T) {
	t.Parallel()
	ok := Config{NetBoxURL: "http://netbox", Endpoints: []proxmox.EndpointConfig{}}
	c := ok.withDefaults()
	if c.NATSURL != DefaultNATSURL || c.RedisURL != DefaultRedisURL || c.EndpointCacheTTL != DefaultEndpointCacheTTL ||
		c.Instance == "" || c.Getenv == nil || c.LogHandler == nil || c.Consumer.Subjects.Prefix != "proxbus" {
		t.Errorf("defaults = %+v", c)
	}
	if err := c.validate(); err != nil {
		t.Errorf("validate: %v", err)
	}
	cases := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no NetBox URL", func(c *Config) { c.NetBoxURL = "" }, "PROXBUS_NETBOX_URL"},
		{"no endpoints", func(c *Config) { c.Endpoints = nil }, "PROXBUS_ENDPOINTS_FILE"},
		{"endpoint cache too long", func(c *Config) { c.EndpointCacheTTL = time.Minute }, "EndpointCacheTTL"},
		{"negative endpoint cache", func(c *Config) { c.EndpointCacheTTL = -time.Second }, "EndpointCacheTTL"},
		{"negative task poll", func(c *Config) { c.TaskPollInterval = -time.Second }, "TaskPollInterval"},
	}
	for _, tc := range cases {
		c := ok
		tc.mod(&c)
		if err := c.withDefaults().validate(); !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want config.ErrInvalid naming %s", tc.name, err, tc.want)
		}
	}
}

// serveEnv is one isolated deployment for Serve: NATS, Redis (a key prefix of its own), the
// Proxmox and NetBox simulators, and a configuration of two endpoints on the Proxmox one.
type serveEnv struct {
	nats   *testenv.NATS
	redis  *testenv.Redis
	pve    *simpve.Server
	netbox *simnetbox.Server
	nbURL  string
	logs   *testenv.Buffer
	cfg    Config
}

func newServeEnv(t *testing.T) *serveEnv {
	t.Helper()
	e := &serveEnv{nats: testenv.StartNATS(t), redis: testenv.StartRedis(t), logs: &testenv.Buffer{}}
	e.pve = simpve.New(simpve.Options{Scenario: "demo"})
	pveURL, err := e.pve.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.pve.Close() })
	e.netbox = simnetbox.New(simnetbox.Options{Scenario: "demo"})
	if e.nbURL, err = e.netbox.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.netbox.Close() })
	ep := func(id int64, name, secretEnv string) proxmox.EndpointConfig {
		return proxmox.EndpointConfig{ID: id, Name: name, URLs: []string{pveURL}, TokenID: DemoPVETokenID,
			TokenSecretEnv: secretEnv, Timeout: 5 * time.Second}
	}
	e.cfg = Config{
		NATSURL: e.nats.URL, RedisURL: e.redis.URL, NetBoxURL: e.nbURL, NetBoxToken: DemoNetBoxToken,
		Endpoints: []proxmox.EndpointConfig{ep(1, "lab", "LAB_SECRET"), ep(2, "lab2", "LAB2_SECRET")},
		Getenv: func(name string) string {
			if name == "LAB_SECRET" || name == "LAB2_SECRET" {
				return DemoPVESecret
			}
			return ""
		},
		Consumer: consumer.Config{Subjects: events.NewSubjects("proxbus"), Concurrency: 2, AckWait: 2 * time.Second},
		Store:    store.Options{Prefix: e.redis.Prefix},
		Pipeline: handlers.Settings{MaxAttempts: 2, BusyDelay: 20 * time.Millisecond, MaxWait: 100 * time.Millisecond,
			JournalRetryDelay: 10 * time.Millisecond},
		Repair:           repair.Config{Interval: time.Hour},
		TaskPollInterval: 10 * time.Millisecond,
		StartupMaxWait:   100 * time.Millisecond,
		LogHandler:       slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}),
		Tracing:          tracing.Options{Getenv: func(string) string { return "" }},
	}
	return e
}

// served is a Serve running in a goroutine.
type served struct {
	t      *testing.T
	done   chan struct{} // closed when Serve returned; err is then set
	err    error
	ready  chan struct{}
	cancel context.CancelFunc
	base   string // the HTTP server's URL
}

// serve starts Serve with cfg and an HTTP listener; stop (also at cleanup) ends it.
func serve(t *testing.T, cfg Config) *served {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTPListener = ln
	s := &served{t: t, done: make(chan struct{}), ready: make(chan struct{}), base: "http://" + ln.Addr().String()}
	var once sync.Once
	cfg.OnReady = func() { once.Do(func() { close(s.ready) }) }
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		defer close(s.done)
		s.err = Serve(ctx, cfg)
	}()
	t.Cleanup(func() { _ = s.stop() })
	return s
}

// stop cancels Serve and returns its error.
func (s *served) stop() error {
	s.cancel()
	return s.exited()
}

// exited waits for Serve to return and returns its error.
func (s *served) exited() error {
	select {
	case <-s.done:
		return s.err
	case <-time.After(30 * time.Second):
		s.t.Error("Serve still runs after 30s")
		return nil
	}
}

// waitReady waits for OnReady.
func (s *served) waitReady() {
	s.t.Helper()
	select {
	case <-s.ready:
	case <-s.done:
		s.t.Fatalf("Serve returned before it was ready: %v", s.err)
	case <-time.After(30 * time.Second):
		s.t.Fatal("not ready after 30s")
	}
}

// readyz reads /readyz.
func (s *served) readyz() (int, readyBody) {
	s.t.Helper()
	resp, err := http.Get(s.base + PathReadyz)
	if err != nil {
		return 0, readyBody{}
	}
	defer func() { _ = resp.Body.Close() }()
	var body readyBody
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		s.t.Fatalf("readyz body: %v", err)
	}
	return resp.StatusCode, body
}

// eventually polls cond until it holds, failing the test after 30s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("never: %s", what)
}

// freeAddr is a loopback address nothing listens on (a moment ago).
func freeAddr(t *testing.T) (string, int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	_ = ln.Close()
	return addr.String(), addr.Port
}

// TestServeStartupProblems: a misconfiguration waiting cannot cure stops Serve with one
// message per problem, all at once, each naming the flag or the endpoint and what to fix;
// no secret appears in it.
func TestServeStartupProblems(t *testing.T) {
	t.Parallel()
	notFound := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(notFound.Close)
	const badToken = "ffffffffffffffffffffffffffffffffffffffff"
	natsAuth, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, Username: "proxbus", Password: "nats-pass", NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go natsAuth.Start()
	if !natsAuth.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(natsAuth.Shutdown)
	tlsNetBox := httptest.NewTLSServer(simnetbox.New(simnetbox.Options{Scenario: "demo"}).Handler())
	t.Cleanup(tlsNetBox.Close)
	redisAuth := miniredis.NewMiniRedis()
	redisAuth.RequireAuth("redis-pass")
	if err := redisAuth.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(redisAuth.Close)
	tests := []struct {
		name     string
		tune     func(e *serveEnv, c *Config)
		want     []string // substrings of the message, in order
		wantErr  []error
		problems int
	}{
		{
			name:    "a wrong NetBox token",
			tune:    func(_ *serveEnv, c *Config) { c.NetBoxToken = badToken },
			want:    []string{"--netbox-token (PROXBUS_NETBOX_TOKEN, or --netbox-token-file): NetBox at http://127.0.0.1:"},
			wantErr: []error{netbox.ErrUnauthorized}, problems: 1,
		},
		{
			name: "a Proxmox token refused for one endpoint",
			tune: func(_ *serveEnv, c *Config) {
				get := c.Getenv
				c.Getenv = func(n string) string {
					if n == "LAB2_SECRET" {
						return "not-the-secret"
					}
					return get(n)
				}
			},
			want:    []string{"endpoint 2 (lab2) of the endpoints file, urls http://127.0.0.1:"},
			wantErr: []error{proxmox.ErrUnauthorized}, problems: 1,
		},
		{
			name: "NATS and Redis refuse the credentials",
			tune: func(_ *serveEnv, c *Config) {
				c.NATSURL = "nats://proxbus:wrong-pass@" + natsAuth.Addr().String()
				c.RedisURL = "redis://:wrong-pass@" + redisAuth.Addr() + "/0"
			},
			want: []string{"--nats-url (PROXBUS_NATS_URL) nats://proxbus:xxxxx@127.0.0.1:", "the NATS server refused the credentials",
				"--redis-url (PROXBUS_REDIS_URL) redis://:xxxxx@127.0.0.1:", "Redis refused the credentials"},
			wantErr: []error{nats.ErrAuthorization}, problems: 2,
		},
		{
			name:     "NetBox's certificate does not verify",
			tune:     func(_ *serveEnv, c *Config) { c.NetBoxURL = tlsNetBox.URL },
			want:     []string{"--netbox-url (PROXBUS_NETBOX_URL) " + tlsNetBox.URL + ": NetBox's TLS certificate does not verify", "--netbox-tls-ca"},
			problems: 1,
		},
		{
			name: "all at once: the NetBox URL and an endpoint's URL",
			tune: func(_ *serveEnv, c *Config) {
				c.NetBoxURL = notFound.URL
				c.Endpoints[0].URLs = []string{notFound.URL}
			},
			want:    []string{"--netbox-url (PROXBUS_NETBOX_URL) " + notFound.URL + ": this is not a NetBox API", "endpoint 1 (lab) of the endpoints file, urls " + "http://", "not a Proxmox VE API"},
			wantErr: []error{netbox.ErrNotNetBox, proxmox.ErrNotProxmox}, problems: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newServeEnv(t)
			cfg := e.cfg
			cfg.Endpoints = slices.Clone(cfg.Endpoints)
			tt.tune(e, &cfg)
			err := serve(t, cfg).exited()
			var se *StartupError
			if !errors.As(err, &se) || !errors.Is(err, ErrStartup) {
				t.Fatalf("Serve = %v, want a *StartupError", err)
			}
			msg := err.Error()
			t.Logf("the message:\n%s", msg)
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error lacks %q:\n%s", w, msg)
				}
			}
			for _, w := range tt.wantErr {
				if !errors.Is(err, w) {
					t.Errorf("error does not match %v: %s", w, msg)
				}
			}
			if len(se.Problems) != tt.problems {
				t.Errorf("%d problems, want %d: %s", len(se.Problems), tt.problems, msg)
			}
			for _, secret := range []string{badToken, DemoPVESecret, "not-the-secret", DemoNetBoxToken, "wrong-pass"} {
				if strings.Contains(msg, secret) || strings.Contains(e.logs.String(), secret) {
					t.Errorf("a secret (%.6s…) in the error or the log", secret)
				}
			}
		})
	}
}

// startRedisServer runs redis-server on port (no persistence) until the returned stop is
// called or the test ends. Without the binary the test is skipped, unless CI requires Redis.
func startRedisServer(t *testing.T, port int) (stop func()) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("PROXBUS_TEST_REDIS") == "required" {
			t.Fatalf("redis-server not on PATH: %v", err)
		}
		t.Skip("redis-server not on PATH")
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatalf("redis-server: %v", err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	t.Cleanup(stop)
	return stop
}

// TestServeWaitsForRedis: with Redis not up yet Serve waits (each try logged) and /readyz
// answers 503 naming redis and why; once a Redis comes up on that port the replica becomes
// ready; when that Redis goes away at run time /readyz names it again.
func TestServeWaitsForRedis(t *testing.T) {
	t.Parallel()
	e := newServeEnv(t)
	addr, port := freeAddr(t)
	cfg := e.cfg
	cfg.RedisURL = "redis://" + addr + "/0"
	s := serve(t, cfg)
	eventually(t, "readyz naming redis while it waits", func() bool {
		code, body := s.readyz()
		return code == http.StatusServiceUnavailable && slices.Contains(body.Down, "redis") &&
			body.Checks["redis"] == "unreachable: connection refused"
	})
	eventually(t, "a log line per try", func() bool { return strings.Count(e.logs.String(), `"msg":"waiting for Redis`) >= 2 })
	stopRedis := startRedisServer(t, port)
	s.waitReady()
	if code, body := s.readyz(); code != http.StatusOK || !body.Ready || body.Checks["redis"] != "ok" {
		t.Fatalf("readyz after Redis came up: %d %+v", code, body)
	}
	stopRedis()
	eventually(t, "readyz naming redis once it is gone", func() bool {
		code, body := s.readyz()
		return code == http.StatusServiceUnavailable && slices.Equal(body.Down, []string{"redis"})
	})
	if err := s.stop(); err != nil {
		t.Errorf("Serve = %v after its cancellation", err)
	}
}

// TestServeWaitsForNATS: with no NATS server yet Serve waits, /readyz names nats, and a
// cancellation while it waits is a clean stop (nil); started again, it becomes ready once the
// server comes up on that port.
func TestServeWaitsForNATS(t *testing.T) {
	t.Parallel()
	e := newServeEnv(t)
	_, port := freeAddr(t)
	cfg := e.cfg
	cfg.NATSURL = fmt.Sprintf("nats://127.0.0.1:%d", port)
	s := serve(t, cfg)
	eventually(t, "readyz naming nats", func() bool {
		code, body := s.readyz()
		return code == http.StatusServiceUnavailable && slices.Contains(body.Down, "nats") && body.Checks["nats"] == "unreachable: connection refused"
	})
	if err := s.stop(); err != nil {
		t.Fatalf("Serve cancelled while waiting = %v, want nil", err)
	}
	s = serve(t, cfg)
	eventually(t, "a waiting line", func() bool { return strings.Contains(e.logs.String(), `"msg":"waiting for NATS`) })
	srv, err := embedded.StartNATS(embedded.NATSOptions{Host: "127.0.0.1", Port: port, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	s.waitReady()
}

// TestServeEndpointUnreachableAtStart: an endpoint whose Proxmox cannot be reached does not
// stop the start; /readyz names it (advisory: the replica is ready) until it answers.
func TestServeEndpointUnreachableAtStart(t *testing.T) {
	t.Parallel()
	e := newServeEnv(t)
	e.pve.SetUnreachable(true)
	cfg := e.cfg
	cfg.Endpoints = cfg.Endpoints[:1]
	s := serve(t, cfg)
	s.waitReady()
	code, body := s.readyz()
	if code != http.StatusOK || !strings.HasPrefix(body.Checks["proxmox/1"], "unreachable") {
		t.Fatalf("readyz %d %+v, want 200 naming proxmox/1 unreachable", code, body)
	}
	e.pve.SetUnreachable(false)
	eventually(t, "readyz says proxmox/1 ok", func() bool {
		_, body := s.readyz()
		return body.Checks["proxmox/1"] == "ok"
	})
	eventually(t, "one line saying it is reachable", func() bool {
		return strings.Count(e.logs.String(), "proxmox/1 is reachable again") == 1
	})
}

// TestProvisionRetries: provisioning that JetStream does not answer in time (a leader
// election) is tried again, /readyz naming "streams" meanwhile, until it succeeds; one that
// waiting does not cure is a *StartupError naming what to fix.
func TestProvisionRetries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		errs      []error // the answers of the tries, then nil
		wantTries int
		want      string // "" success, else a substring of the *StartupError
	}{
		{"timeouts, then provisioned", []error{context.DeadlineExceeded, nats.ErrTimeout, &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}}, 4, ""},
		{"too few peers, then provisioned", []error{&jetstream.APIError{Code: 500, ErrorCode: 10005, Description: "no suitable peers for placement"}}, 2, ""},
		{"no JetStream", []error{fmt.Errorf("provision stream X: %w", jetstream.ErrJetStreamNotEnabled)}, 1, "enable JetStream on the server"},
		{"a conflicting stream", []error{fmt.Errorf("provision stream X: %w", &jetstream.APIError{Code: 400, ErrorCode: 10065, Description: "subjects overlap with an existing stream"})}, 1, "subjects overlap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			logs := &testenv.Buffer{}
			st := &starter{log: slog.New(slog.NewJSONHandler(logs, nil)), maxWait: time.Millisecond, status: newStartStatus(), health: health.New(nil, nil)}
			tries := 0
			var seen []string
			err := st.provision(context.Background(), func(context.Context) error {
				if tries > 0 {
					if err := st.status.check("streams"); err != nil {
						seen = append(seen, readyReason(err))
					}
				}
				tries++
				if tries <= len(tt.errs) {
					return tt.errs[tries-1]
				}
				return nil
			})
			if tries != tt.wantTries {
				t.Errorf("%d tries, want %d", tries, tt.wantTries)
			}
			if tt.want == "" {
				if err != nil || st.status.check("streams") != nil {
					t.Fatalf("provision = %v, status %v", err, st.status.check("streams"))
				}
				if len(seen) == 0 || !strings.HasPrefix(seen[0], "waiting for JetStream: ") {
					t.Errorf("readyz reasons while waiting %q", seen)
				}
				if n := strings.Count(logs.String(), "waiting for JetStream to provision"); n != tt.wantTries-1 {
					t.Errorf("%d waiting lines, want one per failed try (%d)", n, tt.wantTries-1)
				}
				return
			}
			var se *StartupError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("provision = %v, want a *StartupError saying %q", err, tt.want)
			}
		})
	}
}

// TestServeProvisionsAfterLeaderElection starts a replica against a JetStream cluster that
// has lost its quorum (no meta leader: the JetStream API does not answer): Serve waits, /readyz
// naming the streams, instead of exiting, and provisions them once the servers are back.
func TestServeProvisionsAfterLeaderElection(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a JetStream cluster")
	}
	t.Parallel()
	cl := testenv.StartCluster(t, 3)
	e := newServeEnv(t)
	cl.Stop(1)
	cl.Stop(2)
	cfg := e.cfg
	cfg.NATSURL = cl.Server(0).ClientURL()
	s := serve(t, cfg)
	eventually(t, "readyz naming the streams", func() bool {
		code, body := s.readyz()
		return code == http.StatusServiceUnavailable && strings.HasPrefix(body.Checks["streams"], "waiting for JetStream")
	})
	eventually(t, "a waiting line", func() bool { return strings.Contains(e.logs.String(), "waiting for JetStream to provision") })
	// Restart waits for the whole cluster to form: bring both back at once.
	var restarts sync.WaitGroup
	restarts.Go(func() { cl.Restart(2) })
	cl.Restart(1)
	restarts.Wait()
	s.waitReady()
	_, js := cl.Connect()
	if _, err := js.Stream(context.Background(), cfg.Consumer.Subjects.CommandsStream()); err != nil {
		t.Errorf("commands stream: %v", err)
	}
}

// pbsCommand is a storage.pbs.create command for endpoint 1.
func pbsCommand(id, storage string) events.Command {
	data := fmt.Sprintf(`{"storage":%q,"server":"pbs.example.net","datastore":"store1","username":"backup@pbs!proxbus","password":"pbs-secret",`+
		`"fingerprint":"AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89"}`, storage)
	return events.Command{ID: id, Source: "/test/app", Type: "proxbus.storage.pbs.create", Verb: "storage.pbs.create",
		EndpointID: 1, HasEndpointID: true, Actor: "tester", Data: json.RawMessage(data)}
}

// sendAsync sends cmd in a goroutine; the returned function waits for its result and steps.
func sendAsync(t *testing.T, nc *testenv.NATS, subjects events.Subjects, cmd events.Command) func() (events.Result, []events.Step) {
	t.Helper()
	return sendAsyncFunc(t, nc, subjects, cmd, nil)
}

// sendAsyncFunc is sendAsync also passing each step to onStep (nil: none) as it comes.
func sendAsyncFunc(t *testing.T, nc *testenv.NATS, subjects events.Subjects, cmd events.Command, onStep func(events.Step)) func() (events.Result, []events.Step) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	var (
		mu    sync.Mutex
		steps []events.Step
		res   events.Result
		err   error
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err = Send(ctx, nc.JS, subjects, cmd, false, func(st events.Step) {
			mu.Lock()
			steps = append(steps, st)
			mu.Unlock()
			if onStep != nil {
				onStep(st)
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return func() (events.Result, []events.Step) {
		t.Helper()
		<-done
		if err != nil {
			t.Fatalf("send %s: %v", cmd.ID, err)
		}
		mu.Lock()
		defer mu.Unlock()
		return res, slices.Clone(steps)
	}
}

// TestServeWaitsWhileNetBoxRefusesToken: NetBox refusing the token (403) for the write-ahead
// journal entry makes the command wait, not fail: a `retrying` step says what to fix, no
// attempt is spent, /readyz names netbox and the refused operation; once NetBox accepts the
// token again the command runs and /readyz recovers.
func TestServeWaitsWhileNetBoxRefusesToken(t *testing.T) {
	t.Parallel()
	e := newServeEnv(t)
	var refuse atomic.Bool
	refuse.Store(true)
	sim := e.netbox.Handler()
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuse.Load() && r.Method == http.MethodPost && r.URL.Path == "/api/extras/journal-entries/" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"detail":"Invalid v1 token"}`))
			return
		}
		sim.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	cfg := e.cfg
	cfg.NetBoxURL = front.URL
	s := serve(t, cfg)
	s.waitReady()

	wait := sendAsync(t, e.nats, cfg.Consumer.Subjects, pbsCommand("nb-refused-1", "pbs-nb-refused"))
	const reason = "token refused (HTTP 403) on POST /api/extras/journal-entries/"
	eventually(t, "readyz naming the refusal", func() bool {
		code, body := s.readyz()
		return code == http.StatusServiceUnavailable && slices.Contains(body.Down, "netbox") && strings.HasPrefix(body.Checks["netbox"], reason)
	})
	eventually(t, "several refused journal writes", func() bool {
		return e.netbox.Requests("GET", "/api/plugins/proxbox/endpoints/proxmox/1/") >= 1 && strings.Count(e.logs.String(), "write-ahead entry not written") >= 3
	})
	if n := e.pve.Requests("POST", "/storage"); n != 0 {
		t.Fatalf("%d POSTs without a write-ahead entry", n)
	}
	refuse.Store(false)
	res, steps := wait()
	if res.Status != 201 || res.Result != "created" || res.JournalFinalized == nil || !*res.JournalFinalized {
		t.Fatalf("result %+v, want 201 created with its journal", res)
	}
	var named bool
	for _, st := range steps {
		if st.Attempt != 1 {
			t.Errorf("step %+v spent an attempt", st)
		}
		if st.Step == "journal" && st.Status == events.StepRetrying && strings.Contains(st.Detail, "NetBox refused the token (HTTP 403); fix --netbox-token") {
			named = true
		}
	}
	if !named {
		t.Errorf("no retrying journal step naming the token among %+v", steps)
	}
	eventually(t, "readyz recovered", func() bool {
		code, body := s.readyz()
		return code == http.StatusOK && body.Checks["netbox"] == "ok"
	})
	if n := strings.Count(e.logs.String(), "netbox accepts the token again"); n != 1 {
		t.Errorf("%d recovery lines, want 1", n)
	}
}

// TestServeWaitsWhileProxmoxRefusesToken: Proxmox answering 401 before any write makes the
// command wait (a `retrying` step naming the token), not fail with proxmox_refused; it runs
// once the token is accepted.
func TestServeWaitsWhileProxmoxRefusesToken(t *testing.T) {
	t.Parallel()
	e := newServeEnv(t)
	s := serve(t, e.cfg)
	s.waitReady()
	e.pve.FailNext("GET", "/storage", 4, http.StatusUnauthorized, "invalid token value!")
	res, steps := sendAsync(t, e.nats, e.cfg.Consumer.Subjects, pbsCommand("pve-refused-1", "pbs-pve-refused"))()
	if res.Status != 201 || res.Result != "created" {
		t.Fatalf("result %+v, want 201 created", res)
	}
	var named bool
	for _, st := range steps {
		if st.Attempt != 1 {
			t.Errorf("step %+v spent an attempt", st)
		}
		if st.Status == events.StepRetrying && strings.Contains(st.Detail, "Proxmox refused the endpoint's API token (HTTP 401)") {
			named = true
		}
	}
	if !named {
		t.Errorf("no retrying step naming the token among %+v", steps)
	}
	if n := strings.Count(e.logs.String(), "proxmox/1 refuses the token; commands wait"); n != 1 {
		t.Errorf("%d refusal lines, want 1 (then once a minute)", n)
	}
}

// TestPipelineSettingsGuestWaiters: serve lets a quarter of a replica's workers (at least one)
// wait in it for busy guests, unless the setting is given.
func TestPipelineSettingsGuestWaiters(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ given, concurrency, want int }{
		{0, 8, 2}, {0, 16, 4}, {0, 3, 1}, {0, 1, 1}, {7, 16, 7},
	} {
		got := pipelineSettings(handlers.Settings{GuestWaiters: tt.given}, tt.concurrency).GuestWaiters
		if got != tt.want {
			t.Errorf("GuestWaiters %d, concurrency %d: %d, want %d", tt.given, tt.concurrency, got, tt.want)
		}
	}
}

// TestReadyzSeesNetBoxGo: an idle replica whose NetBox goes away answers /readyz 503 naming
// netbox on the next probe (no command needs to have failed first), and ok again once NetBox
// is back.
func TestReadyzSeesNetBoxGo(t *testing.T) {
	t.Parallel()
	e := newServeEnv(t)
	s := serve(t, e.cfg)
	s.waitReady()
	if code, body := s.readyz(); code != http.StatusOK || body.Checks["netbox"] != "ok" {
		t.Fatalf("readyz with NetBox up: %d %+v", code, body)
	}
	addr := strings.TrimPrefix(e.nbURL, "http://")
	if err := e.netbox.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "readyz naming netbox once it is gone", func() bool {
		code, body := s.readyz()
		return code == http.StatusServiceUnavailable && slices.Contains(body.Down, "netbox") &&
			strings.HasPrefix(body.Checks["netbox"], "unreachable")
	})
	again := simnetbox.New(simnetbox.Options{Scenario: "demo"})
	if _, err := again.Start(addr); err != nil {
		t.Skipf("cannot listen on %s again: %v", addr, err)
	}
	t.Cleanup(func() { _ = again.Close() })
	eventually(t, "readyz ok once NetBox is back", func() bool {
		code, body := s.readyz()
		return code == http.StatusOK && body.Checks["netbox"] == "ok"
	})
}
