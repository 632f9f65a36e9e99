package main

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/embedded"
	"github.com/proxbus/proxbus/internal/testenv"
)

// natsWithStreams starts NATS with the proxbus streams and no replica: commands stay queued.
func natsWithStreams(t *testing.T, opts embedded.NATSOptions) *testenv.NATS {
	t.Helper()
	n := testenv.StartNATSWith(t, opts)
	if err := consumer.Provision(context.Background(), n.JS, consumer.Config{Subjects: events.NewSubjects("")}); err != nil {
		t.Fatalf("provision: %v", err)
	}
	return n
}

// storedCommands decodes every command the commands stream holds.
func storedCommands(t *testing.T, n *testenv.NATS) []events.Command {
	t.Helper()
	ctx := context.Background()
	subjects := events.NewSubjects("")
	s, err := n.JS.Stream(ctx, subjects.CommandsStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []events.Command
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		c, err := events.Decode(m.Subject, m.Header, m.Data, subjects)
		if err != nil {
			t.Fatalf("stored command %d: %v", seq, err)
		}
		cmds = append(cmds, c)
	}
	return cmds
}

// TestSendDataFromStdinAndExpires pins --data @- (the data is read from stdin) and --expires
// (the expires attribute, from a duration or an RFC 3339 time), on the published command.
func TestSendDataFromStdinAndExpires(t *testing.T) {
	t.Parallel()
	n := natsWithStreams(t, embedded.NATSOptions{})
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	before := time.Now()
	for _, tc := range []struct{ id, expires string }{{"stdin-1", "10m"}, {"stdin-2", at.Format(time.RFC3339)}, {"stdin-3", ""}} {
		args := []string{"vm.start", "--endpoint", "1", "--data", "@-", "--id", tc.id, "--no-wait", "--nats-url", n.URL}
		if tc.expires != "" {
			args = append(args, "--expires", tc.expires)
		}
		if code, out, errOut := sendCLI(context.Background(), `{"vm": "web-01"}`, args...); code != 0 {
			t.Fatalf("%s: code %d\n%s\n%s", tc.id, code, out, errOut)
		}
	}
	after := time.Now()
	cmds := storedCommands(t, n)
	if len(cmds) != 3 {
		t.Fatalf("%d commands stored, want 3", len(cmds))
	}
	for _, c := range cmds {
		if string(c.Data) != `{"vm": "web-01"}` {
			t.Errorf("%s: data %s, want stdin's", c.ID, c.Data)
		}
	}
	if e := cmds[0].Expires; e.Before(before.Add(10*time.Minute).Truncate(time.Second)) || e.After(after.Add(10*time.Minute)) {
		t.Errorf("--expires 10m: expires %v, want 10 minutes after the send", e)
	}
	if !cmds[1].Expires.Equal(at) {
		t.Errorf("--expires %s: expires %v", at.Format(time.RFC3339), cmds[1].Expires)
	}
	if !cmds[2].Expires.IsZero() {
		t.Errorf("no --expires: expires %v, want none", cmds[2].Expires)
	}
}

// TestSendWithoutStreams pins a NATS without the proxbus streams: no "sent" line (nothing was
// acknowledged), exit 1, and the message names the NATS it used and says to run
// `proxbus streams apply` there; with and without --no-wait.
func TestSendWithoutStreams(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	for _, extra := range [][]string{nil, {"--no-wait"}} {
		args := append([]string{"vm.start", "--endpoint", "1", "--data", `{"vm":100}`, "--nats-url", n.URL}, extra...)
		code, out, errOut := sendCLI(context.Background(), "", args...)
		if code != 1 || out != "" || strings.Contains(errOut, "sent ") {
			t.Errorf("%v: code %d, stdout %q, stderr %q; want exit 1 and no sent line", extra, code, out, errOut)
		}
		if !strings.Contains(errOut, "`proxbus streams apply --nats-url "+n.URL+"`") || !strings.Contains(errOut, "on NATS at "+n.URL) ||
			!strings.Contains(errOut, "nothing was sent") {
			t.Errorf("%v: stderr does not say to run proxbus streams apply: %s", extra, errOut)
		}
	}
}

// TestSendTooLarge pins a command over the NATS server's max_payload or the commands
// stream's max_msg_size: the limit and the size are named, nothing is stored.
func TestSendTooLarge(t *testing.T) {
	t.Parallel()
	data := `{"vm":100,"snapshot":"s1","description":"` + strings.Repeat("d", 5000) + `"}`
	cases := []struct {
		name       string
		maxPayload int32
		maxMsgSize int32
		want       string
	}{
		{"max_payload", 4096, 0, "over the NATS server's max_payload of 4096 bytes"},
		{"max_msg_size", 0, 2048, "over the PROXBUS_COMMANDS stream's max_msg_size of 2048 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := natsWithStreams(t, embedded.NATSOptions{MaxPayload: tc.maxPayload})
			if tc.maxMsgSize > 0 {
				cfg := consumer.StreamConfigs(consumer.Config{Subjects: events.NewSubjects("")})[0]
				cfg.MaxMsgSize = tc.maxMsgSize
				if _, err := n.JS.UpdateStream(context.Background(), cfg); err != nil {
					t.Fatal(err)
				}
			}
			code, _, errOut := sendCLI(context.Background(), "", "vm.snapshot.create", "--endpoint", "1", "--data", data, "--nats-url", n.URL)
			if code != 1 || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "the command is ") || strings.Contains(errOut, "sent ") {
				t.Errorf("code %d, stderr %s; want %q", code, errOut, tc.want)
			}
			if cmds := storedCommands(t, n); len(cmds) != 0 {
				t.Errorf("%d commands stored", len(cmds))
			}
		})
	}
}

// TestSendInterrupted pins Ctrl-C while send follows a command no replica has taken: "sent"
// came only once the command was stored; then stderr says it is still queued, prints the
// cancel and follow commands (with --source, not the default here), and send exits 130.
func TestSendInterrupted(t *testing.T) {
	t.Parallel()
	n := natsWithStreams(t, embedded.NATSOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errOut := newLineWriter()
	done := make(chan int, 1)
	go func() {
		done <- cmdSend(ctx, []string{"vm.start", "--endpoint", "1", "--data", `{"vm":100}`, "--id", "int-1",
			"--source", "/my/tool", "--nats-url", n.URL}, strings.NewReader(""), &strings.Builder{}, errOut)
	}()
	if l := errOut.next(t); !strings.HasPrefix(l, "sent vm.start id=int-1") {
		t.Fatalf("first line %q, want the sent line", l)
	}
	if cmds := storedCommands(t, n); len(cmds) != 1 || cmds[0].ID != "int-1" {
		t.Fatalf("sent printed before the command was stored: %v", cmds)
	}
	cancel() // as SIGINT cancels main's context
	if code := <-done; code != exitInterrupted {
		t.Errorf("exit %d, want 130", code)
	}
	var lines []string
	for len(lines) < 3 {
		lines = append(lines, errOut.next(t))
	}
	want := []string{
		"proxbus send: interrupted; command int-1 is still queued: it runs when a replica takes it",
		"  cancel it:  proxbus cancel int-1 --source /my/tool",
		"  follow it:  proxbus events --id int-1 --source /my/tool",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("stderr:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

// TestSendInterruptedRunning pins the running case of Ctrl-C: once a step was seen, the
// command is said to be running; the default source adds no --source.
func TestSendInterruptedRunning(t *testing.T) {
	t.Parallel()
	n := natsWithStreams(t, embedded.NATSOptions{})
	subjects := events.NewSubjects("")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errOut := newLineWriter()
	done := make(chan int, 1)
	go func() {
		done <- cmdSend(ctx, []string{"vm.start", "--endpoint", "1", "--data", `{"vm":100}`, "--id", "int-2", "--nats-url", n.URL},
			strings.NewReader(""), &strings.Builder{}, errOut)
	}()
	if l := errOut.next(t); !strings.HasPrefix(l, "sent vm.start id=int-2") {
		t.Fatalf("first line %q, want the sent line", l)
	}
	cmd := events.Command{ID: "int-2", Source: defaultSource, Verb: "vm.start"}
	publishEvent(t, n.JS, subjects, cmd, events.Step{Seq: 1, Step: "start_vm", Status: events.StepRunning})
	if l := errOut.next(t); !strings.Contains(l, "step 1 start_vm") {
		t.Fatalf("line %q, want the step", l)
	}
	cancel()
	if code := <-done; code != exitInterrupted {
		t.Errorf("exit %d, want 130", code)
	}
	for _, want := range []string{
		"proxbus send: interrupted; command int-2 is running on a replica and goes on without this command",
		"  cancel it:  proxbus cancel int-2",
		"  follow it:  proxbus events --id int-2",
	} {
		if l := errOut.next(t); l != want {
			t.Errorf("line %q, want %q", l, want)
		}
	}
}

// TestSendInterruptedAwaitingApproval pins Ctrl-C on a command whose newest step waits for
// an approval: it is said to await approval (not to run), and the way out is reject.
func TestSendInterruptedAwaitingApproval(t *testing.T) {
	t.Parallel()
	n := natsWithStreams(t, embedded.NATSOptions{})
	subjects := events.NewSubjects("")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errOut := newLineWriter()
	done := make(chan int, 1)
	go func() {
		done <- cmdSend(ctx, []string{"vm.start", "--endpoint", "1", "--data", `{"vm":100}`, "--id", "int-3", "--nats-url", n.URL},
			strings.NewReader(""), &strings.Builder{}, errOut)
	}()
	if l := errOut.next(t); !strings.HasPrefix(l, "sent vm.start id=int-3") {
		t.Fatalf("first line %q, want the sent line", l)
	}
	cmd := events.Command{ID: "int-3", Source: defaultSource, Verb: "vm.start"}
	publishEvent(t, n.JS, subjects, cmd, events.Step{Seq: 1, Step: "approval", Status: events.StepWaiting, Detail: "awaiting approval"})
	if l := errOut.next(t); !strings.Contains(l, "approval") {
		t.Fatalf("line %q, want the approval step", l)
	}
	cancel()
	if code := <-done; code != exitInterrupted {
		t.Errorf("exit %d, want 130", code)
	}
	for _, want := range []string{
		"proxbus send: interrupted; command int-3 is awaiting approval: it runs once another person approves it, and is answered 403 if rejected",
		"  reject it:  proxbus reject int-3 --actor NAME",
		"  follow it:  proxbus events --id int-3",
	} {
		if l := errOut.next(t); l != want {
			t.Errorf("line %q, want %q", l, want)
		}
	}
}

func publishEvent(t *testing.T, js jetstream.JetStream, subjects events.Subjects, cmd events.Command, p events.Payload) {
	t.Helper()
	_, msg, err := events.NewEmitter(subjects, "test").Event(events.OriginOf(cmd), p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
}

// TestSendResentShowsNoOldSteps pins re-sending a finished command's id against a serving
// proxbus: none of its old steps are shown again, only the replayed result. The duplicate
// windows are short so that the command is stored again and its replayed result, whose event
// id is the first result's, is stored too.
func TestSendResentShowsNoOldSteps(t *testing.T) {
	t.Parallel()
	const window = 500 * time.Millisecond
	env := devEnvWith(t, func(cfg *app.Config) { cfg.Consumer.DuplicateWindow = window })
	args := []string{"send", "storage.pbs.create", "--endpoint", "1", "--data", pbsJSON("resend1"), "--id", "resend-1", "--nats-url", env.NATSURL}
	code, out, errOut := runCLI(t, args...)
	if code != 0 || !stepLine.MatchString(errOut) {
		t.Fatalf("first send: code %d\n%s\n%s", code, out, errOut)
	}
	// Let both duplicate windows (and the client's clock margin) pass.
	time.Sleep(window + 2*time.Second)
	code, out, errOut = runCLI(t, args...)
	var res events.Result
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || !res.Replayed || res.Status != 201 {
		t.Fatalf("second send: code %d\n%s\n%s", code, out, errOut)
	}
	if strings.Contains(errOut, "step ") || !strings.Contains(errOut, "result 201 created replayed") {
		t.Errorf("second send shows old steps, or not the replayed result:\n%s", errOut)
	}
	if strings.Contains(errOut, "already has a result") || strings.Contains(errOut, "not queued again") {
		t.Errorf("second send was not a fresh publish:\n%s", errOut)
	}
}

// devEnvWith is devEnv with the serve configuration changed by edit before serving.
func devEnvWith(t *testing.T, edit func(*app.Config)) *app.DevEnv {
	t.Helper()
	r := testenv.StartRedis(t)
	env, err := app.StartDev(app.DevOptions{RedisURL: r.URL, NATSPort: -1})
	if err != nil {
		t.Fatalf("dev env: %v", err)
	}
	t.Cleanup(env.Close)
	cfg := env.ServeConfig()
	cfg.Store.Prefix = r.Prefix
	edit(&cfg)
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
	return env
}
