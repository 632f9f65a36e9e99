package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/internal/testenv"
)

// TestServeFlagValuesAreChecked pins that every bad value of serve's flags is reported at
// once, each naming the flag and its range, as one usage error (exit 2).
func TestServeFlagValuesAreChecked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("nbt_abc.def\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want []string // substrings of the error, one per problem; none: valid
	}{
		{"defaults", nil, nil, nil},
		{"all at once", []string{"--concurrency", "-3", "--lease-ttl", "0s", "--ack-wait", "1ms", "--max-attempts", "0", "--stream-replicas", "0"}, nil, []string{
			"--concurrency -3: must be 1–1024", "--lease-ttl 0s: must be 1s–1h0m0s", "--ack-wait 1ms: must be 1s–1h0m0s",
			"--max-attempts 0: must be 1–100", "--stream-replicas 0: must be 1–5",
		}},
		{"upper bounds", []string{"--concurrency", "5000", "--stream-replicas", "7", "--http-result-timeout", "2h"}, nil, []string{
			"--concurrency 5000: must be 1–1024", "--stream-replicas 7: must be 1–5", "--http-result-timeout 2h0m0s: must be 1s–1h0m0s",
		}},
		{"durations", []string{"--dedupe-ttl", "1s", "--idempotency-window", "0s", "--max-ack-pending", "-1"}, nil, []string{
			"--dedupe-ttl 1s: must be at least 1m0s", "--idempotency-window 0s: must be at least 1s", "--max-ack-pending -1: must be 0–1048576",
		}},
		{"env", nil, map[string]string{"PROXBUS_CONCURRENCY": "0", "PROXBUS_ACK_WAIT": "soon"}, []string{
			"--concurrency (from $PROXBUS_CONCURRENCY) 0: must be 1–1024", `$PROXBUS_ACK_WAIT "soon": not a duration`,
		}},
		{"log", []string{"--log-format", "xml", "--log-level", "loud"}, nil, []string{
			`--log-format "xml": must be auto, json or text`, `--log-level "loud": must be debug, info, warn or error`,
		}},
		{"secret file", []string{"--netbox-token-file", tokenFile}, nil, nil},
		{"secret both", []string{"--netbox-token", "x", "--netbox-token-file", tokenFile}, nil, []string{
			"--netbox-token and --netbox-token-file: set only one of them",
		}},
		{"secret env both", []string{"--webhook-secret", "x"}, map[string]string{"PROXBUS_WEBHOOK_SECRET_FILE": tokenFile}, []string{
			"--webhook-secret and --webhook-secret-file (from $PROXBUS_WEBHOOK_SECRET_FILE): set only one of them",
		}},
		{"secret unreadable", []string{"--proxbox-api-key-file", filepath.Join(dir, "missing")}, nil, []string{
			"--proxbox-api-key-file " + filepath.Join(dir, "missing") + ": cannot read it: no such file or directory",
		}},
		{"secret empty", []string{"--webhook-secret-file", empty}, nil, []string{"--webhook-secret-file " + empty + ": the file is empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, e, err := parseCLI(t, tt.env, append([]string{"serve"}, tt.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := c.Serve.config(e)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if !errors.Is(err, errUsage) {
				t.Fatalf("err = %v, want a usage error", err)
			}
			msg := err.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error lacks %q:\n%s", w, msg)
				}
			}
			if n := strings.Count(msg, "\n  "); len(tt.want) > 1 && n != len(tt.want) {
				t.Errorf("error lists %d problems, want %d:\n%s", n, len(tt.want), msg)
			}
			if strings.Contains(msg, "nbt_abc") {
				t.Errorf("error shows a secret: %s", msg)
			}
			_ = cfg
		})
	}
}

// TestSecretFileIsTrimmed pins that a secret file's trailing newline is not part of the secret.
func TestSecretFileIsTrimmed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, content := range map[string]string{"lf": "s3cret\n", "crlf": "s3cret\r\n", "none": "s3cret"} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		c, e, err := parseCLI(t, map[string]string{"PROXBUS_NETBOX_TOKEN_FILE": path}, "serve", "--webhook-secret-file", path, "--proxbox-api-key-file", path)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := c.Serve.config(e)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.NetBoxToken != "s3cret" || cfg.Ingress.WebhookSecret != "s3cret" || cfg.Ingress.ProxboxAPIKey != "s3cret" {
			t.Errorf("%s: token %q webhook %q key %q", name, cfg.NetBoxToken, cfg.Ingress.WebhookSecret, cfg.Ingress.ProxboxAPIKey)
		}
	}
}

// TestDevAndStreamsFlagsAreChecked pins the checks of dev's and streams apply's flags, and
// that run exits 2 on them.
func TestDevAndStreamsFlagsAreChecked(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"dev", []string{"dev", "--nats-port", "70000", "--log-level", "x"}, []string{"--nats-port 70000: must be -1–65535", `--log-level "x"`}},
		{"streams", []string{"streams", "apply", "--concurrency", "0", "--stream-replicas", "9", "--max-ack-pending", "-2", "--ack-wait", "1ms"}, []string{
			"--concurrency 0: must be 1–1024", "--stream-replicas 9: must be 1–5", "--max-ack-pending -2", "--ack-wait 1ms",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stderr strings.Builder
			if code := run(tt.args, io.Discard, &stderr); code != 2 {
				t.Errorf("exit %d, want 2; stderr %s", code, stderr.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}

// TestStreamsApplyNeverLowersSilently runs `streams apply` against an embedded server: it
// prints what it created, refuses (exit 2) to lower a MaxAckPending of 24 back to the
// default naming the current value and the flag, and lowers it when the flag is given.
func TestStreamsApplyNeverLowersSilently(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	steps := []struct {
		name     string
		args     []string
		code     int
		want     []string
		wantNone string
	}{
		{"create", []string{"--max-ack-pending", "24"}, 0, []string{"stream PROXBUS_COMMANDS: created", "consumer proxbus on PROXBUS_COMMANDS: created"}, ""},
		{"again", []string{"--max-ack-pending", "24"}, 0, []string{"stream PROXBUS_DLQ: unchanged", "consumer proxbus on PROXBUS_COMMANDS: unchanged"}, ""},
		{"default would lower", nil, 2, []string{"MaxAckPending is 24 on the server", "pass --max-ack-pending 24 to keep it, or --max-ack-pending 8 to lower it"}, "→"},
		{"explicit lowers", []string{"--max-ack-pending", "8"}, 0, []string{"consumer proxbus on PROXBUS_COMMANDS: MaxAckPending 24 → 8"}, ""},
	}
	for _, s := range steps {
		var out strings.Builder
		code := run(append([]string{"streams", "apply", "--nats-url", n.URL}, s.args...), &out, &out)
		if code != s.code {
			t.Fatalf("%s: exit %d, want %d:\n%s", s.name, code, s.code, out.String())
		}
		for _, w := range s.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s: output lacks %q:\n%s", s.name, w, out.String())
			}
		}
		if s.wantNone != "" && strings.Contains(out.String(), s.wantNone) {
			t.Errorf("%s: output has %q:\n%s", s.name, s.wantNone, out.String())
		}
	}
}

// TestServeReportsEveryProblemAtOnce pins that serve reports the problems of its flags and of
// what they name (a NetBox URL without a scheme, with the fix; an endpoints file that cannot
// be read; a Redis URL that does not parse) in one message, each naming its flag and
// variable, exit 2, before connecting anything.
func TestServeReportsEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "endpoints.yaml")
	code, _, errOut := runCLI(t, "serve", "--netbox-url", "127.0.0.1:18000", "--concurrency", "0", "--endpoints-file", missing,
		"--redis-url", "127.0.0.1:6379")
	if code != 2 {
		t.Errorf("exit %d, want 2:\n%s", code, errOut)
	}
	for _, w := range []string{
		"4 problems",
		"--concurrency 0: must be 1–1024",
		`--netbox-url ($PROXBUS_NETBOX_URL) "127.0.0.1:18000": it has no scheme: write http://127.0.0.1:18000`,
		"--endpoints-file ($PROXBUS_ENDPOINTS_FILE) " + missing,
		"--redis-url ($PROXBUS_REDIS_URL)",
	} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errOut)
		}
	}
	code, _, errOut = runCLI(t, "serve")
	if code != 2 || !strings.Contains(errOut, "--netbox-url ($PROXBUS_NETBOX_URL) is required") || !strings.Contains(errOut, "--endpoints-file ($PROXBUS_ENDPOINTS_FILE) is required") {
		t.Errorf("serve without settings: exit %d:\n%s", code, errOut)
	}
}
