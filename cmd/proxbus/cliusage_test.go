package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUsageErrors pins what the command line says when it is used wrongly: the closest
// subcommand or flag, the expected type, arguments too many, -h exiting 0, the position of a
// JSON error; each exit 2 but -h, and short (no usage dump).
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"mistyped subcommand", []string{"sned"}, 2, []string{`unknown command sned, did you mean "send"?`}},
		{"no subcommand", nil, 2, []string{"Usage: proxbus <command>"}},
		{"mistyped flag", []string{"send", "vm.start", "--endpiont", "1"}, 2, []string{`unknown flag --endpiont, did you mean "--endpoint"?`, "proxbus send -h"}},
		{"wrong type", []string{"send", "vm.start", "--endpoint", "one"}, 2, []string{`--endpoint: expected a valid 64 bit int but got "one"`}},
		{"wrong duration", []string{"send", "vm.start", "--timeout", "soon"}, 2, []string{`--timeout: expected duration but got "soon"`}},
		{"extra argument to events", []string{"events", "--all", "extra"}, 2, []string{"unexpected argument extra"}},
		{"extra argument", []string{"cancel", "id-1", "id-2"}, 2, []string{"unexpected argument id-2"}},
		{"send -h", []string{"send", "-h"}, 0, []string{"Usage: proxbus send", "--endpoint", "PROXBUS_NATS_URL"}},
		{"dlq show -h", []string{"dlq", "show", "-h"}, 0, []string{"Usage: proxbus dlq show <seq>"}},
		{"JSON position", []string{"send", "vm.start", "--endpoint", "1", "--data", "{\n  \"vm\": 100,\n  \"x\": }"}, 2, []string{"--data is not valid JSON: line 3, column 8: unexpected character '}'"}},
		{"JSON end", []string{"send", "vm.start", "--endpoint", "1", "--data", `{"vm":`}, 2, []string{"line 1, column 7: unexpected end of the data"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := runCLI(t, tt.args...)
			if tt.code != 0 && out != "" {
				t.Errorf("a usage error wrote to stdout: %s", out)
			}
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstdout %s\nstderr %s", code, tt.code, out, errOut)
			}
			for _, w := range tt.want {
				if !strings.Contains(out+errOut, w) {
					t.Errorf("output lacks %q:\nstdout %s\nstderr %s", w, out, errOut)
				}
			}
			if tt.code != 0 && len(tt.args) > 0 && strings.Count(errOut, "\n") > 4 {
				t.Errorf("a usage error printed %d lines:\n%s", strings.Count(errOut, "\n"), errOut)
			}
		})
	}
}

// TestUnknownEnvWarned pins that a PROXBUS_* variable proxbus does not read is warned about,
// with the closest one it reads (or the one that replaced it), and a known one is not.
func TestUnknownEnvWarned(t *testing.T) {
	t.Parallel()
	env := map[string]string{"PROXBUS_CONCURENCY": "3", "PROXBUS_MAX_DELIVER": "5", "PROXBUS_NATS_URL": "nats://x:4222", "PROXBUS_TEST_REDIS": "required"}
	_, e, err := parseCLI(t, env, "version")
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	e.stderr = &out
	warnUnknownEnv(e)
	for _, w := range []string{"$PROXBUS_CONCURENCY is set but proxbus reads no such variable; it is ignored (did you mean $PROXBUS_CONCURRENCY?)",
		"$PROXBUS_MAX_DELIVER is set but proxbus reads no such variable; it is ignored (did you mean $PROXBUS_MAX_ATTEMPTS?)"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("warnings lack %q:\n%s", w, out.String())
		}
	}
	if strings.Contains(out.String(), "PROXBUS_NATS_URL") || strings.Contains(out.String(), "PROXBUS_TEST_REDIS") {
		t.Errorf("a variable proxbus reads was warned about:\n%s", out.String())
	}
}

// TestTypeErrorOfVariable pins that a variable whose value does not fit its flag's type is
// named with the type expected, with the other problems, exit 2.
func TestTypeErrorOfVariable(t *testing.T) {
	t.Parallel()
	c, e, err := parseCLI(t, map[string]string{"PROXBUS_ENDPOINT": "one", "PROXBUS_TIMEOUT": "soon", "PROXBUS_NO_WAIT": "maybe"}, "send", "vm.start")
	if err != nil {
		t.Fatal(err)
	}
	err = e.problems()
	for _, w := range []string{`$PROXBUS_ENDPOINT "one": not an integer`, `$PROXBUS_TIMEOUT "soon": not a duration`, `$PROXBUS_NO_WAIT "maybe": not true or false`} {
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), w) {
			t.Errorf("problems %v lack %q", err, w)
		}
	}
	if c.Send.Endpoint != 0 {
		t.Errorf("the bad value was used: endpoint %d", c.Send.Endpoint)
	}
}

// TestFallbackNATSIsNamed pins that a client subcommand given no NATS URL, with no dev
// running, says which NATS it uses and where it looked for dev's run file.
func TestFallbackNATSIsNamed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	t.Setenv(runDirEnv, dir)
	t.Setenv("PROXBUS_NATS_URL", "")
	var out strings.Builder
	e := newCLIEnv(context.Background(), nil, &out, &out)
	e.set, e.fromEnv = map[string]bool{}, map[string]bool{}
	natsURL, prefix := "nats://127.0.0.1:4222", "proxbus"
	e.natsFromDev(&natsURL, &prefix)
	want := "using NATS at nats://127.0.0.1:4222 (the --nats-url default: no proxbus dev is running, no run file at " + filepath.Join(dir, "dev.json") + ")"
	if !strings.Contains(out.String(), want) {
		t.Errorf("notice %q, want %q", out.String(), want)
	}
}

// TestSecondDevRefused pins that a dev does not start while another live dev owns the run
// file: the file is left as it was, and the message names the other one and PROXBUS_RUN_DIR.
func TestSecondDevRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	t.Setenv(runDirEnv, dir)
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Skip("cannot start a stand-in process:", err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	path := devRunPath(os.Getenv)
	first := devRun{PID: other.Process.Pid, NATSURL: "nats://127.0.0.1:4999", RedisURL: "redis://127.0.0.1:6999/0"}
	if err := writeDevRun(path, first); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	var stderr strings.Builder
	err := cmdDev(context.Background(), []string{"--nats-port", "-1", "--http-addr", "127.0.0.1:0"}, &strings.Builder{}, &stderr)
	if !errors.Is(err, errDevRunning) || !strings.Contains(err.Error(), "nats://127.0.0.1:4999") || !strings.Contains(err.Error(), "PROXBUS_RUN_DIR") {
		t.Fatalf("second dev: %v, want errDevRunning naming the first one's NATS and PROXBUS_RUN_DIR", err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("the first dev's run file changed:\n%s\nwas\n%s", after, before)
	}
}

// TestOneCommandFlagsHaveNoVariable pins that the flags naming one command or confirming one
// (--id, --data, --yes, …) are not read from the environment, where a leftover variable would
// repeat them for every command, and that such a variable is warned about as unread.
func TestOneCommandFlagsHaveNoVariable(t *testing.T) {
	t.Parallel()
	env := map[string]string{"PROXBUS_ID": "same-id", "PROXBUS_DATA": `{"vm":1}`, "PROXBUS_YES": "true", "PROXBUS_ENDPOINT": "3"}
	c, e, err := parseCLI(t, env, "send", "vm.start")
	if err != nil {
		t.Fatal(err)
	}
	if c.Send.ID != "" || c.Send.Data != "{}" || c.Send.Endpoint != 3 {
		t.Errorf("send from the environment: id %q data %q endpoint %d; want no id, the default data, endpoint 3", c.Send.ID, c.Send.Data, c.Send.Endpoint)
	}
	c, _, err = parseCLI(t, env, "dlq", "purge")
	if err != nil {
		t.Fatal(err)
	}
	if c.DLQ.Purge.Yes {
		t.Error("dlq purge took --yes from $PROXBUS_YES")
	}
	var out strings.Builder
	e.stderr = &out
	warnUnknownEnv(e)
	if !strings.Contains(out.String(), "$PROXBUS_YES is set but proxbus reads no such variable") || strings.Contains(out.String(), "PROXBUS_ENDPOINT") {
		t.Errorf("warnings:\n%s", out.String())
	}
}
