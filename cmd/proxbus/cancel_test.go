package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/events"
)

// TestCancel pins `proxbus cancel` (contract §10): a queued command is cancelled and, once a
// replica runs, answered 410 command_cancelled without starting its guest; an unknown id, a
// read and a finished command are not cancelled, each with a message saying why.
func TestCancel(t *testing.T) {
	t.Parallel()
	env, r := devInfra(t)
	if code, _, errOut := runCLI(t, "streams", "apply", "--nats-url", env.NATSURL); code != 0 {
		t.Fatalf("streams apply: %d %s", code, errOut)
	}
	stores := []string{"--nats-url", env.NATSURL, "--redis-url", r.URL, "--redis-key-prefix", r.Prefix}
	send := func(verb, data, id string) {
		t.Helper()
		if code, out, errOut := runCLI(t, "send", verb, "--endpoint", "1", "--data", data, "--id", id, "--no-wait", "--nats-url", env.NATSURL); code != 0 {
			t.Fatalf("send %s: %d %s %s", id, code, out, errOut)
		}
	}
	send("vm.start", `{"vm":101}`, "queued-start")
	send("vm.list", `{}`, "queued-list")

	// No replica announced the prefix: cancel stores nothing and says so, instead of claiming
	// a cancellation no replica would ever read.
	typo := []string{"cancel", "queued-start", "--nats-url", env.NATSURL, "--redis-url", r.URL, "--redis-key-prefix", r.Prefix + "-typo"}
	if code, out, errOut := runCLI(t, typo...); code != 1 || strings.Contains(out, "cancelled") ||
		!strings.Contains(errOut, `--redis-key-prefix "`+r.Prefix+`-typo"`) || !strings.Contains(errOut, "nothing was done") {
		t.Errorf("cancel on a prefix no replica serves: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	announceReplica(t, r.Client, r.Prefix)

	cases := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"no id", nil, 2, "the command id is required"},
		{"unknown id", []string{"nope"}, 1, "no queued command nope from source urn:proxbus:cli"},
		{"another source", []string{"queued-start", "--source", "/netbox/webhook/7"}, 1, "no queued command queued-start from source /netbox/webhook/7"},
		{"a read", []string{"queued-list"}, 1, "vm.list id=queued-list is a read"},
		{"queued", []string{"queued-start", "--actor", "alice"}, 0, "cancelled vm.start id=queued-start: the replica that takes it answers 410 command_cancelled"},
		{"twice", []string{"queued-start"}, 0, "vm.start id=queued-start is already cancelled"},
	}
	for _, tc := range cases {
		code, out, errOut := runCLI(t, append(append([]string{"cancel"}, tc.args...), stores...)...)
		if code != tc.wantCode || !strings.Contains(out+errOut, tc.want) {
			t.Errorf("%s: code %d (want %d), output %q, want it to say %q", tc.name, code, tc.wantCode, out+errOut, tc.want)
		}
	}

	serveDev(t, env, r.Prefix)
	code, out, errOut := runCLI(t, "events", "--id", "queued-start", "--output", "json", "--nats-url", env.NATSURL)
	if code != 0 {
		t.Fatalf("events: %d %s", code, errOut)
	}
	var res events.Result
	for line := range strings.Lines(out) {
		var ev struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Type == "proxbus.vm.start.result" {
			_ = json.Unmarshal(ev.Data, &res)
		}
	}
	if res.Status != 410 || res.Reason != "command_cancelled" || !strings.Contains(res.Detail, "cancelled by alice") {
		t.Errorf("result %+v, want 410 command_cancelled naming alice", res)
	}
	if g, ok := env.PVE.Guest(101); !ok || g.Status != "stopped" {
		t.Errorf("guest 101 %+v: a cancelled vm.start started it", g)
	}
	if code, _, errOut := runCLI(t, append([]string{"cancel", "queued-start"}, stores...)...); code != 1 || !strings.Contains(errOut, "had already finished") {
		t.Errorf("cancel after the result: code %d %q", code, errOut)
	}
}
