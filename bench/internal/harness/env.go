package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/embedded"
	simnetbox "github.com/proxbus/proxbus/internal/sim/netbox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// ErrNoRedis is returned (wrapped) by [Start] when Redis cannot be reached: benchmarks need a
// real Redis and never fall back to an embedded one.
var ErrNoRedis = errors.New("harness: no Redis")

// Options configures [Start].
type Options struct {
	// RedisURL is the Redis to use; default $PROXBUS_BENCH_REDIS_URL, else
	// redis://127.0.0.1:6379/0. It must be reachable: benchmarks never fall back to an
	// embedded server, whose speed says nothing about proxbus.
	RedisURL string
	// CountRedis puts a command-counting proxy between the clients and Redis
	// ([Env.RedisCount]); use it for counting passes, not for timing.
	CountRedis bool
	// PVETaskDuration is how long the simulator's tasks run; 0 or negative: they end at once.
	PVETaskDuration time.Duration
	// Timeline records when requests reach the simulators, Redis and the broker
	// ([Env.Timeline]); it implies CountRedis (the proxy is where Redis commands are seen).
	Timeline bool
	// NATSSyncAlways makes the embedded JetStream server fsync after every write (the
	// shipped `sync_interval: always`) instead of every two minutes.
	NATSSyncAlways bool
}

// Env is one isolated deployment: an embedded JetStream server, both simulators on loopback
// HTTP behind request counters, and a Redis key prefix nobody else uses.
type Env struct {
	NATSURL  string
	NC       *nats.Conn
	JS       jetstream.JetStream
	Subjects events.Subjects

	PVE         *simpve.Server
	PVEURL      string
	PVECount    *HTTPCounter
	NetBox      *simnetbox.Server
	NetBoxURL   string
	NetBoxCount *HTTPCounter

	// RedisURL is what proxbus and the baseline connect to: Redis itself, or the counting
	// proxy when Options.CountRedis is set.
	RedisURL string
	// RedisPrefix is unique to this Env; Close deletes every key under it.
	RedisPrefix string
	// RedisCount counts commands when Options.CountRedis or Options.Timeline is set, else nil.
	RedisCount *RedisCounter
	// Timeline records the run's requests when Options.Timeline is set, else nil.
	Timeline *Timeline

	logOnce  sync.Once
	logFile  *os.File
	direct   *redis.Client
	nats     *server.Server
	storeDir string
	servers  []*http.Server
	wg       sync.WaitGroup
}

// Start brings up an Env. Close releases everything it started.
func Start(opts Options) (_ *Env, err error) {
	e := &Env{Subjects: events.NewSubjects("proxbus")}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	if opts.RedisURL == "" {
		opts.RedisURL = os.Getenv("PROXBUS_BENCH_REDIS_URL")
	}
	if opts.RedisURL == "" {
		opts.RedisURL = "redis://127.0.0.1:6379/0"
	}
	ropts, err := redis.ParseURL(opts.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("redis url: %w", err)
	}
	e.direct = redis.NewClient(ropts)
	pctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := e.direct.Ping(pctx).Err(); err != nil {
		return nil, fmt.Errorf("%w at %s: %w", ErrNoRedis, opts.RedisURL, err)
	}
	e.RedisURL, e.RedisPrefix = opts.RedisURL, "proxbus-bench-"+randomHex(6)
	if opts.Timeline {
		e.Timeline = &Timeline{}
	}
	if opts.CountRedis || opts.Timeline {
		if e.RedisCount, err = StartRedisCounter(ropts.Addr, e.Timeline); err != nil {
			return nil, err
		}
		e.RedisURL = fmt.Sprintf("redis://%s/%d", e.RedisCount.Addr(), ropts.DB)
	}

	if e.storeDir, err = os.MkdirTemp("", "proxbus-bench-nats-*"); err != nil {
		return nil, fmt.Errorf("nats store dir: %w", err)
	}
	if e.nats, err = embedded.StartNATS(embedded.NATSOptions{StoreDir: e.storeDir, SyncAlways: opts.NATSSyncAlways}); err != nil {
		return nil, err
	}
	e.NATSURL = e.nats.ClientURL()
	if e.NC, err = nats.Connect(e.NATSURL, nats.Name("bench-driver")); err != nil {
		return nil, fmt.Errorf("nats connect: %w", err)
	}
	if e.JS, err = jetstream.New(e.NC); err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}

	dur := opts.PVETaskDuration
	if dur <= 0 {
		dur = -1
	}
	e.PVE = simpve.New(simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: dur})
	e.PVECount = NewHTTPCounter(e.Timeline)
	if e.PVEURL, err = e.serve(e.PVECount.Wrap(e.PVE.Handler())); err != nil {
		return nil, err
	}
	e.NetBox = simnetbox.New(simnetbox.Options{Scenario: simnetbox.ScenarioDemo})
	e.NetBoxCount = NewHTTPCounter(e.Timeline)
	if e.NetBoxURL, err = e.serve(e.NetBoxCount.Wrap(e.NetBox.Handler())); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *Env) serve(h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	e.servers = append(e.servers, srv)
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		_ = srv.Serve(ln) // ends with srv.Close in Env.Close
	}()
	return "http://" + ln.Addr().String(), nil
}

// ResetCounts zeroes the HTTP and Redis counters.
func (e *Env) ResetCounts() {
	e.PVECount.Reset()
	e.NetBoxCount.Reset()
	if e.RedisCount != nil {
		e.RedisCount.Reset()
	}
}

// Close stops everything Start started and deletes the Env's Redis keys.
func (e *Env) Close() {
	for _, s := range e.servers {
		_ = s.Close()
	}
	e.wg.Wait()
	if e.PVE != nil {
		_ = e.PVE.Close()
	}
	if e.NC != nil {
		e.NC.Close()
	}
	if e.nats != nil {
		e.nats.Shutdown()
		e.nats.WaitForShutdown()
	}
	if e.storeDir != "" {
		_ = os.RemoveAll(e.storeDir)
	}
	if e.RedisCount != nil {
		_ = e.RedisCount.Close()
	}
	if e.logFile != nil {
		_ = e.logFile.Close()
	}
	if e.direct != nil {
		if e.RedisPrefix != "" {
			_ = DeletePrefix(context.Background(), e.direct, e.RedisPrefix)
		}
		_ = e.direct.Close()
	}
}

// DeletePrefix deletes every key under prefix.
func DeletePrefix(ctx context.Context, c *redis.Client, prefix string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var errs []error
	for iter.Next(ctx) {
		if err := c.Del(ctx, iter.Val()).Err(); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, iter.Err())
	return errors.Join(errs...)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
