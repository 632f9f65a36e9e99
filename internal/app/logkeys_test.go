package app

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// lockedBuffer is a bytes.Buffer safe for go-redis's background goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// duplicateKeys returns the keys that occur more than once in one JSON object (at any level).
func duplicateKeys(t *testing.T, line string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	var dups []string
	var object func()
	var value func()
	object = func() {
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			k := tok.(string)
			if seen[k] {
				dups = append(dups, k)
			}
			seen[k] = true
			value()
		}
		_, _ = dec.Token() // }
	}
	value = func() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		switch tok {
		case json.Delim('{'):
			object()
		case json.Delim('['):
			for dec.More() {
				value()
			}
			_, _ = dec.Token()
		}
	}
	value()
	return dups
}

// TestServeLoggerKeysAreUnique pins that no line of Serve's logger repeats a key: a
// sub-component's component replaces its parent's (the pipeline's repairer), a record's
// attribute replaces a preset one, and attributes in a group stay there.
func TestServeLoggerKeysAreUnique(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		log  func(*slog.Logger)
		want map[string]any
	}{
		{"sub-component", func(l *slog.Logger) {
			l.With("component", "pipeline").With("component", "repairer").Info("repaired", "command_id", "c1")
		}, map[string]any{"component": "repairer", "instance": "r1", "command_id": "c1"}},
		{"several keys at once", func(l *slog.Logger) {
			l.With("component", "http", "a", 1).With("a", 2, "component", "ingress").Info("x")
		}, map[string]any{"component": "ingress", "a": float64(2)}},
		{"record overrides preset", func(l *slog.Logger) {
			l.With("component", "pipeline").Info("x", "component", "consumer")
		}, map[string]any{"component": "consumer", "instance": "r1"}},
		{"group", func(l *slog.Logger) {
			l.With("component", "pipeline").WithGroup("g").With("component", "inner").Info("x")
		}, map[string]any{"component": "pipeline"}},
		{"secret still redacted", func(l *slog.Logger) {
			l.With("component", "a").With("component", "b", "note", "token hunter2").Info("x")
		}, map[string]any{"component": "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			tt.log(serveLogger(slog.NewJSONHandler(&buf, nil), []string{"hunter2"}).With("instance", "r1"))
			line := strings.TrimSpace(buf.String())
			if dups := duplicateKeys(t, line); len(dups) > 0 {
				t.Errorf("keys %v repeated in %s", dups, line)
			}
			if strings.Contains(line, "hunter2") {
				t.Errorf("secret in %s", line)
			}
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.want {
				if rec[k] != v {
					t.Errorf("%s = %v, want %v in %s", k, rec[k], v, line)
				}
			}
		})
	}
}

// TestRedisLogsAreRecords pins that go-redis's own log lines (here a failed dial of the
// connection pool) reach the routed logger as JSON records, and nothing after stop.
// Not parallel: go-redis's logger is process-global.
func TestRedisLogsAreRecords(t *testing.T) {
	var buf lockedBuffer
	stop := RouteRedisLogs(slog.New(slog.NewJSONHandler(&buf, nil)).With("component", "redis"))
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for ctx.Err() == nil && buf.String() == "" {
		_ = rdb.Ping(ctx).Err()
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	out := buf.String()
	if out == "" {
		t.Fatal("go-redis logged nothing through the routed logger")
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON record: %q", line)
		}
		if rec["component"] != "redis" || rec["level"] != "WARN" || strings.HasPrefix(rec["msg"].(string), "redis: ") {
			t.Errorf("record %v", rec)
		}
	}
	n := len(out)
	redisLogger{}.Printf(context.Background(), "after stop")
	if len(buf.String()) != n {
		t.Error("logged after stop")
	}
}
