package app

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/testenv"
)

// TestStartDevNATS pins where the dev NATS listens and keeps its files: on the port asked
// for when it is free, else on another one with NATSPortTaken naming the one asked for; its
// store in a new directory of $TMPDIR that Close removes.
func TestStartDevNATS(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freePort := free.Addr().(*net.TCPAddr).Port
	free.Close()
	tests := []struct {
		name      string
		port      int
		wantTaken int
		wantPort  int // 0: any but the one asked for
	}{
		{"port taken", takenPort, takenPort, 0},
		{"port free", freePort, 0, freePort},
		{"any port", -1, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			env, err := StartDev(DevOptions{NATSPort: tt.port})
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(env.NATSURL)
			if env.NATSPortTaken != tt.wantTaken {
				t.Errorf("NATSPortTaken = %d, want %d", env.NATSPortTaken, tt.wantTaken)
			}
			if got := u.Port(); tt.wantPort != 0 && got != fmt.Sprint(tt.wantPort) || got == fmt.Sprint(takenPort) {
				t.Errorf("NATS on port %s (asked %d)", got, tt.port)
			}
			dirs := func() []string { m, _ := filepath.Glob(filepath.Join(tmp, "proxbus-nats-*")); return m }
			if len(dirs()) != 1 {
				t.Errorf("NATS directories while running: %v, want one", dirs())
			}
			env.Close()
			if d := dirs(); len(d) != 0 {
				t.Errorf("NATS directories left after Close: %v", d)
			}
		})
	}
}

// TestDevKeyPrefixIsNewEachRun: with a Redis given by URL each dev run keeps its keys under a
// prefix of its own, so an earlier run's leftovers (a guest lease of a command killed with it)
// never hold the next one back; the embedded Redis keeps the default prefix.
func TestDevKeyPrefixIsNewEachRun(t *testing.T) {
	t.Parallel()
	r := testenv.StartRedis(t)
	var prefixes []string
	for range 2 {
		env, err := StartDev(DevOptions{RedisURL: r.URL, NATSPort: -1})
		if err != nil {
			t.Fatal(err)
		}
		prefixes = append(prefixes, env.ServeConfig().Store.Prefix)
		env.Close()
	}
	if !strings.HasPrefix(prefixes[0], "proxbus-dev-") || prefixes[0] == prefixes[1] {
		t.Errorf("prefixes %q, want two different proxbus-dev-… prefixes", prefixes)
	}
	env, err := StartDev(DevOptions{NATSPort: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	if p := env.ServeConfig().Store.Prefix; p != "" {
		t.Errorf("embedded Redis prefix %q, want the default", p)
	}
}

// TestDevRemovesItsRunKeys: dev on a Redis given by URL removes the keys of its run's prefix
// when it ends (no later run uses that prefix), and leaves other prefixes alone.
func TestDevRemovesItsRunKeys(t *testing.T) {
	t.Parallel()
	r := testenv.StartRedis(t)
	env, err := StartDev(DevOptions{RedisURL: r.URL, NATSPort: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	mine, other := env.RedisKeyPrefix+":cmd:x", r.Prefix+":keep"
	t.Cleanup(func() { r.Client.Del(context.Background(), mine) })
	for _, k := range []string{mine, other} {
		if err := r.Client.Set(ctx, k, "1", time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	env.Close()
	if n, _ := r.Client.Exists(ctx, mine).Result(); n != 0 {
		t.Errorf("%s is still there after dev ended", mine)
	}
	if n, _ := r.Client.Exists(ctx, other).Result(); n != 1 {
		t.Errorf("%s of another prefix was removed", other)
	}
}
