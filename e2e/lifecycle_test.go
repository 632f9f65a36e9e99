package e2e_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/store"
)

func mustEncode(t *testing.T, e *env, cmd events.Command) *nats.Msg {
	t.Helper()
	msg, err := events.EncodeBinary(e.subjects, cmd)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return msg
}

// TestShutdownCompletesInFlightCommand: the process is told to stop while the Proxmox call is
// in flight; the call, the journal update, the Redis record and the result all complete before
// Serve returns.
func TestShutdownCompletesInFlightCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	stop := e.start()
	e.pve.SetLatency(1200 * time.Millisecond)
	cmd := e.command(pbs("pbs-drain"))
	e.publish(cmd)
	eventually(t, 10*time.Second, "the create to reach Proxmox", func() bool {
		for _, st := range e.steps(cmd) {
			if st.Step == "create_storage" {
				return true
			}
		}
		return false
	})
	if err := stop(); err != nil {
		t.Fatalf("serve returned %v", err)
	}
	// Everything is already done when Serve returns.
	if _, ok := e.pve.StorageConfig("pbs-drain"); !ok {
		t.Error("storage not created")
	}
	if entries := e.netbox.JournalEntries(); len(entries) != 1 || entries[0].Kind != "success" {
		t.Errorf("journal %+v", entries)
	}
	if _, err := e.store.Result(context.Background(), store.CommandKey{Source: cmd.Source, ID: cmd.ID}); err != nil {
		t.Errorf("record: %v", err)
	}
	res := e.result(cmd)
	if res.Status != 201 {
		t.Errorf("result %d", res.Status)
	}
	s, _ := e.nats.JS.Stream(context.Background(), e.subjects.CommandsStream())
	if info, err := s.Info(context.Background()); err != nil || info.State.Msgs != 0 {
		t.Errorf("command still in the work queue (acked?): %+v %v", info.State, err)
	}
}

// TestPoisonMessages: messages that cannot be commands are dead-lettered with a reason, get a
// 400 invalid_command result where an id is readable, and the consumer keeps going.
func TestPoisonMessages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	good := e.command(pbs("pbs-after-poison"))
	cases := []struct {
		name     string
		msg      func() *nats.Msg
		resultID string // "" when no id is readable
		dlqVerb  string
	}{
		{"unknown verb", func() *nats.Msg {
			c := e.command(`{}`)
			c.ID, c.Verb, c.Type = "poison-verb", "vm.explode", "proxbus.vm.explode"
			return mustEncode(t, e, c)
		}, "poison-verb", "vm.explode"},
		{"data not JSON", func() *nats.Msg {
			m := mustEncode(t, e, e.command(`{}`))
			m.Header.Set("ce-id", "poison-json")
			m.Header.Set("Nats-Msg-Id", "poison-json")
			m.Data = []byte(`{"storage": "x", "password": "` + canary + `"`) // truncated
			return m
		}, "poison-json", "storage.pbs.create"},
		{"no id", func() *nats.Msg {
			m := mustEncode(t, e, e.command(`{}`))
			m.Header.Del("ce-id")
			m.Header.Set("Nats-Msg-Id", "poison-noid")
			return m
		}, "", "storage.pbs.create"},
		{"type does not match subject", func() *nats.Msg {
			c := e.command(`{}`)
			c.ID = "poison-type"
			m := mustEncode(t, e, c)
			m.Header.Set("ce-type", "proxbus.vm.start")
			return m
		}, "poison-type", "storage.pbs.create"},
		{"over 1 MiB", func() *nats.Msg {
			c := e.command(`{"pad":"` + strings.Repeat("x", 1<<20) + `"}`)
			c.ID = "poison-big"
			return mustEncode(t, e, c)
		}, "poison-big", "storage.pbs.create"},
	}
	for _, tc := range cases {
		e.publishMsg(tc.msg())
	}
	e.publish(good)
	if r := e.result(good); r.Status != 201 {
		t.Fatalf("good command after poison: %d", r.Status)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.resultID != "" {
				res := e.resultFor(good.Source, tc.resultID)
				if res.Status != 400 || res.Reason != "invalid_command" {
					t.Errorf("result %d %s", res.Status, res.Reason)
				}
			}
		})
	}
	eventually(t, 10*time.Second, "dead letters", func() bool {
		return len(e.streamMessages(e.subjects.DLQStream(), "")) >= len(cases)
	})
	dls := e.streamMessages(e.subjects.DLQStream(), "")
	reasons := map[string]bool{}
	for _, m := range dls {
		if m.Header.Get("Proxbus-Dlq-Reason") == "" {
			t.Errorf("dead letter %s without a reason", m.Subject)
		}
		reasons[m.Header.Get("Proxbus-Dlq-Reason")] = true
		if strings.Contains(string(m.Data), canary) {
			t.Errorf("dead letter %s keeps the secret", m.Subject)
		}
	}
	if len(dls) != len(cases) {
		t.Errorf("dead letters = %d, want %d (reasons %v)", len(dls), len(cases), reasons)
	}
	if n := e.pve.Requests("POST", "/storage"); n != 1 {
		t.Errorf("POSTs = %d, want 1 (only the good command)", n)
	}
}

// TestWaitingNeverDeadLettered: a command whose twin holds it (a replica that claimed it and
// vanished, its lease not yet expired) is redelivered as often as it takes — many more
// deliveries than --max-attempts — and is neither answered nor dead-lettered while it waits;
// once the lease expires it is resumed and runs once.
func TestWaitingNeverDeadLettered(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cmd := e.command(pbs("pbs-stuck"))
	e.deadReplica(cmd, 4*time.Second, false)
	e.start()
	e.publish(cmd)
	res := e.result(cmd)
	if res.Status != 201 || res.Replayed {
		t.Fatalf("result %d %s %s, want a first-hand 201", res.Status, res.Result, res.Reason)
	}
	if n := len(e.resultsOf(cmd)); n != 1 {
		t.Errorf("%d results, want 1", n)
	}
	var waited int
	for _, st := range e.steps(cmd) {
		if st.Status == events.StepWaiting {
			waited++
		}
		if st.Attempt != 1 {
			t.Errorf("step %s %s has attempt %d, want 1: waiting spends none", st.Step, st.Status, st.Attempt)
		}
	}
	if waited != 1 {
		t.Errorf("%d waiting steps, want 1", waited)
	}
	if n := len(e.streamMessages(e.subjects.DLQStream(), "")); n != 0 {
		t.Errorf("%d dead letters, want none", n)
	}
	if n := e.pve.Requests("POST", "/storage"); n != 1 {
		t.Errorf("POSTs = %d, want 1", n)
	}
}

// TestEnvelopes: binary with odd header casing and percent-encoded values, and structured mode,
// are the same command.
func TestEnvelopes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	binary := func(id string) *nats.Msg {
		m := nats.NewMsg(e.subjects.Command("storage.pbs.create"))
		m.Header.Set("CE-SpecVersion", "1.0")
		m.Header.Set("CE-ID", id)
		m.Header.Set("Ce-Source", "/test/envelope")
		m.Header.Set("ce-TYPE", "proxbus.storage.pbs.create")
		m.Header.Set("cE-EndpointId", "1")
		m.Header.Set("ce-actor", "Jos%C3%A9%20Admin")
		m.Header.Set("Content-Type", "application/json")
		m.Header.Set("Nats-Msg-Id", id)
		m.Data = []byte(pbs("pbs-bin"))
		return m
	}
	structured := func(id string) *nats.Msg {
		m := nats.NewMsg(e.subjects.Command("storage.pbs.create"))
		m.Header.Set("Content-Type", "application/cloudevents+json; charset=utf-8")
		m.Header.Set("Nats-Msg-Id", id)
		var data any
		_ = json.Unmarshal([]byte(pbs("pbs-struct")), &data)
		m.Data, _ = json.Marshal(map[string]any{
			"specversion": "1.0", "id": id, "source": "/test/envelope", "type": "proxbus.storage.pbs.create",
			"endpointid": 1, "actor": "structured-actor", "datacontenttype": "application/json", "data": data,
		})
		return m
	}
	cases := []struct {
		name      string
		msg       *nats.Msg
		id        string
		wantActor string
	}{
		{"binary, odd casing, percent-encoded actor", binary("env-bin"), "env-bin", "- actor: José Admin"},
		{"structured", structured("env-struct"), "env-struct", "- actor: structured-actor"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.publishMsg(tc.msg)
			res := e.resultFor("/test/envelope", tc.id)
			if res.Status != 201 {
				t.Fatalf("status %d %s %v", res.Status, res.Reason, res.Fields)
			}
			found := false
			for _, je := range e.netbox.JournalEntries() {
				if strings.Contains(je.Comments, "command_id: "+tc.id) {
					found = strings.Contains(je.Comments, tc.wantActor)
				}
			}
			if !found {
				t.Errorf("journal lacks %q", tc.wantActor)
			}
		})
	}
}

// TestCanaryNeverLeaks sends the canary password through every path (created, invalid body,
// poison, upstream echo, replay, journal failure; a PBS token rotation, also echoed, and a
// container's root password) and scans every output channel for it:
// results, steps, journal events, dead letters, logs, journal comments, Redis, and the web
// console's pages and live streams.
func TestCanaryNeverLeaks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var ui string
	e.start(withConsole(t, &ui))
	keyed := e.command(pbs("pbs-canary"))
	keyed.IdempotencyKey = "canary"
	e.send(keyed)
	replay := e.command(pbs("pbs-canary"))
	replay.IdempotencyKey = "canary"
	e.send(replay)
	bad := e.command(pbs("pbs-canary-bad", "port", `"`+canary+`"`, "extra_token", `"`+canary+`"`))
	e.send(bad)
	e.pve.FailNext("POST", "/storage", 1, 500, "storage create failed: password="+canary)
	echo := e.command(pbs("pbs-canary-echo"))
	e.send(echo)
	e.netbox.FailPatches(3, 503)
	journalFails := e.command(pbs("pbs-canary-jf"))
	e.send(journalFails)
	// the other verbs with a secret: a token rotation (also echoed by Proxmox) and a container's root password
	rotate := withVerb(e.command(`{"storage":"pbs-canary","password":"`+canary+`"}`), "storage.pbs.update")
	e.send(rotate)
	e.pve.FailNext("PUT", "/storage/pbs-canary", 1, 500, "update storage failed: password="+canary)
	rotateEcho := withVerb(e.command(`{"storage":"pbs-canary","password":"`+canary+`"}`), "storage.pbs.update")
	e.send(rotateEcho)
	ct := withVerb(e.command(`{"new_vmid":350,"hostname":"ct-canary","target_node":"pve1","ostemplate":"local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",`+
		`"storage":"local-lvm","rootfs_gb":2,"password":"`+canary+`","net":[{"index":0,"bridge":"vmbr0","ip":"dhcp"}]}`), "ct.provision")
	if res := e.send(ct); res.Status != 201 {
		t.Errorf("ct.provision: %d %s %s (%s)", res.Status, res.Result, res.Reason, res.Detail)
	}
	poison := mustEncode(t, e, e.command(`{}`))
	poison.Header.Set("ce-id", "canary-poison")
	poison.Header.Set("Nats-Msg-Id", "canary-poison")
	poison.Header.Set("ce-token", canary)
	poison.Data = []byte(`{"password":"` + canary + `","storage":`)
	e.publishMsg(poison)
	e.resultFor(keyed.Source, "canary-poison")
	eventually(t, 10*time.Second, "the poison dead letter", func() bool {
		return len(e.streamMessages(e.subjects.DLQStream(), "")) == 1
	})

	channels := map[string]string{"logs": e.logs.String(), "redis": e.redisDump()}
	var evts, dlq strings.Builder
	for _, m := range e.streamMessages(e.subjects.EventsStream(), "") {
		evts.Write(m.Data)
		for k, v := range m.Header {
			evts.WriteString(k + strings.Join(v, ","))
		}
	}
	for _, m := range e.streamMessages(e.subjects.DLQStream(), "") {
		dlq.Write(m.Data)
		for k, v := range m.Header {
			dlq.WriteString(k + strings.Join(v, ","))
		}
	}
	channels["events"], channels["dlq"] = evts.String(), dlq.String()
	var comments strings.Builder
	for _, je := range e.netbox.JournalEntries() {
		comments.WriteString(je.Comments)
	}
	channels["journal"] = comments.String()
	var letters []string
	for _, m := range e.streamMessages(e.subjects.DLQStream(), "") {
		letters = append(letters, strconv.FormatUint(m.Sequence, 10))
	}
	channels["console"] = consoleScan(t, ui, []string{keyed.ID, replay.ID, bad.ID, echo.ID, journalFails.ID, rotate.ID, rotateEcho.ID, ct.ID,
		"canary-poison"}, letters)
	for name, text := range channels {
		if text == "" && name != "redis" {
			t.Errorf("channel %s is empty: the scan would prove nothing", name)
		}
		if strings.Contains(text, canary) {
			i := strings.Index(text, canary)
			t.Errorf("canary found in %s: …%s…", name, text[max(0, i-120):min(len(text), i+40)])
		}
	}
	if !strings.Contains(channels["redis"], e.redis.Prefix) {
		t.Error("redis scan found no keys: it would prove nothing")
	}
}

// withVerb makes cmd a command of verb.
func withVerb(cmd events.Command, verb string) events.Command {
	cmd.Verb, cmd.Type = verb, events.TypePrefix+verb
	return cmd
}
