package harness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/internal/repair"
	"github.com/proxbus/proxbus/store"
)

const pveSecretVariable = "BENCH_PVE_SECRET"

// ProxbusConfig returns the app.Config that runs one proxbus replica on e with the given
// concurrency (worker pool and MaxAckPending). The endpoint's max_parallel is far above any
// concurrency used, so it never limits a benchmark; the journal repairer is idle.
func (e *Env) ProxbusConfig(concurrency int) app.Config {
	return app.Config{
		NATSURL: e.NATSURL, RedisURL: e.RedisURL, Store: store.Options{Prefix: e.RedisPrefix},
		NetBoxURL: e.NetBoxURL, NetBoxToken: app.DemoNetBoxToken,
		Endpoints: []proxmox.EndpointConfig{{
			ID: 1, Name: "lab", URLs: []string{e.PVEURL}, TokenID: app.DemoPVETokenID,
			TokenSecretEnv: pveSecretVariable, MaxParallel: 100000, Timeout: 30 * time.Second,
		}},
		Getenv: func(name string) string {
			if name == pveSecretVariable {
				return app.DemoPVESecret
			}
			return ""
		},
		Consumer:   consumer.Config{Concurrency: concurrency},
		Repair:     repair.Config{Interval: time.Hour},
		Instance:   "bench",
		LogHandler: e.logHandler(),
	}
}

// logHandler is where proxbus logs: nowhere, or warnings and errors as JSON lines appended
// to the file named by $PROXBUS_BENCH_LOG (for finding out why a run stalled).
func (e *Env) logHandler() slog.Handler {
	path := os.Getenv("PROXBUS_BENCH_LOG")
	if path == "" {
		return slog.DiscardHandler
	}
	e.logOnce.Do(func() {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err == nil {
			e.logFile = f
		}
	})
	if e.logFile == nil {
		return slog.DiscardHandler
	}
	return slog.NewJSONHandler(e.logFile, &slog.HandlerOptions{Level: slog.LevelWarn})
}

// ErrNotReady reports a proxbus that did not become ready.
var ErrNotReady = errors.New("harness: proxbus not ready")

// RunProxbus starts app.Serve with cfg and returns once it is ready (cfg.OnReady is replaced).
// stop cancels it, waits for the drain and returns Serve's error.
func RunProxbus(ctx context.Context, cfg app.Config) (stop func() error, err error) {
	ready := make(chan struct{})
	var once sync.Once
	cfg.OnReady = func() { once.Do(func() { close(ready) }) }
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Serve(sctx, cfg) }()
	stop = func() error {
		cancel()
		return <-done
	}
	select {
	case err := <-done:
		cancel()
		return nil, fmt.Errorf("%w: serve returned: %w", ErrNotReady, err)
	case <-ready:
		return stop, nil
	case <-time.After(30 * time.Second):
		_ = stop()
		return nil, fmt.Errorf("%w after 30s", ErrNotReady)
	}
}
