// Package startup measures how long proxbus takes to become ready (issue #6, part 6):
//
//   - serve=inprocess: app.Serve to its OnReady (the consumer is fetching), against a running
//     NATS, Redis and both simulators;
//   - serve=binary: the built `proxbus serve` process from exec to the first 200 of /readyz
//     (NATS connected, Redis answering, consumer fetching), polled every 2 ms;
//   - dev=binary: the built `proxbus dev` process from exec to its `ready` line (embedded NATS,
//     embedded Redis, both simulators and the processor; contract §10).
//
// ns/op is the time to ready. The binary is built once per benchmark, outside the timing.
//
//	go -C bench test -run '^$' -bench Startup -benchtime 20x ./startup
package startup

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/proxbus/proxbus/bench/internal/harness"
	"github.com/proxbus/proxbus/internal/app"
)

func BenchmarkStartup(b *testing.B) {
	b.Run("serve=inprocess", func(b *testing.B) {
		e := startEnv(b)
		cfg := e.ProxbusConfig(8)
		ctx := context.Background()
		if err := e.Provision(ctx, 8); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for range b.N {
			stop, err := harness.RunProxbus(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := stop(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	b.Run("serve=binary", func(b *testing.B) {
		bin := build(b)
		e := startEnv(b)
		endpoints := filepath.Join(b.TempDir(), "endpoints.yaml")
		yaml := fmt.Sprintf("endpoints:\n  - id: 1\n    name: lab\n    urls: [%s]\n    token_id: %q\n    token_secret_env: LAB_SECRET\n", e.PVEURL, app.DemoPVETokenID)
		if err := os.WriteFile(endpoints, []byte(yaml), 0o600); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			addr := freeAddr(b)
			cmd := exec.Command(bin, "serve", "--http-addr", addr)
			cmd.Env = append(os.Environ(), "PROXBUS_NATS_URL="+e.NATSURL, "PROXBUS_REDIS_URL="+e.RedisURL,
				"PROXBUS_REDIS_KEY_PREFIX="+e.RedisPrefix, "PROXBUS_NETBOX_URL="+e.NetBoxURL,
				"PROXBUS_NETBOX_TOKEN="+app.DemoNetBoxToken, "PROXBUS_ENDPOINTS_FILE="+endpoints,
				"LAB_SECRET="+app.DemoPVESecret, "PROXBUS_LOG_FORMAT=json")
			b.StartTimer()
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			waitReadyz(b, "http://"+addr+app.PathReadyz, cmd)
			b.StopTimer()
			terminate(b, cmd)
			b.StartTimer()
		}
	})
	b.Run("dev=binary", func(b *testing.B) {
		bin := build(b)
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			cmd := exec.Command(bin, "dev", "--nats-port", "-1", "--log-format", "json")
			out, err := cmd.StdoutPipe()
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			waitLine(b, out, "ready")
			b.StopTimer()
			terminate(b, cmd)
			b.StartTimer()
		}
	})
}

func startEnv(b *testing.B) *harness.Env {
	b.Helper()
	e, err := harness.Start(harness.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.Close)
	return e
}

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// TestMain removes the binary built for the benchmarks.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// build compiles ./cmd/proxbus once per test binary, outside the timing.
func build(b *testing.B) string {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "proxbus-startup-*"); buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "proxbus")
		buildErr = harness.BuildProxbus(context.Background(), binPath)
	})
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	return binPath
}

func freeAddr(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitReadyz polls url until it answers 200.
func waitReadyz(b *testing.B, url string, cmd *exec.Cmd) {
	b.Helper()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := client.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	b.Fatalf("%s not ready after 30s", url)
}

// waitLine reads r until a line equal to want.
func waitLine(b *testing.B, r io.Reader, want string) {
	b.Helper()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == want {
			go func() { _, _ = io.Copy(io.Discard, r) }() // ends when the process exits
			return
		}
	}
	b.Fatalf("no %q line (%v)", want, sc.Err())
}

// terminate sends SIGTERM and waits for a clean exit.
func terminate(b *testing.B, cmd *exec.Cmd) {
	b.Helper()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			b.Errorf("%s exit: %v", cmd.Args[1], err)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		b.Fatalf("%s did not stop after SIGTERM", cmd.Args[1])
	}
}
