package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis high-availability helpers: real redis-server / redis-sentinel processes, started from the
// machine's binaries on free loopback ports, each with its own writable directory (config file,
// log, and for cluster nodes nodes.conf) under the test's temporary directory. Any process can be
// SIGKILLed and restarted on the same port with the same directory, as an operator's restart
// would. Every process is killed and waited for when the test ends; the processes also get
// SIGKILL should the test binary die without running its cleanups.
//
// None of the nodes persists data (save "", appendonly no, rdb-del-sync-files yes): a killed node
// comes back empty, and a replica gets its data from its primary again.
//
// The helpers call t.Fatal, so they must be called from the test's goroutine. Each of their
// waits is bounded by the context passed to it and by haWait, a safety net against a hung
// test, not a timed assertion.
//
// The binaries are found on PATH (Debian: /usr/bin/redis-server, /usr/bin/redis-sentinel,
// /usr/bin/redis-cli); where redis-sentinel is absent, `redis-server <conf> --sentinel` is used.
// When a binary is missing the calling test is skipped, saying why, unless
// PROXBUS_TEST_REDIS_HA=required (for CI), in which case it fails.

// haWait bounds every wait of the Redis HA helpers.
const haWait = 30 * time.Second

// haPoll is how often the helpers poll the processes while waiting.
const haPoll = 50 * time.Millisecond

// HARequiredEnv is the environment variable that, set to "required", makes a missing Redis
// binary fail the test instead of skipping it.
const HARequiredEnv = "PROXBUS_TEST_REDIS_HA"

// ProbeKey is the key [Sentinel.WaitFailover] writes (and deletes at once) on a new primary to
// check that it accepts writes.
const ProbeKey = "proxbus-testenv:probe"

// redisBinaries are the executables the HA helpers run.
type redisBinaries struct {
	server string
	// sentinel is the redis-sentinel binary, or redis-server when sentinelFlag is set.
	sentinel     string
	sentinelFlag bool
	cli          string
}

// findRedisBinaries looks the binaries up, skipping (or, when required, failing) the test when
// one is missing. The CLI is only looked for when needCLI is set.
func findRedisBinaries(t testing.TB, needCLI bool) redisBinaries {
	t.Helper()
	missing := func(name string, err error) {
		t.Helper()
		if os.Getenv(HARequiredEnv) == "required" {
			t.Fatalf("%s=required but %s is not available: %v", HARequiredEnv, name, err)
		}
		t.Skipf("Redis HA test skipped: %s is not available (%v); install Debian's redis-server, redis-sentinel and redis-tools, or set %s=required to fail instead", name, err, HARequiredEnv)
	}
	var b redisBinaries
	var err error
	if b.server, err = exec.LookPath("redis-server"); err != nil {
		missing("redis-server", err)
	}
	if b.sentinel, err = exec.LookPath("redis-sentinel"); err != nil {
		b.sentinel, b.sentinelFlag = b.server, true
	}
	if needCLI {
		if b.cli, err = exec.LookPath("redis-cli"); err != nil {
			missing("redis-cli", err)
		}
	}
	return b
}

// redisProc is one Redis process that can be killed and started again identically.
type redisProc struct {
	name string // for messages: "primary", "replica-1", "sentinel-0", "node-3"
	addr string
	port int
	dir  string
	bin  string
	args []string
	// id is a cluster node's ID (kept across restarts in its nodes.conf).
	id string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited; nil while never started
}

func (p *redisProc) logPath() string { return filepath.Join(p.dir, "redis.log") }

// start runs the process; it is an error to start a running one.
func (p *redisProc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.runningLocked() {
		return fmt.Errorf("%s (%s) is already running", p.name, p.addr)
	}
	out, err := os.OpenFile(filepath.Join(p.dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open %s output: %w", p.name, err)
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Dir = p.dir
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so that a kill also reaches a fork (a diskless-sync child), and
	// SIGKILL if the test binary dies without its cleanups.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() { // ends when the process exits, which kill and the test's cleanup make sure of
		_ = cmd.Wait()
		_ = out.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done
	return nil
}

func (p *redisProc) runningLocked() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *redisProc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runningLocked()
}

// exited is closed once the last started process has exited (nil: never started).
func (p *redisProc) exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// kill SIGKILLs the process's group and waits for the process to be gone. Killing a process
// that is not running does nothing.
func (p *redisProc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if done == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// logTail is the last n lines of the process's log, for failure messages.
func (p *redisProc) logTail(n int) string {
	var lines []string
	for _, name := range []string{"stdout.log", "redis.log"} {
		f, err := os.Open(filepath.Join(p.dir, name))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if len(lines) > n {
				lines = lines[1:]
			}
		}
		_ = f.Close()
	}
	return strings.Join(lines, "\n")
}

// haProcs is what the Sentinel and cluster helpers share: the processes, and a client per
// address for the helpers' own queries.
type haProcs struct {
	t        testing.TB
	password string
	kind     string // "sentinel" or "cluster", for messages

	mu      sync.Mutex
	procs   []*redisProc
	clients map[string]*redis.Client
}

func newHAProcs(t testing.TB, kind, password string) *haProcs {
	h := &haProcs{t: t, kind: kind, password: password, clients: map[string]*redis.Client{}}
	t.Cleanup(h.shutdown)
	return h
}

// shutdown kills every process and closes the clients; on a failed test it logs each
// process's last log lines.
func (h *haProcs) shutdown() {
	h.mu.Lock()
	procs := append([]*redisProc(nil), h.procs...)
	clients := h.clients
	h.clients = map[string]*redis.Client{}
	h.mu.Unlock()
	for _, c := range clients {
		_ = c.Close()
	}
	for _, p := range procs {
		p.kill()
	}
	if h.t.Failed() {
		for _, p := range procs {
			h.t.Logf("testenv %s: last log lines of %s (%s):\n%s", h.kind, p.name, p.addr, p.logTail(15))
		}
	}
}

func (h *haProcs) add(p *redisProc) {
	h.mu.Lock()
	h.procs = append(h.procs, p)
	h.mu.Unlock()
}

// proc is the process serving addr; the test fails when there is none.
func (h *haProcs) proc(addr string) *redisProc {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range h.procs {
		if p.addr == addr {
			return p
		}
	}
	h.t.Fatalf("testenv %s: no process serves %s", h.kind, addr)
	return nil
}

// client is a data-node client (authenticated with the password) or, with sentinel, a
// password-less one for a sentinel. It does no retries of its own: the helpers poll.
func (h *haProcs) client(addr string, sentinel bool) *redis.Client {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c, ok := h.clients[addr]; ok {
		return c
	}
	opts := &redis.Options{
		Addr: addr, Protocol: 2, DisableIdentity: true,
		DialTimeout: 250 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second,
		MaxRetries: -1, DialerRetries: 1, PoolSize: 2,
	}
	if !sentinel {
		opts.Password = h.password
	}
	c := redis.NewClient(opts)
	h.clients[addr] = c
	return c
}

// startProc starts p and waits until it answers PING; the test fails (showing its log) when
// it exits or does not answer.
func (h *haProcs) startProc(ctx context.Context, p *redisProc, sentinel bool) {
	h.t.Helper()
	if err := p.start(); err != nil {
		h.t.Fatalf("testenv %s: %v", h.kind, err)
	}
	exited := p.exited()
	c := h.client(p.addr, sentinel)
	h.waitFor(ctx, p.name+" ("+p.addr+") to answer PING", func(ctx context.Context) (bool, string) {
		select {
		case <-exited:
			h.t.Fatalf("testenv %s: %s (%s) exited at start; its log:\n%s", h.kind, p.name, p.addr, p.logTail(30))
		default:
		}
		// A plain dial first: go-redis logs every failed dial of its own.
		conn, err := net.DialTimeout("tcp", p.addr, 250*time.Millisecond)
		if err != nil {
			return false, err.Error()
		}
		_ = conn.Close()
		if err := c.Ping(ctx).Err(); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// kill SIGKILLs the process serving addr and waits for it; the test fails when that process
// is not running.
func (h *haProcs) kill(addr string) *redisProc {
	h.t.Helper()
	p := h.proc(addr)
	if !p.running() {
		h.t.Fatalf("testenv %s: Kill(%s): %s is not running", h.kind, addr, p.name)
	}
	p.kill()
	return p
}

// restartable is the killed process serving addr; the test fails when it is running.
func (h *haProcs) restartable(addr string) *redisProc {
	h.t.Helper()
	p := h.proc(addr)
	if p.running() {
		h.t.Fatalf("testenv %s: Restart(%s): %s is running; Kill it first", h.kind, addr, p.name)
	}
	return p
}

// waitFor polls cond until it holds; the test fails, with cond's last word on why not, when ctx
// ends or after haWait.
func (h *haProcs) waitFor(ctx context.Context, what string, cond func(ctx context.Context) (bool, string)) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, haWait)
	defer cancel()
	start := time.Now()
	var why string
	for {
		ok, reason := cond(ctx)
		if ok {
			return
		}
		if reason != "" {
			why = reason
		}
		select {
		case <-ctx.Done():
			h.t.Fatalf("testenv %s: gave up after %s waiting for %s (%v); last: %s", h.kind, time.Since(start).Round(time.Millisecond), what, ctx.Err(), why)
		case <-time.After(haPoll):
		}
	}
}

// writeConf writes a config file, one directive per line.
func writeConf(t testing.TB, path string, lines []string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

// confQuote quotes s as a Redis config argument (double quotes, \" \\ and \xHH escapes).
func confQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, "\\x%02x", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// dataNodeConf is the config every data node shares: loopback only, no persistence, fast
// diskless full syncs.
func dataNodeConf(port int, dir, password string) []string {
	lines := []string{
		"bind 127.0.0.1",
		"port " + strconv.Itoa(port),
		"protected-mode no",
		"daemonize no",
		"dir " + confQuote(dir),
		"logfile " + confQuote(filepath.Join(dir, "redis.log")),
		`save ""`,
		"appendonly no",
		// A replica's copy of the sync RDB is deleted once loaded, so a killed node never
		// comes back with an old data set.
		"rdb-del-sync-files yes",
		"repl-diskless-sync yes",
		"repl-diskless-sync-delay 0",
		"replica-announce-ip 127.0.0.1",
	}
	if password != "" {
		lines = append(lines, "requirepass "+confQuote(password), "masterauth "+confQuote(password))
	}
	return lines
}

// parseInfo parses INFO output into field → value.
func parseInfo(s string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
			out[k] = v
		}
	}
	return out
}

// infoReplica is one slaveN line of INFO replication.
type infoReplica struct {
	addr   string
	state  string
	offset int64
}

// infoReplicas parses the slaveN lines of INFO replication.
func infoReplicas(info map[string]string) []infoReplica {
	n, _ := strconv.Atoi(info["connected_slaves"])
	var out []infoReplica
	for i := range n {
		v, ok := info["slave"+strconv.Itoa(i)]
		if !ok {
			continue
		}
		f := map[string]string{}
		for _, kv := range strings.Split(v, ",") {
			if k, val, ok := strings.Cut(kv, "="); ok {
				f[k] = val
			}
		}
		off, _ := strconv.ParseInt(f["offset"], 10, 64)
		out = append(out, infoReplica{addr: f["ip"] + ":" + f["port"], state: f["state"], offset: off})
	}
	return out
}

// ----------------------------------------------------------------------------------------------
// Sentinel

// SentinelOptions shapes [StartSentinel]'s setup.
type SentinelOptions struct {
	// Replicas is the number of replicas of the primary (default 2).
	Replicas int
	// Sentinels is the number of sentinels (default 3); the quorum is a majority of them.
	Sentinels int
	// Password, when set, is every data node's requirepass and masterauth and the sentinels'
	// auth-pass. The sentinels themselves take no password.
	Password string
	// MasterName is the name the sentinels monitor the primary under (default "proxbus-test").
	MasterName string
}

// Sentinel is a Redis primary with replicas, watched by Redis Sentinels configured for fast
// failover (down-after-milliseconds 1000, failover-timeout 5000, parallel-syncs 1, quorum a
// majority of the sentinels), all on loopback.
//
// What it guarantees about a killed and restarted node: no node persists data, so a restarted
// node comes back empty. A killed primary restarted after [Sentinel.WaitFailover] comes back, from
// its own unchanged config, as a primary of an empty data set, but the sentinels know it as a
// replica of the new primary and never report it as the primary: they make it a replica
// (REPLICAOF plus CONFIG REWRITE of its config file) a few seconds later, the first time they
// see it report the primary role for a while (Redis waits 4 × 2 s for that), and it then
// resyncs from the new primary. [Sentinel.WaitReplicas] waits for that. Restarting a killed
// primary before its failover is not guarded against: it would come back as the primary of an
// empty data set and its replicas would resync that, which is what Redis does.
type Sentinel struct {
	// MasterName is the name the sentinels monitor the primary under.
	MasterName string
	// SentinelAddrs are the sentinels' host:port addresses.
	SentinelAddrs []string
	// Password is the data nodes' password ("" for none).
	Password string

	h         *haProcs
	data      []*redisProc // data[0] is the first primary
	sentinels []*redisProc
}

// StartSentinel starts a primary, its replicas and the sentinels, and returns once every
// replica is in sync and every sentinel monitors the primary and knows every replica and every
// other sentinel (so that a failover can start as soon as the primary is lost).
func StartSentinel(t testing.TB, opts SentinelOptions) *Sentinel {
	t.Helper()
	bins := findRedisBinaries(t, false)
	if opts.Replicas == 0 {
		opts.Replicas = 2
	}
	if opts.Sentinels == 0 {
		opts.Sentinels = 3
	}
	if opts.MasterName == "" {
		opts.MasterName = "proxbus-test"
	}
	if opts.Replicas < 0 || opts.Sentinels < 0 {
		t.Fatalf("StartSentinel: Replicas = %d, Sentinels = %d: want positive numbers", opts.Replicas, opts.Sentinels)
	}
	base := t.TempDir()
	s := &Sentinel{MasterName: opts.MasterName, Password: opts.Password, h: newHAProcs(t, "sentinel", opts.Password)}
	ports := freePorts(t, 1+opts.Replicas+opts.Sentinels)
	primaryPort := ports[0]
	for i := range 1 + opts.Replicas {
		name := "primary"
		if i > 0 {
			name = fmt.Sprintf("replica-%d", i)
		}
		p := &redisProc{name: name, port: ports[i], addr: fmt.Sprintf("127.0.0.1:%d", ports[i]), dir: filepath.Join(base, name), bin: bins.server}
		mkdir(t, p.dir)
		conf := dataNodeConf(p.port, p.dir, opts.Password)
		if i > 0 {
			conf = append(conf, fmt.Sprintf("replicaof 127.0.0.1 %d", primaryPort))
		}
		confPath := filepath.Join(p.dir, "redis.conf")
		writeConf(t, confPath, conf)
		p.args = []string{confPath}
		s.data = append(s.data, p)
		s.h.add(p)
	}
	quorum := opts.Sentinels/2 + 1
	for i := range opts.Sentinels {
		port := ports[1+opts.Replicas+i]
		name := fmt.Sprintf("sentinel-%d", i)
		p := &redisProc{name: name, port: port, addr: fmt.Sprintf("127.0.0.1:%d", port), dir: filepath.Join(base, name), bin: bins.sentinel}
		mkdir(t, p.dir)
		m := opts.MasterName
		conf := []string{
			"bind 127.0.0.1",
			"port " + strconv.Itoa(port),
			"protected-mode no",
			"daemonize no",
			"dir " + confQuote(p.dir),
			"logfile " + confQuote(p.logPath()),
			"sentinel resolve-hostnames no",
			"sentinel announce-ip 127.0.0.1",
			fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d %d", m, primaryPort, quorum),
			fmt.Sprintf("sentinel down-after-milliseconds %s 1000", m),
			fmt.Sprintf("sentinel failover-timeout %s 5000", m),
			fmt.Sprintf("sentinel parallel-syncs %s 1", m),
		}
		if opts.Password != "" {
			conf = append(conf, fmt.Sprintf("sentinel auth-pass %s %s", m, confQuote(opts.Password)))
		}
		// The sentinel rewrites this file with what it learns: it must stay writable.
		confPath := filepath.Join(p.dir, "sentinel.conf")
		writeConf(t, confPath, conf)
		p.args = []string{confPath}
		if bins.sentinelFlag {
			p.args = append(p.args, "--sentinel")
		}
		s.sentinels = append(s.sentinels, p)
		s.SentinelAddrs = append(s.SentinelAddrs, p.addr)
		s.h.add(p)
	}

	ctx := context.Background()
	for _, p := range s.data {
		s.h.startProc(ctx, p, false)
	}
	s.waitInSync(ctx, s.data[0].addr, opts.Replicas)
	for _, p := range s.sentinels {
		s.h.startProc(ctx, p, true)
	}
	s.h.waitFor(ctx, "every sentinel to know the primary, its replicas and the other sentinels", func(ctx context.Context) (bool, string) {
		for _, p := range s.sentinels {
			if ok, why := s.sentinelKnowsAll(ctx, p, s.data[0].addr, opts.Replicas); !ok {
				return false, why
			}
		}
		return true, ""
	})
	return s
}

func mkdir(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("mkdir %s: %v", dir, err)
	}
}

// Addrs are the data nodes' host:port addresses (the first primary first).
func (s *Sentinel) Addrs() []string {
	out := make([]string, len(s.data))
	for i, p := range s.data {
		out[i] = p.addr
	}
	return out
}

// FailoverOptions are go-redis options for a client that finds the primary through the
// sentinels; set timeouts and retries on them as the test needs.
func (s *Sentinel) FailoverOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{
		MasterName:    s.MasterName,
		SentinelAddrs: append([]string(nil), s.SentinelAddrs...),
		Password:      s.Password,
	}
}

// Primary is the primary's address as the first running sentinel that answers reports it
// (SENTINEL get-master-addr-by-name); the test fails when none answers.
func (s *Sentinel) Primary(ctx context.Context) string {
	s.h.t.Helper()
	var errs []error
	for _, p := range s.sentinels {
		if !p.running() {
			continue
		}
		addr, err := s.askPrimary(ctx, p)
		if err == nil {
			return addr
		}
		errs = append(errs, err)
	}
	s.h.t.Fatalf("testenv sentinel: no sentinel reports the primary: %v", errors.Join(errs...))
	return ""
}

func (s *Sentinel) askPrimary(ctx context.Context, p *redisProc) (string, error) {
	c := s.h.client(p.addr, true)
	v, err := c.Do(ctx, "SENTINEL", "get-master-addr-by-name", s.MasterName).StringSlice()
	if err != nil {
		return "", fmt.Errorf("%s: %w", p.name, err)
	}
	if len(v) != 2 {
		return "", fmt.Errorf("%s: get-master-addr-by-name answered %q", p.name, v)
	}
	return v[0] + ":" + v[1], nil
}

// agreedPrimary is the primary every running sentinel reports, or "" with why not.
func (s *Sentinel) agreedPrimary(ctx context.Context) (string, string) {
	primary := ""
	for _, p := range s.sentinels {
		if !p.running() {
			continue
		}
		addr, err := s.askPrimary(ctx, p)
		if err != nil {
			return "", err.Error()
		}
		if primary != "" && addr != primary {
			return "", fmt.Sprintf("sentinels disagree: %s and %s", primary, addr)
		}
		primary = addr
	}
	if primary == "" {
		return "", "no sentinel is running"
	}
	return primary, ""
}

// Kill SIGKILLs the process (data node or sentinel) serving addr and waits until it is gone.
func (s *Sentinel) Kill(addr string) {
	s.h.t.Helper()
	s.h.kill(addr)
}

// Restart starts the killed process serving addr again, on the same port with the same
// directory and config file (as the node or sentinel last rewrote it), and returns once it
// answers PING. A restarted old primary is made a replica by the sentinels some seconds later
// (see [Sentinel]); use [Sentinel.WaitReplicas] to wait for that.
func (s *Sentinel) Restart(addr string) {
	s.h.t.Helper()
	p := s.h.restartable(addr)
	sentinel := strings.HasPrefix(p.name, "sentinel-")
	s.h.startProc(context.Background(), p, sentinel)
}

// WaitFailover waits until every running sentinel reports the same primary other than
// oldPrimary, and that node has the primary role and accepts a write (of [ProbeKey], deleted at
// once). It returns the new primary's address.
func (s *Sentinel) WaitFailover(ctx context.Context, oldPrimary string) string {
	s.h.t.Helper()
	var primary string
	s.h.waitFor(ctx, "a failover away from "+oldPrimary, func(ctx context.Context) (bool, string) {
		addr, why := s.agreedPrimary(ctx)
		if addr == "" {
			return false, why
		}
		if addr == oldPrimary {
			return false, "the sentinels still report " + oldPrimary
		}
		c := s.h.client(addr, false)
		role, err := c.Do(ctx, "ROLE").Slice()
		if err != nil {
			return false, fmt.Sprintf("ROLE on %s: %v", addr, err)
		}
		if len(role) == 0 || role[0] != "master" {
			return false, fmt.Sprintf("%s reports role %v", addr, role)
		}
		if err := c.Set(ctx, ProbeKey, "1", time.Second).Err(); err != nil {
			return false, fmt.Sprintf("write on %s: %v", addr, err)
		}
		_ = c.Del(ctx, ProbeKey).Err()
		primary = addr
		return true, ""
	})
	return primary
}

// WaitReplicas waits until every running sentinel agrees on the primary, the primary reports
// at least n connected replicas online whose replication offsets have reached the primary's
// offset at the time of the call, and every running sentinel knows at least n replicas that it
// does not consider down.
func (s *Sentinel) WaitReplicas(ctx context.Context, n int) {
	s.h.t.Helper()
	var target int64 = -1
	targetOn := ""
	s.h.waitFor(ctx, fmt.Sprintf("%d replicas in sync", n), func(ctx context.Context) (bool, string) {
		primary, why := s.agreedPrimary(ctx)
		if primary == "" {
			return false, why
		}
		if primary != targetOn {
			off, err := s.replOffset(ctx, primary)
			if err != nil {
				return false, err.Error()
			}
			target, targetOn = off, primary
		}
		if ok, why := s.replicasCaughtUp(ctx, primary, n, target); !ok {
			return false, why
		}
		for _, p := range s.sentinels {
			if !p.running() {
				continue
			}
			if ok, why := s.sentinelKnowsAll(ctx, p, primary, n); !ok {
				return false, why
			}
		}
		return true, ""
	})
}

// waitInSync waits until primary reports n replicas online at its current offset.
func (s *Sentinel) waitInSync(ctx context.Context, primary string, n int) {
	s.h.t.Helper()
	var target int64 = -1
	s.h.waitFor(ctx, fmt.Sprintf("%d replicas of %s in sync", n, primary), func(ctx context.Context) (bool, string) {
		if target < 0 {
			off, err := s.replOffset(ctx, primary)
			if err != nil {
				return false, err.Error()
			}
			target = off
		}
		return s.replicasCaughtUp(ctx, primary, n, target)
	})
}

func (s *Sentinel) replOffset(ctx context.Context, primary string) (int64, error) {
	info, err := s.h.client(primary, false).Info(ctx, "replication").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO replication on %s: %w", primary, err)
	}
	return strconv.ParseInt(parseInfo(info)["master_repl_offset"], 10, 64)
}

// replicasCaughtUp reports whether primary has at least n online replicas at offset ≥ target.
func (s *Sentinel) replicasCaughtUp(ctx context.Context, primary string, n int, target int64) (bool, string) {
	raw, err := s.h.client(primary, false).Info(ctx, "replication").Result()
	if err != nil {
		return false, fmt.Sprintf("INFO replication on %s: %v", primary, err)
	}
	info := parseInfo(raw)
	if info["role"] != "master" {
		return false, fmt.Sprintf("%s reports role %s", primary, info["role"])
	}
	good := 0
	for _, r := range infoReplicas(info) {
		if r.state == "online" && r.offset >= target {
			good++
		}
	}
	if good < n {
		return false, fmt.Sprintf("%s has %d of %d replicas online at offset ≥ %d: %v", primary, good, n, target, infoReplicas(info))
	}
	return true, ""
}

// sentinelKnowsAll reports whether sentinel p monitors primary and knows at least replicas
// replicas and every other running sentinel, none of them flagged down.
func (s *Sentinel) sentinelKnowsAll(ctx context.Context, p *redisProc, primary string, replicas int) (bool, string) {
	addr, err := s.askPrimary(ctx, p)
	if err != nil {
		return false, err.Error()
	}
	if addr != primary {
		return false, fmt.Sprintf("%s reports primary %s, want %s", p.name, addr, primary)
	}
	c := s.h.client(p.addr, true)
	reps, err := sentinelEntries(ctx, c, "replicas", s.MasterName)
	if err != nil {
		return false, fmt.Sprintf("%s: SENTINEL replicas: %v", p.name, err)
	}
	up := 0
	for _, r := range reps {
		if r["flags"] == "slave" {
			up++
		}
	}
	if up < replicas {
		return false, fmt.Sprintf("%s knows %d healthy replicas of %d: %v", p.name, up, replicas, reps)
	}
	others, err := sentinelEntries(ctx, c, "sentinels", s.MasterName)
	if err != nil {
		return false, fmt.Sprintf("%s: SENTINEL sentinels: %v", p.name, err)
	}
	want := 0
	for _, o := range s.sentinels {
		if o != p && o.running() {
			want++
		}
	}
	healthy := 0
	for _, o := range others {
		if o["flags"] == "sentinel" {
			healthy++
		}
	}
	if healthy < want {
		return false, fmt.Sprintf("%s knows %d healthy other sentinels of %d", p.name, healthy, want)
	}
	return true, ""
}

// sentinelEntries runs SENTINEL <what> <master> and returns its entries as field → value.
func sentinelEntries(ctx context.Context, c *redis.Client, what, master string) ([]map[string]string, error) {
	v, err := c.Do(ctx, "SENTINEL", what, master).Slice()
	if err != nil {
		return nil, err
	}
	out := make([]map[string]string, 0, len(v))
	for _, e := range v {
		kv, ok := e.([]interface{})
		if !ok {
			return nil, fmt.Errorf("unexpected SENTINEL %s entry %T", what, e)
		}
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[fmt.Sprint(kv[i])] = fmt.Sprint(kv[i+1])
		}
		out = append(out, m)
	}
	return out, nil
}

// ----------------------------------------------------------------------------------------------
// Redis Cluster

// ClusterOptions shapes [StartRedisCluster]'s cluster.
type ClusterOptions struct {
	// Primaries is the number of primaries, at least 3 (default 3).
	Primaries int
	// ReplicasPerPrimary is the number of replicas of each primary (0: none).
	ReplicasPerPrimary int
	// Password, when set, is every node's requirepass and masterauth.
	Password string
}

// RedisCluster is a Redis Cluster on loopback (cluster-node-timeout 1000, replica validity
// unlimited so that any replica may be promoted, no replica migration), created with
// `redis-cli --cluster create`. (It is not [Cluster], which is a NATS cluster.)
//
// What it guarantees about a killed and restarted node: no node persists data, so a restarted
// node comes back empty, with its cluster identity (ID, epochs) from the nodes.conf in its
// directory. A killed primary restarted after [RedisCluster.WaitFailover] learns from the others
// that its slots moved to a newer epoch and becomes a replica of their new owner, resyncing from
// it; [RedisCluster.Restart] waits for that. For the instant between its start and that first
// exchange it still believes it owns its old (now empty) slots.
type RedisCluster struct {
	// Password is the nodes' password ("" for none).
	Password string

	h     *haProcs
	nodes []*redisProc
	// slotsOf records, when a primary is killed, the slots it owned (by address).
	slotsOf map[string][]slotRange
}

// slotRange is an inclusive range of hash slots.
type slotRange struct{ start, end int }

// clusterNodeLine is one line of CLUSTER NODES.
type clusterNodeLine struct {
	id, addr, master string
	flags            map[string]bool
	connected        bool
	slots            []slotRange
}

func (n clusterNodeLine) isMaster() bool { return n.flags["master"] }
func (n clusterNodeLine) failing() bool  { return n.flags["fail"] || n.flags["fail?"] }
func (n clusterNodeLine) owns(slot int) bool {
	for _, r := range n.slots {
		if slot >= r.start && slot <= r.end {
			return true
		}
	}
	return false
}

// parseClusterNodes parses CLUSTER NODES output (slots being migrated, in brackets, are left out).
func parseClusterNodes(s string) ([]clusterNodeLine, error) {
	var out []clusterNodeLine
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("short CLUSTER NODES line %q", line)
		}
		addr, _, _ := strings.Cut(f[1], "@")
		n := clusterNodeLine{id: f[0], addr: addr, master: f[3], flags: map[string]bool{}, connected: f[7] == "connected"}
		for _, fl := range strings.Split(f[2], ",") {
			n.flags[fl] = true
		}
		for _, sl := range f[8:] {
			if strings.HasPrefix(sl, "[") {
				continue
			}
			a, b, isRange := strings.Cut(sl, "-")
			start, err := strconv.Atoi(a)
			if err != nil {
				return nil, fmt.Errorf("slot %q in %q: %w", sl, line, err)
			}
			end := start
			if isRange {
				if end, err = strconv.Atoi(b); err != nil {
					return nil, fmt.Errorf("slot %q in %q: %w", sl, line, err)
				}
			}
			n.slots = append(n.slots, slotRange{start, end})
		}
		out = append(out, n)
	}
	return out, nil
}

// StartRedisCluster starts the nodes, creates the cluster with `redis-cli --cluster create
// ... --cluster-replicas N --cluster-yes` and returns once every node reports cluster_state:ok,
// sees every other node connected and healthy, and every replica's link to its primary is up.
func StartRedisCluster(t testing.TB, opts ClusterOptions) *RedisCluster {
	t.Helper()
	bins := findRedisBinaries(t, true)
	if opts.Primaries == 0 {
		opts.Primaries = 3
	}
	if opts.Primaries < 3 || opts.ReplicasPerPrimary < 0 {
		t.Fatalf("StartRedisCluster: Primaries = %d, ReplicasPerPrimary = %d: want at least 3 primaries", opts.Primaries, opts.ReplicasPerPrimary)
	}
	n := opts.Primaries * (1 + opts.ReplicasPerPrimary)
	base := t.TempDir()
	c := &RedisCluster{Password: opts.Password, h: newHAProcs(t, "redis cluster", opts.Password), slotsOf: map[string][]slotRange{}}
	ports := freePorts(t, 2*n) // client ports, then cluster bus ports
	for i := range n {
		name := fmt.Sprintf("node-%d", i)
		p := &redisProc{name: name, port: ports[i], addr: fmt.Sprintf("127.0.0.1:%d", ports[i]), dir: filepath.Join(base, name), bin: bins.server}
		mkdir(t, p.dir)
		conf := append(dataNodeConf(p.port, p.dir, opts.Password),
			"cluster-enabled yes",
			"cluster-config-file "+confQuote(filepath.Join(p.dir, "nodes.conf")),
			"cluster-port "+strconv.Itoa(ports[n+i]),
			"cluster-node-timeout 1000",
			"cluster-announce-ip 127.0.0.1",
			"cluster-replica-validity-factor 0",
			"cluster-allow-replica-migration no",
		)
		confPath := filepath.Join(p.dir, "redis.conf")
		writeConf(t, confPath, conf)
		p.args = []string{confPath}
		c.nodes = append(c.nodes, p)
		c.h.add(p)
	}
	ctx := context.Background()
	for _, p := range c.nodes {
		c.h.startProc(ctx, p, false)
	}
	args := append([]string{"--cluster", "create"}, c.Seeds()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(opts.ReplicasPerPrimary), "--cluster-yes")
	cctx, cancel := context.WithTimeout(ctx, haWait)
	defer cancel()
	cmd := exec.CommandContext(cctx, bins.cli, args...)
	cmd.Env = os.Environ()
	if opts.Password != "" {
		cmd.Env = append(cmd.Env, "REDISCLI_AUTH="+opts.Password) // not on the command line
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("testenv redis cluster: redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, p := range c.nodes {
		id, err := c.h.client(p.addr, false).Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			t.Fatalf("testenv redis cluster: CLUSTER MYID on %s: %v", p.addr, err)
		}
		p.id = id
	}
	c.waitHealthy(ctx, "the cluster to form")
	return c
}

// Seeds are every node's host:port address, for go-redis ClusterOptions.Addrs.
func (c *RedisCluster) Seeds() []string {
	out := make([]string, len(c.nodes))
	for i, p := range c.nodes {
		out[i] = p.addr
	}
	return out
}

// ClusterOptions are go-redis options for a client of the whole cluster; set timeouts and
// retries on them as the test needs.
//
// ClusterStateReloadInterval is set to 1 s: go-redis (v9.23) reloads its slot map on MOVED,
// ASK and READONLY replies but not on a dial error, so after a primary dies it keeps dialling
// the dead node for the slots it served until the map is older than that interval (default
// 60 s since v9.22; redis/go-redis#3979). A production client needs the same care.
func (c *RedisCluster) ClusterOptions() *redis.ClusterOptions {
	return &redis.ClusterOptions{Addrs: c.Seeds(), Password: c.Password, ClusterStateReloadInterval: time.Second}
}

// view is CLUSTER NODES as the running node p sees it.
func (c *RedisCluster) view(ctx context.Context, p *redisProc) ([]clusterNodeLine, error) {
	raw, err := c.h.client(p.addr, false).ClusterNodes(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("CLUSTER NODES on %s: %w", p.addr, err)
	}
	return parseClusterNodes(raw)
}

func (c *RedisCluster) running() []*redisProc {
	var out []*redisProc
	for _, p := range c.nodes {
		if p.running() {
			out = append(out, p)
		}
	}
	return out
}

// PrimaryFor is the address of the primary that serves key's hash slot (CLUSTER KEYSLOT, then
// CLUSTER NODES of the first running node that answers); the test fails when no node knows.
func (c *RedisCluster) PrimaryFor(ctx context.Context, key string) string {
	c.h.t.Helper()
	var errs []error
	for _, p := range c.running() {
		slot, err := c.h.client(p.addr, false).ClusterKeySlot(ctx, key).Result()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		nodes, err := c.view(ctx, p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, n := range nodes {
			if n.isMaster() && !n.failing() && n.owns(int(slot)) {
				return n.addr
			}
		}
		errs = append(errs, fmt.Errorf("%s knows no healthy primary of slot %d", p.addr, slot))
	}
	c.h.t.Fatalf("testenv redis cluster: PrimaryFor(%q): %v", key, errors.Join(errs...))
	return ""
}

// Kill SIGKILLs the node serving addr and waits until it is gone. When it is a primary, the
// slots it owned are remembered for [RedisCluster.WaitFailover].
func (c *RedisCluster) Kill(addr string) {
	c.h.t.Helper()
	p := c.h.proc(addr)
	ctx := context.Background()
	delete(c.slotsOf, addr)
	if nodes, err := c.view(ctx, p); err == nil {
		for _, n := range nodes {
			if n.id == p.id && n.isMaster() && len(n.slots) > 0 {
				c.slotsOf[addr] = n.slots
			}
		}
	}
	c.h.kill(addr)
}

// Restart starts the killed node serving addr again, on the same ports with the same
// directory (its config and nodes.conf), and waits until the cluster is healthy again with it
// (as after [StartRedisCluster]); a former primary whose slots moved is then a replica with its
// link up.
func (c *RedisCluster) Restart(addr string) {
	c.h.t.Helper()
	p := c.h.restartable(addr)
	ctx := context.Background()
	c.h.startProc(ctx, p, false)
	c.waitHealthy(ctx, p.name+" ("+addr+") to rejoin")
}

// WaitFailover waits until the slots oldPrimary owned when it was killed belong to another
// node, which every running node sees as a healthy primary and which reports the primary role,
// and every running node reports cluster_state:ok. It returns the new primary's address.
func (c *RedisCluster) WaitFailover(ctx context.Context, oldPrimary string) string {
	c.h.t.Helper()
	slots, ok := c.slotsOf[oldPrimary]
	if !ok {
		c.h.t.Fatalf("testenv redis cluster: WaitFailover(%s): it was not a primary owning slots when killed", oldPrimary)
	}
	slot := slots[0].start
	var primary string
	c.h.waitFor(ctx, "a failover away from "+oldPrimary, func(ctx context.Context) (bool, string) {
		owner := ""
		for _, p := range c.running() {
			if ok, why := c.stateOK(ctx, p); !ok {
				return false, why
			}
			nodes, err := c.view(ctx, p)
			if err != nil {
				return false, err.Error()
			}
			var o *clusterNodeLine
			for i := range nodes {
				if nodes[i].isMaster() && nodes[i].owns(slot) {
					o = &nodes[i]
				}
			}
			switch {
			case o == nil:
				return false, fmt.Sprintf("%s knows no owner of slot %d", p.addr, slot)
			case o.addr == oldPrimary:
				return false, fmt.Sprintf("%s still sees %s owning slot %d", p.addr, oldPrimary, slot)
			case o.failing():
				return false, fmt.Sprintf("%s sees slot %d's owner %s failing", p.addr, slot, o.addr)
			case owner != "" && o.addr != owner:
				return false, fmt.Sprintf("nodes disagree on slot %d's owner: %s, %s", slot, owner, o.addr)
			}
			owner = o.addr
		}
		role, err := c.h.client(owner, false).Do(ctx, "ROLE").Slice()
		if err != nil || len(role) == 0 || role[0] != "master" {
			return false, fmt.Sprintf("ROLE on %s: %v %v", owner, role, err)
		}
		primary = owner
		return true, ""
	})
	return primary
}

// stateOK reports whether node p reports cluster_state:ok.
func (c *RedisCluster) stateOK(ctx context.Context, p *redisProc) (bool, string) {
	raw, err := c.h.client(p.addr, false).ClusterInfo(ctx).Result()
	if err != nil {
		return false, fmt.Sprintf("CLUSTER INFO on %s: %v", p.addr, err)
	}
	if st := parseInfo(raw)["cluster_state"]; st != "ok" {
		return false, fmt.Sprintf("%s reports cluster_state:%s", p.addr, st)
	}
	return true, ""
}

// waitHealthy waits until every running node reports cluster_state:ok and knows every node,
// sees every running node connected and not failing, and every running replica's link to its
// primary is up.
func (c *RedisCluster) waitHealthy(ctx context.Context, what string) {
	c.h.t.Helper()
	c.h.waitFor(ctx, what, func(ctx context.Context) (bool, string) {
		up := c.running()
		ids := map[string]bool{}
		for _, p := range up {
			ids[p.id] = true
		}
		for _, p := range up {
			if ok, why := c.stateOK(ctx, p); !ok {
				return false, why
			}
			nodes, err := c.view(ctx, p)
			if err != nil {
				return false, err.Error()
			}
			if len(nodes) != len(c.nodes) {
				return false, fmt.Sprintf("%s knows %d nodes of %d", p.addr, len(nodes), len(c.nodes))
			}
			for _, n := range nodes {
				if ids[n.id] && (n.failing() || !n.connected) {
					return false, fmt.Sprintf("%s sees %s as %v (connected %t)", p.addr, n.addr, n.flags, n.connected)
				}
			}
			raw, err := c.h.client(p.addr, false).Info(ctx, "replication").Result()
			if err != nil {
				return false, fmt.Sprintf("INFO replication on %s: %v", p.addr, err)
			}
			info := parseInfo(raw)
			if info["role"] == "slave" && info["master_link_status"] != "up" {
				return false, fmt.Sprintf("%s: link to its primary %s:%s is %s", p.addr, info["master_host"], info["master_port"], info["master_link_status"])
			}
		}
		return true, ""
	})
}
