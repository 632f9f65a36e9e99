package main

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/proxbus/proxbus/internal/presence"
)

// announceReplica records that a replica serves prefix in rdb, as serve does while it runs.
func announceReplica(t *testing.T, rdb redis.Cmdable, prefix string) {
	t.Helper()
	if err := presence.Announce(context.Background(), rdb, prefix, "test-replica", time.Now()); err != nil {
		t.Fatal(err)
	}
}

// parseCLI parses args as the command line does, with env as the only environment, and
// returns the grammar filled in and the cliEnv that records where each value came from.
func parseCLI(t *testing.T, env map[string]string, args ...string) (*cli, *cliEnv, error) {
	t.Helper()
	e := newCLIEnv(context.Background(), nil, io.Discard, io.Discard)
	e.getenv = func(k string) string { return env[k] }
	e.environ = func() []string {
		var kv []string
		for k, v := range env {
			kv = append(kv, k+"="+v)
		}
		return kv
	}
	e.set, e.fromEnv = map[string]bool{}, map[string]bool{}
	var c cli
	parser, err := newParser(&c, e)
	if err != nil {
		t.Fatal(err)
	}
	e.known = knownEnv(parser)
	_, err = parseArgs(e, parser, args)
	return &c, e, err
}
