package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestSendRefusesBeforePublishing pins send's checks, made with the pipeline's validation
// before anything is published (no NATS is reachable at the URL given, so a command that
// passed them would fail with exit 1): exit 2, the problem named, "nothing was sent".
func TestSendRefusesBeforePublishing(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		want []string
		not  []string
	}{
		{"unknown field with a did-you-mean", []string{"vm.stop", "--endpoint", "1", "--data", `{"vm":"web1","forse":true}`},
			[]string{`"forse" is not a field of vm.stop; did you mean "force"?`, "vm.stop's fields: force, vm"}, nil},
		{"wrong type", []string{"vm.stop", "--endpoint", "1", "--data", `{"vm":"web1","force":"yes"}`},
			[]string{"force: wrong type or value"}, []string{"yes"}},
		{"missing required field", []string{"vm.stop", "--endpoint", "1", "--data", `{"force":true}`},
			[]string{"vm: required, missing"}, nil},
		{"a value is never echoed", []string{"storage.pbs.create", "--endpoint", "1", "--data", `{"storage":"s1","server":"pbs.lan","datastore":"d1","username":"a@pbs!t","password":"hunter2-secret","fingerprint":"nope"}`},
			[]string{"fingerprint: wrong type or value"}, []string{"hunter2-secret", "nope"}},
		{"data not an object", []string{"vm.stop", "--endpoint", "1", "--data", `[1]`},
			[]string{"the data must be a JSON object"}, nil},
		{"unknown verb with the closest names", []string{"vm.stpo", "--endpoint", "1", "--data", `{"vm":1}`},
			[]string{`unknown verb "vm.stpo"; did you mean vm.stop?`}, nil},
		{"unknown verb far from any", []string{"frobnicate", "--endpoint", "1"},
			[]string{`unknown verb "frobnicate"; the verbs are`, "vm.start", "storage.pbs.create"}, nil},
		{"missing --endpoint", []string{"vm.start", "--data", `{"vm":100}`},
			[]string{"--endpoint is required: vm.start runs against a NetBox ProxmoxEndpoint"}, nil},
		{"negative --endpoint", []string{"vm.start", "--endpoint", "-3", "--data", `{"vm":100}`},
			[]string{"--endpoint -3: must be a NetBox ProxmoxEndpoint id"}, nil},
		{"bad --expires", []string{"vm.start", "--endpoint", "1", "--data", `{"vm":100}`, "--expires", "tomorrow"},
			[]string{`--expires "tomorrow": not a duration`}, nil},
		{"past --expires", []string{"vm.start", "--endpoint", "1", "--data", `{"vm":100}`, "--expires", "2001-01-01T00:00:00Z"},
			[]string{"--expires 2001-01-01T00:00:00Z: already past"}, nil},
		{"every problem at once", []string{"vm.stop", "--data", `{"vm":"web1","forse":true}`, "--expires", "-5m"},
			[]string{"--endpoint is required", "--expires -5m: must be a positive duration", `did you mean "force"?`}, nil},
		{"data not JSON", []string{"vm.stop", "--endpoint", "1", "--data", `{nope`}, []string{"--data is not valid JSON"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"send"}, append(tc.args, "--nats-url", "nats://127.0.0.1:1", "--timeout", "2s")...)
			code, out, errOut := runCLI(t, args...)
			if code != 2 || out != "" {
				t.Fatalf("code %d (want 2), stdout %q\nstderr %s", code, out, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(errOut, w) {
					t.Errorf("stderr shows %q:\n%s", w, errOut)
				}
			}
		})
	}
}

// TestParseExpires pins --expires: a duration from now or an RFC 3339 time, in UTC.
func TestParseExpires(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	cases := []struct {
		in      string
		want    time.Time
		wantErr string
	}{
		{"", time.Time{}, ""},
		{"10m", now.Add(10 * time.Minute), ""},
		{"1h30m", now.Add(90 * time.Minute), ""},
		{"2026-03-04T07:00:00+02:00", time.Time{}, "already past"},
		{"2026-03-04T08:00:00+02:00", time.Date(2026, 3, 4, 6, 0, 0, 0, time.UTC), ""},
		{"0s", time.Time{}, "positive duration"},
		{"soon", time.Time{}, "not a duration"},
	}
	for _, tc := range cases {
		got, err := parseExpires(tc.in, now)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "--expires") {
				t.Errorf("parseExpires(%q) error %v, want %q naming --expires", tc.in, err, tc.wantErr)
			}
		case err != nil || !got.Equal(tc.want) || got.Location() != time.UTC:
			t.Errorf("parseExpires(%q) = %v, %v; want %v in UTC", tc.in, got, err, tc.want)
		}
	}
}

// TestReadDataStdin pins --data @-: the data is read from stdin; invalid JSON there is named.
func TestReadDataStdin(t *testing.T) {
	t.Parallel()
	got, err := readData("@-", strings.NewReader(`{"vm": 100}`))
	if err != nil || string(got) != `{"vm": 100}` {
		t.Errorf("readData(@-) = %q, %v", got, err)
	}
	if _, err := readData("@-", strings.NewReader(`{"vm":`)); err == nil || !strings.Contains(err.Error(), "--data @- is not valid JSON") {
		t.Errorf("invalid stdin: %v", err)
	}
	if _, err := readData("@-", errReader{}); err == nil || !strings.Contains(err.Error(), "reading stdin") {
		t.Errorf("unreadable stdin: %v", err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("broken pipe") }

// TestShellQuote pins the quoting of the commands printed for an interrupted send.
func TestShellQuote(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"cli-0a1b":        "cli-0a1b",
		"urn:proxbus:cli": "urn:proxbus:cli",
		"/netbox/hook/7":  "/netbox/hook/7",
		"a b":             "'a b'",
		"it's":            `'it'\''s'`,
		"":                "''",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// sendCLI runs cmdSend with stdin, the way main's run does, with ctx.
func sendCLI(ctx context.Context, stdin string, args ...string) (code int, stdout, stderr string) {
	var out, errb strings.Builder
	code = cmdSend(ctx, args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}
