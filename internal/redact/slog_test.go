package redact_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/internal/redact"
)

const canary = "CANARY-xyz"

// newLogger returns a JSON logger behind the redacting handler, and the buffer it writes to.
func newLogger(t *testing.T) (*slog.Logger, *bytes.Buffer) {
	t.Helper()
	var buf bytes.Buffer
	return slog.New(redact.NewHandler(slog.NewJSONHandler(&buf, nil), canary)), &buf
}

// lines decodes every JSON log line in buf.
func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, l)
		}
		out = append(out, m)
	}
	return out
}

type creds struct {
	User   string
	Secret string
}

// valuer is a LogValuer that resolves to a value holding the canary.
type valuer struct{}

func (valuer) LogValue() slog.Value { return slog.StringValue("resolved " + canary) }

func TestHandlerNeverLogsTheCanary(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		log  func(l *slog.Logger)
		keep []string // non-secret text that must survive
	}{
		{"message", func(l *slog.Logger) { l.Info("login with " + canary + " failed") }, []string{"login with", "failed"}},
		{"string attr", func(l *slog.Logger) { l.Info("m", "detail", "upstream said "+canary) }, []string{`"detail":"upstream said [redacted]"`}},
		{"secret-named attr", func(l *slog.Logger) { l.Info("m", "password", canary, "user", "root") }, []string{`"password":"[redacted]"`, `"user":"root"`}},
		{"secret-named int attr", func(l *slog.Logger) { l.Info("m", "token_len", 42) }, []string{`"token_len":"[redacted]"`}},
		{"error attr", func(l *slog.Logger) {
			l.Error("m", "err", fmt.Errorf("post storage: %w", errors.New("bad secret "+canary)))
		}, []string{"post storage: bad secret [redacted]"}},
		{"struct attr", func(l *slog.Logger) { l.Info("m", "creds", creds{User: "root", Secret: canary}) }, []string{"User:root"}},
		{"pointer attr", func(l *slog.Logger) { l.Info("m", "creds", &creds{User: "root", Secret: canary}) }, []string{"User:root"}},
		{"slice attr", func(l *slog.Logger) { l.Info("m", "list", []string{"a", canary}) }, []string{`"list":"[a [redacted]]"`}},
		{"raw JSON attr", func(l *slog.Logger) { l.Info("m", "data", json.RawMessage(`{"password":"x1","storage":"pbs1"}`)) }, []string{`\"storage\":\"pbs1\"`, `\"password\":\"[redacted]\"`}},
		{"byte slice attr", func(l *slog.Logger) { l.Info("m", "body", []byte("upstream "+canary)) }, []string{`"body":"upstream [redacted]"`}},
		{"log valuer", func(l *slog.Logger) { l.Info("m", "v", valuer{}) }, []string{`"v":"resolved [redacted]"`}},
		{"group", func(l *slog.Logger) {
			l.Info("m", slog.Group("req", "storage", "pbs1", "echo", canary, slog.Group("inner", "s", canary), "password", "p"))
		}, []string{`"storage":"pbs1"`, `"echo":"[redacted]"`, `"inner":{"s":"[redacted]"}`, `"password":"[redacted]"`}},
		{"secret-named group", func(l *slog.Logger) { l.Info("m", slog.Group("secrets", "a", "b")) }, []string{`"secrets":"[redacted]"`}},
		{"WithAttrs", func(l *slog.Logger) {
			l.With("preset", "x "+canary, "token", "tok", "node", "pve1").Info("m", "after", canary)
		}, []string{`"preset":"x [redacted]"`, `"token":"[redacted]"`, `"node":"pve1"`, `"after":"[redacted]"`}},
		{"WithGroup", func(l *slog.Logger) {
			l.WithGroup("cmd").With("id", "c1", "echo", canary).Info("m", "detail", canary, "verb", "storage.pbs.create")
		}, []string{`"cmd":{`, `"id":"c1"`, `"echo":"[redacted]"`, `"detail":"[redacted]"`, `"verb":"storage.pbs.create"`}},
		{"LogAttrs", func(l *slog.Logger) {
			l.LogAttrs(context.Background(), slog.LevelWarn, "m", slog.String("s", canary), slog.Any("e", errors.New(canary)))
		}, []string{`"s":"[redacted]"`, `"e":"[redacted]"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l, buf := newLogger(t)
			tt.log(l)
			out := buf.String()
			if out == "" {
				t.Fatal("nothing logged")
			}
			lines(t, buf) // every line is still valid JSON
			if strings.Contains(out, canary) {
				t.Errorf("canary leaked: %s", out)
			}
			if strings.Contains(out, "hunter2") {
				t.Errorf("secret-named value leaked: %s", out)
			}
			for _, k := range tt.keep {
				if !strings.Contains(out, k) {
					t.Errorf("log line lost %q: %s", k, out)
				}
			}
		})
	}
}

func TestHandlerKeepsNonStringKinds(t *testing.T) {
	t.Parallel()
	l, buf := newLogger(t)
	l.Info("plain message", "port", 8007, "ok", true, "ratio", 0.5)
	got := lines(t, buf)
	if len(got) != 1 {
		t.Fatalf("want 1 line, got %d", len(got))
	}
	m := got[0]
	if m["msg"] != "plain message" || m["port"] != float64(8007) || m["ok"] != true || m["ratio"] != 0.5 {
		t.Errorf("non-secret attributes changed: %v", m)
	}
}

func TestHandlerEnabledFollowsNext(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	h := redact.NewHandler(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx := context.Background()
	if h.Enabled(ctx, slog.LevelInfo) {
		t.Error("Enabled(Info) = true behind a Warn handler")
	}
	if !h.Enabled(ctx, slog.LevelError) {
		t.Error("Enabled(Error) = false behind a Warn handler")
	}
	slog.New(h).Info("dropped")
	if buf.Len() != 0 {
		t.Errorf("an Info record passed a Warn handler: %s", buf.String())
	}
}

// TestHandlerFuncLearnsSecrets: a secret the function returns from some point on is cut out
// of every record logged after it, also through a logger made earlier with With.
func TestHandlerFuncLearnsSecrets(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	var learnt []string
	l := slog.New(redact.NewHandlerFunc(slog.NewJSONHandler(&buf, nil), func() []string { return learnt }, canary))
	child := l.With("component", "x")
	const later = "LATER-secret-123"
	child.Info("before " + later)
	learnt = []string{later}
	child.Info("after "+later, "detail", "said "+later+" and "+canary)
	out := buf.String()
	if !strings.Contains(out, "before "+later) {
		t.Errorf("a value not known yet was cut: %s", out)
	}
	if strings.Count(out, later) != 1 || strings.Contains(out, canary) {
		t.Errorf("a known secret was logged: %s", out)
	}
}
