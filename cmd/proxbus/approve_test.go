package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
)

// TestApproveRejectPending pins `proxbus pending`, `proxbus approve` and `proxbus reject`
// (contract §4b, §10) against a replica whose endpoint 1 needs approval for vm.start and
// vm.stop: the waiting commands are listed, the requester cannot approve their own, an
// approved one runs and a rejected one is answered 403 approval_rejected without running.
func TestApproveRejectPending(t *testing.T) {
	t.Parallel()
	env, r := devInfra(t)
	serveDev(t, env, r.Prefix, func(c *app.Config) {
		for i := range c.Endpoints {
			if c.Endpoints[i].ID == 1 {
				c.Endpoints[i].Approval.Verbs = []string{"vm.start", "vm.stop"}
			}
		}
	})
	nats := []string{"--nats-url", env.NATSURL}
	store := []string{"--redis-url", r.URL, "--redis-key-prefix", r.Prefix}
	for _, c := range [][]string{
		{"send", "vm.start", "--endpoint", "1", "--data", `{"vm":101}`, "--id", "ap-start", "--actor", "alice", "--no-wait"},
		{"send", "vm.stop", "--endpoint", "1", "--data", `{"vm":100}`, "--id", "ap-stop", "--actor", "alice", "--no-wait"},
	} {
		if code, out, errOut := runCLI(t, append(c, nats...)...); code != 0 {
			t.Fatalf("%v: %d %s %s", c, code, out, errOut)
		}
	}
	var listed string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		_, listed, _ = runCLI(t, append([]string{"pending"}, store...)...)
		if strings.Contains(listed, "2 awaiting approval") {
			break
		}
	}
	for _, want := range []string{"ap-start", "ap-stop", "alice", "vm.start", "vmid=101 vm_name=db-01 node=pve2",
		"POST /nodes/pve2/qemu/101/status/start"} { // the dry-run plan
		if !strings.Contains(listed, want) {
			t.Fatalf("pending lacks %q:\n%s", want, listed)
		}
	}

	cases := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"no actor", []string{"approve", "ap-start"}, 2, "--actor is required"},
		{"own command", []string{"approve", "ap-start", "--actor", "alice"}, 1, "403 approver_is_requester"},
		{"not arrived yet", []string{"approve", "nope", "--actor", "bob"}, 0, "approved id=nope: no command with this source and id has asked for approval yet; the decision is kept"},
		{"approved", []string{"approve", "ap-start", "--actor", "bob"}, 0, "approved vm.start id=ap-start (requested by alice)"},
		{"rejected", []string{"reject", "ap-stop", "--actor", "carol", "--reason", "outside the window"}, 0, "rejected vm.stop id=ap-stop (requested by alice)"},
		{"decided already", []string{"approve", "ap-stop", "--actor", "bob"}, 1, "409 not_awaiting_approval: already rejected by carol"},
	}
	for _, tc := range cases {
		code, out, errOut := runCLI(t, append(tc.args, nats...)...)
		if code != tc.wantCode || !strings.Contains(out+errOut, tc.want) {
			t.Errorf("%s: code %d (want %d), output %q, want it to say %q", tc.name, code, tc.wantCode, out+errOut, tc.want)
		}
	}

	for id, want := range map[string]struct {
		status int
		reason string
	}{"ap-start": {200, ""}, "ap-stop": {403, "approval_rejected"}} {
		_, out, errOut := runCLI(t, "events", "--id", id, "--output", "json", "--nats-url", env.NATSURL)
		var res events.Result
		for line := range strings.Lines(out) {
			var ev struct {
				Type string          `json:"type"`
				Data json.RawMessage `json:"data"`
			}
			if json.Unmarshal([]byte(line), &ev) == nil && strings.HasSuffix(ev.Type, ".result") {
				_ = json.Unmarshal(ev.Data, &res)
			}
		}
		if res.Status != want.status || res.Reason != want.reason {
			t.Errorf("%s: result %d %s, want %d %s (%s)", id, res.Status, res.Reason, want.status, want.reason, errOut)
		}
		if want.status == 403 && !strings.Contains(res.Detail, "rejected by carol (outside the window)") {
			t.Errorf("%s: detail %q, want the rejection's reason", id, res.Detail)
		}
	}
	if g, _ := env.PVE.Guest(101); g.Status != "running" {
		t.Errorf("guest 101 %s: the approved vm.start did not run", g.Status)
	}
	if g, _ := env.PVE.Guest(100); g.Status != "running" {
		t.Errorf("guest 100 %s: the rejected vm.stop ran", g.Status)
	}
	if _, listed, _ := runCLI(t, append([]string{"pending"}, store...)...); !strings.Contains(listed, "0 awaiting approval") {
		t.Errorf("pending after the decisions:\n%s", listed)
	}
}
