// Package testenv gives tests the real infrastructure they run against: an embedded NATS
// JetStream server per test and a Redis connection isolated by key prefix.
//
// Redis: tests use the server at PROXBUS_TEST_REDIS_URL (default redis://127.0.0.1:6379/0).
// When it cannot be reached they fall back, loudly, to an embedded Redis-protocol server, unless
// PROXBUS_TEST_REDIS=required (CI sets it), in which case the test fails.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/proxbus/proxbus/internal/embedded"
)

// NATS is a running embedded JetStream server and a connection to it.
type NATS struct {
	Server *server.Server
	URL    string
	Conn   *nats.Conn
	JS     jetstream.JetStream
}

// StartNATS starts a JetStream server on a free port with its store in t.TempDir, connects to
// it, and stops both when the test ends.
func StartNATS(t testing.TB) *NATS {
	t.Helper()
	return StartNATSWith(t, embedded.NATSOptions{})
}

// StartNATSWith is StartNATS with server options (Host, Port and StoreDir are set for you).
func StartNATSWith(t testing.TB, opts embedded.NATSOptions) *NATS {
	t.Helper()
	opts.Host, opts.Port, opts.StoreDir = "", 0, t.TempDir()
	srv, err := embedded.StartNATS(opts)
	if err != nil {
		t.Fatalf("start nats: %v", err)
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatalf("connect nats: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return &NATS{Server: srv, URL: srv.ClientURL(), Conn: nc, JS: js}
}

// Redis is a Redis connection for one test, with a key prefix no other test uses.
type Redis struct {
	Client *redis.Client
	URL    string
	// Prefix is unique to the test; pass it to the store so tests never share keys.
	Prefix string
	// Embedded is true when the test fell back to the embedded Redis-protocol server.
	Embedded bool
}

var fallbackOnce sync.Once

// StartRedis connects to the test Redis (see the package doc) and removes the test's keys
// when it ends.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	url := os.Getenv("PROXBUS_TEST_REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	prefix := "proxbus-test-" + randomHex(t, 6)
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("PROXBUS_TEST_REDIS_URL: %v", err)
	}
	client := redis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err == nil {
		t.Cleanup(func() {
			deletePrefix(client, prefix)
			_ = client.Close()
		})
		return &Redis{Client: client, URL: url, Prefix: prefix}
	} else {
		_ = client.Close()
		if os.Getenv("PROXBUS_TEST_REDIS") == "required" {
			t.Fatalf("PROXBUS_TEST_REDIS=required but Redis at %s is not reachable: %v", url, err)
		}
		fallbackOnce.Do(func() {
			fmt.Fprintf(os.Stderr, "\n*** testenv: Redis at %s unreachable (%v); FALLING BACK to the embedded, non-durable Redis-protocol server. Set PROXBUS_TEST_REDIS=required to forbid this. ***\n\n", url, err)
		})
	}
	m, err := embedded.StartRedis()
	if err != nil {
		t.Fatalf("embedded redis: %v", err)
	}
	t.Cleanup(m.Close)
	client = redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	return &Redis{Client: client, URL: "redis://" + m.Addr(), Prefix: prefix, Embedded: true}
}

func deletePrefix(c *redis.Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		c.Del(ctx, iter.Val())
	}
}

func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("random: %v", err)
	}
	return hex.EncodeToString(b)
}

// SharedContract reads a file of the published API contracts that CI lays beside the clone
// (<repo root>/../shared/contracts/<rel>). It skips the test, saying so, where they are absent
// (a user's clone), and fails it when the file exists but cannot be read.
func SharedContract(t testing.TB, rel ...string) []byte {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("working directory: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("contract test skipped: repository root (go.mod) not found")
		}
		dir = parent
	}
	path := filepath.Join(append([]string{dir, "..", "shared", "contracts"}, rel...)...)
	raw, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		t.Skipf("contract test skipped: %s is absent (the published contracts live in <repo root>/../shared/contracts/)", path)
	}
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return raw
}
