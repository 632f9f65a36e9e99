package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/testenv"
	"github.com/proxbus/proxbus/store"
)

// stepLine is a step's line in send's text output: seq, name, status and duration.
var stepLine = regexp.MustCompile(`(?m)^  step \d+ create_storage +done +\d+(ms|\.\ds)`)

const fp = "AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89"

func pbsJSON(storage string) string {
	return fmt.Sprintf(`{"storage":%q,"server":"pbs.lan","datastore":"store1","username":"backup@pbs!proxbus","password":"cli-secret","fingerprint":%q}`, storage, fp)
}

// devEnv starts the dev infrastructure and a serving proxbus for CLI tests.
func devEnv(t *testing.T) *app.DevEnv {
	t.Helper()
	env, r := devInfra(t)
	serveDev(t, env, r.Prefix)
	return env
}

// devInfra starts the dev infrastructure (NATS, simulators) on a test Redis, without a
// processor.
func devInfra(t *testing.T) (*app.DevEnv, *testenv.Redis) {
	t.Helper()
	r := testenv.StartRedis(t)
	env, err := app.StartDev(app.DevOptions{RedisURL: r.URL, NATSPort: -1})
	if err != nil {
		t.Fatalf("dev env: %v", err)
	}
	t.Cleanup(env.Close)
	return env, r
}

// serveDev runs a proxbus processor on env, with Redis key prefix, until the test ends;
// tunes change its configuration first.
func serveDev(t *testing.T, env *app.DevEnv, prefix string, tunes ...func(*app.Config)) {
	t.Helper()
	cfg := env.ServeConfig()
	cfg.Store.Prefix = prefix
	for _, tune := range tunes {
		tune(&cfg)
	}
	ready := make(chan struct{})
	var once sync.Once
	cfg.OnReady = func() { once.Do(func() { close(ready) }) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Serve(ctx, cfg) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("serve not ready")
	}
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestVersion pins `proxbus version` in both output modes, and unknown commands.
func TestVersion(t *testing.T) {
	t.Parallel()
	code, out, _ := runCLI(t, "version")
	if code != 0 || !strings.HasPrefix(out, "proxbus ") {
		t.Fatalf("code %d out %q", code, out)
	}
	code, out, _ = runCLI(t, "version", "--output", "json")
	var v struct{ Version, Go string }
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || v.Version == "" || !strings.HasPrefix(v.Go, "go") {
		t.Errorf("version --output json: code %d %q (%v)", code, out, err)
	}
	if code, _, errOut := runCLI(t, "version", "--output", "yaml"); code != 2 || !strings.Contains(errOut, "--output must be text or json") {
		t.Errorf("bad --output: code %d %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "bogus"); code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Errorf("unknown command: code %d %q", code, errOut)
	}
}

// TestSend pins `proxbus send`: binary-mode publish, steps shown live on stderr, the result
// JSON on stdout, exit 0 below 400, 1 otherwise, 2 for usage errors.
func TestSend(t *testing.T) {
	t.Parallel()
	env := devEnv(t)
	cases := []struct {
		name      string
		args      []string
		wantCode  int
		wantOut   string
		wantSteps bool
	}{
		{"created", []string{"send", "storage.pbs.create", "--endpoint", "1", "--data", pbsJSON("cli1")}, 0, `"status": 201`, true},
		{"refused by the gate", []string{"send", "storage.pbs.create", "--endpoint", "2", "--data", pbsJSON("cli2")}, 1, `"reason": "endpoint_writes_disabled"`, false},
		{"data not JSON", []string{"send", "storage.pbs.create", "--data", "{nope"}, 2, "", false},
		{"no verb", []string{"send"}, 2, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append(tc.args, "--nats-url", env.NATSURL)
			code, out, errOut := runCLI(t, args...)
			if code != tc.wantCode || !strings.Contains(out, tc.wantOut) {
				t.Fatalf("code %d (want %d)\nstdout %s\nstderr %s", code, tc.wantCode, out, errOut)
			}
			if tc.wantSteps && !stepLine.MatchString(errOut) {
				t.Errorf("no step line with its duration: %s", errOut)
			}
			if strings.ContainsAny(errOut, "\r\x1b") {
				t.Errorf("control characters on a non-terminal: %q", errOut)
			}
			if strings.Contains(out+errOut, "cli-secret") {
				t.Error("the password was printed")
			}
		})
	}
	var res events.Result
	_, out, _ := runCLI(t, "send", "storage.pbs.create", "--endpoint", "1", "--data", pbsJSON("cli3"), "--id", "fixed-id", "--nats-url", env.NATSURL)
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.CommandID != "fixed-id" || res.CommandSource != "urn:proxbus:cli" {
		t.Errorf("result %s: %v", out, err)
	}
}

// TestDLQCommands pins `proxbus dlq list|show|replay` on a poison message.
func TestDLQCommands(t *testing.T) {
	t.Parallel()
	env := devEnv(t)
	nc, err := nats.Connect(env.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	msg := nats.NewMsg("proxbus.cmd.storage.pbs.create")
	msg.Header.Set("ce-specversion", "1.0")
	msg.Header.Set("ce-id", "dlq-cli")
	msg.Header.Set("ce-source", "/test")
	msg.Header.Set("ce-type", "proxbus.storage.pbs.create")
	msg.Header.Set("Nats-Msg-Id", "dlq-cli")
	msg.Data = []byte(`{"password":"dlq-secret",`)
	if err := nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	var list string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		_, list, _ = runCLI(t, "dlq", "list", "--nats-url", env.NATSURL)
		if strings.Contains(list, "invalid_command") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(list, "invalid_command") || !strings.Contains(list, "proxbus.cmd.storage.pbs.create") {
		t.Fatalf("dlq list: %s", list)
	}
	seq := strings.Fields(strings.Split(strings.TrimSpace(list), "\n")[1])[0]
	code, show, _ := runCLI(t, "dlq", "show", seq, "--nats-url", env.NATSURL)
	if code != 0 || !strings.Contains(show, "reason: invalid_command") || strings.Contains(show, "dlq-secret") {
		t.Errorf("dlq show (code %d): %s", code, show)
	}
	code, replay, errOut := runCLI(t, "dlq", "replay", seq, "--nats-url", env.NATSURL)
	newID := "dlq-cli-replay-" + seq
	if code != 0 || !strings.Contains(replay, "replayed dead letter "+seq+" as command "+newID) || !strings.Contains(replay, "proxbus events --id "+newID) {
		t.Errorf("dlq replay (code %d): %s %s", code, replay, errOut)
	}
	// The letter is marked replayed; the replay (still poison) becomes a second letter.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, list, _ = runCLI(t, "dlq", "list", "--nats-url", env.NATSURL); strings.Count(list, "invalid_command") == 2 {
			break
		}
	}
	if !strings.Contains(list, "REPLAYED") || !regexp.MustCompile(`(?m)^`+seq+` .* `+newID+`$`).MatchString(list) || strings.Count(list, "invalid_command") != 2 {
		t.Errorf("dlq list after replay:\n%s", list)
	}
	if code, show, _ := runCLI(t, "dlq", "show", seq, "--nats-url", env.NATSURL); code != 0 || !strings.Contains(show, "as command "+newID) {
		t.Errorf("dlq show after replay (code %d): %s", code, show)
	}

	// purge: refused without --yes (no --before, or stdin not a terminal), a bad --before
	// names the flag, a prompt not answered yes removes nothing, then --yes removes both.
	dlqStdinTerminal = func() bool { return true }
	dlqStdin = strings.NewReader("n\n")
	refusals := []struct {
		args []string
		want string
	}{
		{[]string{"dlq", "purge"}, "add --yes"},
		{[]string{"dlq", "purge", "--before", "yesterday", "--yes"}, "--before must be an RFC 3339 time"},
		{[]string{"dlq", "purge", "--before", "1h"}, "not confirmed"},
	}
	for _, r := range refusals {
		if code, _, errOut := runCLI(t, append(r.args, "--nats-url", env.NATSURL)...); code == 0 || !strings.Contains(errOut, r.want) {
			t.Errorf("%v: code %d %q, want %q", r.args, code, errOut, r.want)
		}
	}
	dlqStdinTerminal = func() bool { return false }
	if code, _, errOut := runCLI(t, "dlq", "purge", "--before", "1h", "--nats-url", env.NATSURL); code != 2 || !strings.Contains(errOut, "stdin is not a terminal") {
		t.Errorf("purge --before off a terminal without --yes: code %d %q", code, errOut)
	}
	if code, out, errOut := runCLI(t, "dlq", "purge", "--before", "1h", "--yes", "--nats-url", env.NATSURL); code != 0 || out != "purged 0 dead letters stored before "+regexp.MustCompile(`\S+$`).FindString(strings.TrimSpace(out))+"\n" {
		t.Errorf("purge --before 1h: code %d %q %q", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, "dlq", "purge", "--yes", "--output", "json", "--nats-url", env.NATSURL); code != 0 || out != `{"purged":2}`+"\n" {
		t.Errorf("purge --yes: code %d %q %q", code, out, errOut)
	}
	if _, list, _ = runCLI(t, "dlq", "list", "--nats-url", env.NATSURL); strings.Contains(list, "invalid_command") {
		t.Errorf("letters left after purge:\n%s", list)
	}
	if code, _, _ := runCLI(t, "dlq", "show", "x", "--nats-url", env.NATSURL); code != 2 {
		t.Errorf("bad seq: code %d, want 2", code)
	}
}

// TestStreamsApply pins `proxbus streams apply` on a server without the streams.
func TestStreamsApply(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	code, out, errOut := runCLI(t, "streams", "apply", "--nats-url", n.URL)
	if code != 0 {
		t.Fatalf("code %d: %s", code, errOut)
	}
	for _, name := range []string{"PROXBUS_COMMANDS", "PROXBUS_EVENTS", "PROXBUS_DLQ"} {
		if !strings.Contains(out, name) {
			t.Errorf("output lacks %s: %s", name, out)
		}
		if _, err := n.JS.Stream(context.Background(), name); err != nil {
			t.Errorf("stream %s: %v", name, err)
		}
	}
	if _, err := n.JS.Consumer(context.Background(), "PROXBUS_COMMANDS", "proxbus"); err != nil {
		t.Errorf("consumer: %v", err)
	}
}

// TestDevDemo pins `proxbus dev --demo`: it prints the service lines, the console's, and ready, plays the
// tour, and exits 0 when every outcome matched.
func TestDevDemo(t *testing.T) {
	t.Parallel()
	r := testenv.StartRedis(t)
	code, out, errOut := runCLI(t, "dev", "--demo", "--nats-port", "-1", "--redis-url", r.URL, "--log-format", "json")
	if code != 0 {
		t.Fatalf("code %d\n%s\n%s", code, out, errOut)
	}
	lines := strings.Split(out, "\n")
	for i, prefix := range []string{"nats: nats://", "redis: redis://", "pve: http", "netbox: http", "ui: http://127.0.0.1:", "ready"} {
		if i >= len(lines) || !strings.HasPrefix(lines[i], prefix) {
			t.Errorf("line %d = %q, want prefix %q", i, lines[i], prefix)
		}
	}
	if !strings.Contains(out, "every outcome matched") {
		t.Errorf("demo output: %s", out)
	}
}

// TestServeDrainsOnSIGTERM runs the real binary: SIGTERM while a Proxmox call is in flight
// still completes the command (result published) and the process exits 0.
func TestServeDrainsOnSIGTERM(t *testing.T) {
	bin := buildProxbus(t)
	t.Parallel()
	r := testenv.StartRedis(t)
	env, err := app.StartDev(app.DevOptions{RedisURL: r.URL, NATSPort: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Close)
	endpoints := filepath.Join(t.TempDir(), "endpoints.yaml")
	if err := os.WriteFile(endpoints, []byte(fmt.Sprintf("endpoints:\n  - id: 1\n    name: lab\n    urls: [%s]\n    token_id: %q\n    token_secret_env: LAB_SECRET\n", env.PVEURL, app.DemoPVETokenID)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "PROXBUS_NATS_URL="+env.NATSURL, "PROXBUS_REDIS_URL="+r.URL, "PROXBUS_REDIS_KEY_PREFIX="+r.Prefix,
		"PROXBUS_NETBOX_URL="+env.NetBoxURL, "PROXBUS_NETBOX_TOKEN="+app.DemoNetBoxToken, "PROXBUS_ENDPOINTS_FILE="+endpoints,
		"LAB_SECRET="+app.DemoPVESecret, "PROXBUS_LOG_FORMAT=json")
	logs := &testenv.Buffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	nc, js, err := app.Connect(env.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	env.PVE.SetLatency(1500 * time.Millisecond)
	subjects := events.NewSubjects("")
	c := events.Command{ID: "sigterm-1", Source: "/test", Verb: "storage.pbs.create", Type: "proxbus.storage.pbs.create",
		EndpointID: 1, HasEndpointID: true, Data: json.RawMessage(pbsJSON("sig1"))}
	// Wait for the replica to provision the streams (the events stream is created after the
	// commands stream), then publish.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := js.Stream(context.Background(), "PROXBUS_EVENTS"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("streams not provisioned: %s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	signalled := false
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := app.Send(ctx, js, subjects, c, false, func(st events.Step) {
		if st.Step == "create_storage" && st.Status == events.StepStarted && !signalled {
			signalled = true
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
	})
	if err != nil || !signalled {
		t.Fatalf("send: %v (signalled %v)\n%s", err, signalled, logs.String())
	}
	if res.Status != 201 || !res.Finalized() {
		t.Errorf("result %+v", res)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit: %v\n%s", err, logs.String())
	}
	if _, ok := env.PVE.StorageConfig("sig1"); !ok {
		t.Error("storage not created")
	}
}

// lineWriter collects written lines and signals each one, for commands that run until stopped.
type lineWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines chan string
}

func newLineWriter() *lineWriter { return &lineWriter{lines: make(chan string, 1000)} }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line) // keep the partial line
			return len(p), nil
		}
		w.lines <- strings.TrimSuffix(line, "\n")
	}
}

func (w *lineWriter) next(t *testing.T) string {
	t.Helper()
	select {
	case l := <-w.lines:
		return l
	case <-time.After(15 * time.Second):
		t.Fatal("no output line within 15s")
		return ""
	}
}

// TestSim pins `proxbus sim pve|netbox`: the base URL, then ready, then a simulator that
// answers with the demo credentials until the command is stopped.
func TestSim(t *testing.T) {
	t.Parallel()
	cases := []struct {
		which, path, auth string
	}{
		{"pve", "/api2/json/version", "PVEAPIToken=" + app.DemoPVETokenID + "=" + app.DemoPVESecret},
		{"netbox", "/api/plugins/proxbox/endpoints/proxmox/1/", "Token " + app.DemoNetBoxToken},
	}
	for _, tc := range cases {
		t.Run(tc.which, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			out := newLineWriter()
			done := make(chan error, 1)
			go func() { done <- cmdSim(ctx, []string{tc.which, "--scenario", "demo"}, out, io.Discard) }()
			base := out.next(t)
			if ready := out.next(t); ready != "ready" {
				t.Fatalf("second line %q, want ready", ready)
			}
			req, _ := http.NewRequest("GET", base+tc.path, nil)
			req.Header.Set("Authorization", tc.auth)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("GET %s: %v", base+tc.path, err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("GET %s = %d", tc.path, resp.StatusCode)
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("sim returned %v", err)
			}
		})
	}
}

// TestEvents pins `proxbus events --id --output json`: one JSON line per event of that
// command (text mode is pinned by TestOutputModes).
func TestEvents(t *testing.T) {
	t.Parallel()
	env := devEnv(t)
	if code, out, errOut := runCLI(t, "send", "storage.pbs.create", "--endpoint", "1", "--data", pbsJSON("ev1"), "--id", "ev-1", "--nats-url", env.NATSURL); code != 0 {
		t.Fatalf("send: %d %s %s", code, out, errOut)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := newLineWriter()
	done := make(chan error, 1)
	go func() {
		done <- cmdEvents(ctx, []string{"--id", "ev-1", "--nats-url", env.NATSURL, "--output", "json"}, out, io.Discard)
	}()
	var sawStep, sawResult bool
	for !sawResult {
		line := out.next(t)
		var ev struct {
			Subject string          `json:"subject"`
			Type    string          `json:"type"`
			Data    json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("line not JSON: %q", line)
		}
		sawStep = sawStep || ev.Type == "proxbus.storage.pbs.create.step"
		sawResult = ev.Type == "proxbus.storage.pbs.create.result" && ev.Subject == "proxbus.evt.ev-1.result"
	}
	if !sawStep {
		t.Error("no step event before the result")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("events returned %v", err)
	}
}

// TestJournalPending pins `proxbus journal pending`: the repairs kept in Redis, listed.
func TestJournalPending(t *testing.T) {
	t.Parallel()
	r := testenv.StartRedis(t)
	st, err := store.New(r.Client, store.Options{Prefix: r.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SaveRepair(context.Background(), store.Repair{
		Command: store.CommandKey{Source: "/test", ID: "pending-1"}, Verb: "vm.start", JournalID: 7,
		JournalURL: "http://netbox/api/extras/journal-entries/7/", Kind: "info", Comments: "- result: ok\n",
	}); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, "journal", "pending", "--redis-url", r.URL, "--redis-key-prefix", r.Prefix)
	if code != 1 || !strings.Contains(errOut, "no replica serves this store") || !strings.Contains(errOut, "nothing was done") {
		t.Fatalf("a prefix no replica announced: code %d, stderr %s", code, errOut)
	}
	announceReplica(t, r.Client, r.Prefix)
	code, out, errOut := runCLI(t, "journal", "pending", "--redis-url", r.URL, "--redis-key-prefix", r.Prefix)
	if code != 0 || !strings.Contains(out, "pending-1") || !strings.Contains(out, "journal-entries/7/") || !strings.Contains(out, "1 pending") {
		t.Fatalf("code %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "journal", "pending", "--redis-url", r.URL, "--redis-key-prefix", r.Prefix, "--output", "json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var rep store.Repair
	if code != 0 || len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &rep) != nil ||
		rep.Command.ID != "pending-1" || rep.JournalID != 7 || rep.Verb != "vm.start" {
		t.Fatalf("--output json: code %d\n%s\n%s", code, out, errOut)
	}
}

// TestSimTaskDuration pins `sim pve --task-duration`: a task started on the simulator is still
// running when read back, so a progress bar can be watched; sim netbox refuses the flag.
func TestSimTaskDuration(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	out := newLineWriter()
	done := make(chan error, 1)
	go func() { done <- cmdSim(ctx, []string{"pve", "--task-duration", "1h"}, out, io.Discard) }()
	base := out.next(t)
	if ready := out.next(t); ready != "ready" {
		t.Fatalf("second line %q, want ready", ready)
	}
	call := func(method, path string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(method, base+"/api2/json"+path, nil)
		req.Header.Set("Authorization", "PVEAPIToken="+app.DemoPVETokenID+"="+app.DemoPVESecret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %v", method, path, resp.StatusCode, err)
		}
		return body
	}
	upid, _ := call("POST", "/nodes/pve2/qemu/101/status/start")["data"].(string)
	status := call("GET", "/nodes/pve2/tasks/"+upid+"/status")["data"].(map[string]any)
	if status["status"] != "running" {
		t.Errorf("task %s: %v, want running for an hour", upid, status)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("sim returned %v", err)
	}
	if code, _, errOut := runCLI(t, "sim", "netbox", "--task-duration", "1s"); code != 2 || !strings.Contains(errOut, "--task-duration is for sim pve") {
		t.Errorf("sim netbox --task-duration: exit %d %s", code, errOut)
	}
}
