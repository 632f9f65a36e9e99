package testenv_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/proxbus/proxbus/internal/testenv"
)

// Scripts loaded before a failover and run after it. Redis 7 does not copy its script cache
// to replicas, so a promoted replica may answer NOSCRIPT.
var (
	incrScript = redis.NewScript(`return redis.call('INCR', KEYS[1])`)
	setScript  = redis.NewScript(`return redis.call('SET', KEYS[1], ARGV[1])`)
)

// eventually retries f until it succeeds and returns how long that took; the test fails when
// ctx ends first.
func eventually(t *testing.T, ctx context.Context, what string, f func() error) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		err := f()
		if err == nil {
			return time.Since(start)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: gave up after %s: %v", what, time.Since(start).Round(time.Millisecond), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// clientTimeouts shortens go-redis's timeouts for loopback servers. ReadTimeout must exceed
// WAIT's 1000 ms: a pipeline reads every reply under ReadTimeout, whatever WAIT's own timeout.
func clientTimeouts() (dial, read, write time.Duration) {
	return 250 * time.Millisecond, 2 * time.Second, time.Second
}

// setAcked writes key=value and WAIT 1 1000 in one pipeline, so on one connection, and fails the
// test unless a replica acknowledged the write.
func setAcked(t *testing.T, ctx context.Context, c redis.Cmdable, key, value string) {
	t.Helper()
	pipe := c.Pipeline()
	pipe.Set(ctx, key, value, 0)
	wait := pipe.Do(ctx, "WAIT", 1, 1000)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("SET %s + WAIT: %v", key, err)
	}
	if acks, err := wait.Int64(); err != nil || acks < 1 {
		t.Fatalf("SET %s: WAIT 1 1000 answered %d replicas, %v", key, acks, err)
	}
}

// scriptAcked runs script by EVALSHA and WAIT 1 1000 in one pipeline and, where the server
// answers NOSCRIPT, runs the pipeline again with EVAL (Script.Run's fallback does not work in a
// pipeline, whose replies come only at Exec). It fails the test unless the script ran and a
// replica acknowledged it, and reports whether EVALSHA met NOSCRIPT.
func scriptAcked(t *testing.T, ctx context.Context, c redis.Cmdable, script *redis.Script, key string) (noscript bool) {
	t.Helper()
	run := func(byHash bool) (*redis.Cmd, *redis.Cmd, error) {
		pipe := c.Pipeline()
		var ev *redis.Cmd
		if byHash {
			ev = script.EvalSha(ctx, pipe, []string{key})
		} else {
			ev = script.Eval(ctx, pipe, []string{key})
		}
		wait := pipe.Do(ctx, "WAIT", 1, 1000)
		_, err := pipe.Exec(ctx)
		return ev, wait, err
	}
	ev, wait, err := run(true)
	if redis.HasErrorPrefix(ev.Err(), "NOSCRIPT") {
		noscript = true
		ev, wait, err = run(false)
	}
	if err != nil {
		t.Fatalf("script on %s + WAIT: %v", key, err)
	}
	if acks, err := wait.Int64(); err != nil || acks < 1 {
		t.Fatalf("script on %s: WAIT 1 1000 answered %d replicas, %v", key, acks, err)
	}
	return noscript
}

func TestSentinelFailover(t *testing.T) {
	const password = "test-only-password"
	s := testenv.StartSentinel(t, testenv.SentinelOptions{Replicas: 2, Sentinels: 3, Password: password})
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	opts := s.FailoverOptions()
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = clientTimeouts()
	// go-redis dials a dead sentinel DialerRetries times (default 5), per retry, before it
	// asks the others: with the sentinel it had picked down, the default held the client
	// back some 7 s past the failover.
	opts.DialerRetries = 1
	fc := redis.NewFailoverClient(opts)
	t.Cleanup(func() { _ = fc.Close() })

	want := map[string]string{}
	for i := range 20 {
		k, v := fmt.Sprintf("proxbus-test-ha:%d", i), fmt.Sprintf("v%d", i)
		setAcked(t, ctx, fc, k, v)
		want[k] = v
	}
	for _, sc := range []*redis.Script{incrScript, setScript} {
		if err := sc.Load(ctx, fc).Err(); err != nil {
			t.Fatalf("SCRIPT LOAD: %v", err)
		}
	}

	// One sentinel down throughout the failover: the other two are still a quorum and a
	// majority, and the client must do without it.
	s.Kill(s.SentinelAddrs[0])
	old := s.Primary(ctx)
	s.Kill(old)
	killed := time.Now()
	primary := s.WaitFailover(ctx, old)
	failedOver := time.Since(killed)
	eventually(t, ctx, "a write through the failover client", func() error {
		return fc.Set(ctx, "proxbus-test-ha:after", "x", 0).Err()
	})
	t.Logf("failover %s -> %s: sentinels agreed %s after the kill; the failover client wrote again after %s",
		old, primary, failedOver.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	if primary == old {
		t.Fatalf("WaitFailover returned the killed primary %s", old)
	}
	if got := s.Primary(ctx); got != primary {
		t.Fatalf("Primary = %s after WaitFailover returned %s", got, primary)
	}
	for k, v := range want {
		if got, err := fc.Get(ctx, k).Result(); err != nil || got != v {
			t.Fatalf("GET %s after failover = %q, %v; want %q (acknowledged by WAIT 1 before the kill)", k, got, err, v)
		}
	}
	if err := setScript.Run(ctx, fc, []string{"proxbus-test-ha:scripted"}, "y").Err(); err != nil {
		t.Fatalf("Script.Run after failover: %v", err)
	}

	s.Restart(s.SentinelAddrs[0])
	restarted := time.Now()
	s.Restart(old)
	s.WaitReplicas(ctx, 2)
	t.Logf("restarted %s: a replica in sync %s later", old, time.Since(restarted).Round(time.Millisecond))
	oc := redis.NewClient(&redis.Options{Addr: old, Password: password})
	t.Cleanup(func() { _ = oc.Close() })
	role, err := oc.Do(ctx, "ROLE").Slice()
	if err != nil || len(role) < 3 || role[0] != "slave" || fmt.Sprintf("%v:%v", role[1], role[2]) != primary {
		t.Fatalf("ROLE on restarted %s = %v, %v; want a replica of %s", old, role, err, primary)
	}
	for k, v := range want {
		if got, err := oc.Get(ctx, k).Result(); err != nil || got != v {
			t.Fatalf("GET %s on restarted %s = %q, %v; want %q", k, old, got, err, v)
		}
	}
	noscript := scriptAcked(t, ctx, fc, incrScript, "proxbus-test-ha:counter")
	t.Logf("EVALSHA on the new primary of a script loaded before the failover: NOSCRIPT = %t", noscript)
}

func TestRedisClusterFailover(t *testing.T) {
	tests := []struct {
		name     string
		password string
	}{
		{"no password", ""},
		{"password", "test-only-password"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := testenv.StartRedisCluster(t, testenv.ClusterOptions{Primaries: 3, ReplicasPerPrimary: 1, Password: tt.password})
			ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
			defer cancel()
			opts := rc.ClusterOptions()
			opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = clientTimeouts()
			cc := redis.NewClusterClient(opts)
			t.Cleanup(func() { _ = cc.Close() })

			want := map[string]string{}
			primaries := map[string]bool{}
			for i := range 30 {
				k, v := fmt.Sprintf("proxbus-test-ha:%d", i), fmt.Sprintf("v%d", i)
				if err := cc.Set(ctx, k, v, 0).Err(); err != nil {
					t.Fatalf("SET %s: %v", k, err)
				}
				want[k] = v
				primaries[rc.PrimaryFor(ctx, k)] = true
			}
			if len(primaries) != 3 {
				t.Fatalf("30 keys landed on %d primaries, want 3", len(primaries))
			}
			const key = "proxbus-test-ha:{victim}"
			m, err := cc.MasterForKey(ctx, key)
			if err != nil {
				t.Fatalf("MasterForKey: %v", err)
			}
			setAcked(t, ctx, m, key, "kept")
			for _, sc := range []*redis.Script{incrScript, setScript} {
				if err := sc.Load(ctx, cc).Err(); err != nil {
					t.Fatalf("SCRIPT LOAD: %v", err)
				}
			}

			old := rc.PrimaryFor(ctx, key)
			if old != m.Options().Addr {
				t.Fatalf("PrimaryFor(%q) = %s, go-redis MasterForKey = %s", key, old, m.Options().Addr)
			}
			rc.Kill(old)
			killed := time.Now()
			primary := rc.WaitFailover(ctx, old)
			failedOver := time.Since(killed)
			var got string
			eventually(t, ctx, "a read through the cluster client", func() error {
				var err error
				got, err = cc.Get(ctx, key).Result()
				return err
			})
			t.Logf("failover %s -> %s: cluster ok %s after the kill; the cluster client read again after %s",
				old, primary, failedOver.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
			if got != "kept" {
				t.Fatalf("GET %s after failover = %q, want %q (acknowledged by WAIT 1 before the kill)", key, got, "kept")
			}
			if p := rc.PrimaryFor(ctx, key); p != primary || p == old {
				t.Fatalf("PrimaryFor(%q) after failover = %s, want %s (not the killed %s)", key, p, primary, old)
			}
			if err := cc.Set(ctx, key, "again", 0).Err(); err != nil {
				t.Fatalf("SET %s after failover: %v", key, err)
			}
			if err := setScript.Run(ctx, cc, []string{key + ":scripted"}, "y").Err(); err != nil {
				t.Fatalf("Script.Run after failover: %v", err)
			}
			for k, v := range want {
				if rc.PrimaryFor(ctx, k) == primary {
					continue // written without WAIT to the killed primary: may be lost
				}
				if got, err := cc.Get(ctx, k).Result(); err != nil || got != v {
					t.Fatalf("GET %s (primary not killed) = %q, %v; want %q", k, got, err, v)
				}
			}

			restarted := time.Now()
			rc.Restart(old)
			t.Logf("restarted %s: rejoined as a replica %s later", old, time.Since(restarted).Round(time.Millisecond))
			oc := redis.NewClient(&redis.Options{Addr: old, Password: tt.password})
			t.Cleanup(func() { _ = oc.Close() })
			role, err := oc.Do(ctx, "ROLE").Slice()
			if err != nil || len(role) < 3 || role[0] != "slave" || fmt.Sprintf("%v:%v", role[1], role[2]) != primary {
				t.Fatalf("ROLE on restarted %s = %v, %v; want a replica of %s", old, role, err, primary)
			}
			nm, err := cc.MasterForKey(ctx, key)
			if err != nil {
				t.Fatalf("MasterForKey after failover: %v", err)
			}
			if nm.Options().Addr != primary {
				t.Fatalf("MasterForKey after failover = %s, want %s", nm.Options().Addr, primary)
			}
			noscript := scriptAcked(t, ctx, nm, incrScript, key+":n")
			t.Logf("EVALSHA on the promoted replica of a script loaded through the cluster client before the failover: NOSCRIPT = %t", noscript)
		})
	}
}
