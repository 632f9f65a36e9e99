package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/handlers"
	"github.com/proxbus/proxbus/internal/testenv"
)

// TestCompletionScripts pins `proxbus completion bash|zsh|fish`: each script names every
// subcommand, every verb of send, the dlq/journal/streams/sim sub-subcommands and the flags,
// and a wrong shell is a usage error.
func TestCompletionScripts(t *testing.T) {
	t.Parallel()
	verbs := handlers.NewRegistry(handlers.Builtin()...).Names()
	common := []string{"serve", "dev", "send", "events", "dlq", "journal", "streams", "sim", "completion", "version",
		"list", "show", "replay", "purge", "pending", "apply", "pve", "netbox"}
	cases := []struct {
		shell string
		want  []string
	}{
		{"bash", []string{"complete -F _proxbus proxbus", "--idempotency-key", "--stream-replicas", "--output", "--nats-url", "--redis-url", "--no-wait"}},
		{"zsh", []string{"#compdef proxbus", "compdef _proxbus proxbus", "--idempotency-key", "--stream-replicas", "_files"}},
		{"fish", []string{"complete -c proxbus -n __fish_use_subcommand -a send", "-l idempotency-key", "-l stream-replicas", "-l output -x -a 'text json'", "-l endpoints-file -r -F"}},
	}
	for _, tc := range cases {
		t.Run(tc.shell, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := runCLI(t, "completion", tc.shell)
			if code != 0 {
				t.Fatalf("code %d: %s", code, errOut)
			}
			for _, w := range append(append(tc.want, common...), verbs...) {
				if !strings.Contains(out, w) {
					t.Errorf("%s script lacks %q", tc.shell, w)
				}
			}
			if path, err := exec.LookPath(tc.shell); err == nil && tc.shell != "fish" {
				// -n: parse only (fish has no such flag for scripts with `complete`).
				cmd := exec.Command(path, "-n")
				cmd.Stdin = strings.NewReader(out)
				if b, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("%s -n: %v\n%s", tc.shell, err, b)
				}
			}
		})
	}
	for _, args := range [][]string{{"completion"}, {"completion", "tcsh"}} {
		if code, _, errOut := runCLI(t, args...); code != 2 || !strings.Contains(errOut, "bash|zsh|fish") {
			t.Errorf("%v: code %d %q, want a usage error", args, code, errOut)
		}
	}
}

// TestBashCompletionCompletes runs the bash script in bash: the completions offered at each
// position are the right subcommands, verbs, sub-subcommands, flags and flag values.
func TestBashCompletionCompletes(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	_, script, _ := runCLI(t, "completion", "bash")
	file := filepath.Join(t.TempDir(), "proxbus.bash")
	if err := os.WriteFile(file, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		words []string // the command line; the last word is the one being completed
		want  []string
		not   []string
	}{
		{"subcommands", []string{"proxbus", ""}, []string{"serve", "send", "dlq", "completion", "version"}, nil},
		{"a prefix", []string{"proxbus", "st"}, []string{"streams"}, []string{"serve"}},
		{"send's verbs", []string{"proxbus", "send", "vm.s"}, []string{"vm.start", "vm.stop", "vm.snapshot.create", "vm.suspend"}, []string{"--nats-url"}},
		{"send's flags after the verb", []string{"proxbus", "send", "vm.start", "--"}, []string{"--endpoint", "--data", "--idempotency-key", "--output"}, []string{"vm.start"}},
		{"dlq subcommands", []string{"proxbus", "dlq", ""}, []string{"list", "show", "replay"}, nil},
		{"dlq list flags", []string{"proxbus", "dlq", "list", "--l"}, []string{"--limit"}, nil},
		{"sim simulators", []string{"proxbus", "sim", ""}, []string{"pve", "netbox"}, nil},
		{"streams apply flags", []string{"proxbus", "streams", "apply", "--stream"}, []string{"--stream-replicas"}, nil},
		{"--output values", []string{"proxbus", "events", "--output", ""}, []string{"text", "json"}, nil},
		{"--log-level values", []string{"proxbus", "serve", "--log-level", "w"}, []string{"warn"}, []string{"info"}},
		{"a free value", []string{"proxbus", "send", "--endpoint", ""}, nil, []string{"--data"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var quoted []string
			for _, w := range tc.words {
				quoted = append(quoted, "'"+w+"'")
			}
			prog := "source " + file + "\nCOMP_WORDS=(" + strings.Join(quoted, " ") + ")\nCOMP_CWORD=" +
				strconv.Itoa(len(tc.words)-1) + "\n_proxbus\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
			out, err := exec.Command(bash, "-c", prog).CombinedOutput()
			if err != nil {
				t.Fatalf("bash: %v\n%s", err, out)
			}
			got := strings.Fields(string(out))
			for _, w := range tc.want {
				if !contains(got, w) {
					t.Errorf("completions %v lack %q", got, w)
				}
			}
			for _, w := range tc.not {
				if contains(got, w) {
					t.Errorf("completions %v offer %q", got, w)
				}
			}
			if tc.want == nil && len(got) != 0 {
				t.Errorf("completions %v, want none", got)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestProgressPlain pins send's progress off a terminal: one line per ended step with its
// status and the time from its start, nothing for a start, no control characters at all
// (even when a detail carries some), and a "-" duration for a step whose start was not seen.
func TestProgressPlain(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var buf bytes.Buffer
	p := newProgress(&buf, false)
	p.Println("sent storage.pbs.create id=x")
	p.Step(events.Step{Seq: 1, Step: "create_storage", Status: events.StepStarted, At: t0})
	if strings.Contains(buf.String(), "create_storage") {
		t.Errorf("a start printed a line: %q", buf.String())
	}
	p.Step(events.Step{Seq: 2, Step: "create_storage", Status: events.StepDone, At: t0.Add(1500 * time.Millisecond), UPID: "UPID:pve1:1"})
	p.Step(events.Step{Seq: 3, Step: "wait_task", Status: events.StepStarted, At: t0.Add(2 * time.Second)})
	p.Step(events.Step{Seq: 4, Step: "wait_task", Status: events.StepError, At: t0.Add(2*time.Second + 42*time.Millisecond), Detail: "bad\x1b[31m\rthing"})
	p.Step(events.Step{Seq: 5, Step: "journal", Status: events.StepSkipped, At: t0.Add(3 * time.Second)})
	p.Close()
	p.Close() // idempotent
	out := buf.String()
	if strings.ContainsAny(out, "\r\x1b") {
		t.Errorf("control characters in plain output: %q", out)
	}
	want := []string{
		"sent storage.pbs.create id=x",
		"  step 2 create_storage         done         1.5s  UPID:pve1:1",
		"  step 4 wait_task              error        42ms — bad[31mthing",
		"  step 5 journal                skipped         -",
	}
	if got := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("output:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestProgressSpinner pins the terminal mode: the spinner line names the running step and is
// rewritten in place (\r, erase line); a step line first erases it; Close stops the spinner
// goroutine and leaves no spinner line behind.
func TestProgressSpinner(t *testing.T) {
	t.Parallel()
	w := &testenv.Buffer{}
	p := newProgress(w, true)
	p.Step(events.Step{Seq: 1, Step: "clone_template", Status: events.StepStarted, At: time.Now()})
	p.mu.Lock()
	p.drawSpinner()
	p.mu.Unlock()
	if got := w.String(); !strings.HasPrefix(got, clearLine) || !strings.Contains(got, "clone_template") {
		t.Errorf("spinner line %q", got)
	}
	p.Step(events.Step{Seq: 2, Step: "clone_template", Status: events.StepDone, At: time.Now()})
	p.Close()
	after := w.String()
	if !strings.Contains(after, clearLine+"  step 2 clone_template") {
		t.Errorf("the step line did not erase the spinner first: %q", after)
	}
	if !strings.HasSuffix(after, "\n") && !strings.HasSuffix(after, clearLine) {
		t.Errorf("a spinner line is left after Close: %q", after)
	}
	select {
	case <-p.done:
	default:
		t.Error("the spinner goroutine is still running after Close")
	}
	if isTerminal(w) {
		t.Error("a buffer is not a terminal")
	}
}

// TestOutputModes pins --output text|json on send, events and dlq list|show against a
// running proxbus: json gives the raw documents, text human lines.
func TestOutputModes(t *testing.T) {
	t.Parallel()
	env := devEnv(t)
	url := []string{"--nats-url", env.NATSURL}

	// send: json prints the result document only; text adds progress on stderr.
	code, out, errOut := runCLI(t, append([]string{"send", "storage.pbs.create", "--endpoint", "1", "--data", pbsJSON("om1"), "--id", "om-1", "--output", "json"}, url...)...)
	var res events.Result
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Status != 201 || res.CommandID != "om-1" {
		t.Fatalf("send --output json: code %d\n%s\n%s", code, out, errOut)
	}
	if errOut != "" {
		t.Errorf("send --output json wrote to stderr: %q", errOut)
	}
	code, out, errOut = runCLI(t, append([]string{"send", "storage.pbs.create", "--endpoint", "1", "--data", pbsJSON("om2"), "--id", "om-2"}, url...)...)
	if code != 0 || !strings.Contains(out, `"status": 201`) || !stepLine.MatchString(errOut) || !strings.Contains(errOut, "result 201 created") {
		t.Fatalf("send --output text: code %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = runCLI(t, append([]string{"send", "storage.pbs.create", "--endpoint", "1", "--data", pbsJSON("om3"), "--id", "om-3", "--no-wait", "--output", "json"}, url...)...)
	var sent map[string]string
	if code != 0 || json.Unmarshal([]byte(out), &sent) != nil || sent["command_id"] != "om-3" || sent["follow"] != "proxbus.evt.om-3.>" {
		t.Errorf("send --no-wait --output json: code %d %q", code, out)
	}

	// events: text lines name the ref, the kind and what happened.
	lines := tailEvents(t, env.NATSURL, "om-1", "text")
	if !strings.Contains(lines, "om-1 step ") || !strings.Contains(lines, "om-1 result storage.pbs.create 201 created") {
		t.Errorf("events --output text:\n%s", lines)
	}
	lines = tailEvents(t, env.NATSURL, "om-1", "json")
	for _, l := range strings.Split(strings.TrimSpace(lines), "\n") {
		var ev struct {
			Subject string
			Data    map[string]any
		}
		if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.Data["command_id"] != "om-1" {
			t.Errorf("events --output json line %q: %v", l, err)
		}
	}

	// dlq list|show: one JSON line per dead letter; show's data stays JSON when it is JSON.
	nc, err := nats.Connect(env.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// An unknown verb with JSON data: a poison message whose dead letter keeps JSON data.
	msg := nats.NewMsg("proxbus.cmd.no.such.verb")
	msg.Header.Set("ce-specversion", "1.0")
	msg.Header.Set("ce-id", "om-poison")
	msg.Header.Set("ce-source", "/test")
	msg.Header.Set("ce-type", "proxbus.no.such.verb")
	msg.Data = []byte(`{"vm":100}`)
	msg.Header.Set("Nats-Msg-Id", "om-poison")
	if err := nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	var list string
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) && !strings.Contains(list, `"seq"`) {
		_, list, _ = runCLI(t, append([]string{"dlq", "list", "--output", "json"}, url...)...)
		time.Sleep(50 * time.Millisecond)
	}
	var dl struct {
		Seq             uint64 `json:"seq"`
		Reason          string `json:"reason"`
		OriginalSubject string `json:"original_subject"`
	}
	first := strings.Split(strings.TrimSpace(list), "\n")[0]
	if err := json.Unmarshal([]byte(first), &dl); err != nil || dl.Seq == 0 || dl.OriginalSubject != "proxbus.cmd.no.such.verb" || dl.Reason != "unknown_verb" {
		t.Fatalf("dlq list --output json: %q (%v)", list, err)
	}
	code, show, _ := runCLI(t, append([]string{"dlq", "show", strconv.FormatUint(dl.Seq, 10), "--output", "json"}, url...)...)
	var doc struct {
		Seq    uint64
		Reason string
		Data   json.RawMessage
	}
	if code != 0 || json.Unmarshal([]byte(show), &doc) != nil || doc.Seq != dl.Seq || doc.Reason != dl.Reason || string(doc.Data) != `{"vm":100}` {
		t.Errorf("dlq show --output json: code %d %q", code, show)
	}
}

// tailEvents runs `events --id id --output format` until the command's result line, and
// returns everything it printed.
func tailEvents(t *testing.T, natsURL, id, format string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := newLineWriter()
	done := make(chan error, 1)
	go func() {
		done <- cmdEvents(ctx, []string{"--id", id, "--nats-url", natsURL, "--output", format}, out, io.Discard)
	}()
	var all []string
	for {
		l := out.next(t)
		all = append(all, l)
		if strings.Contains(l, "result") {
			break
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("events returned %v", err)
	}
	return strings.Join(all, "\n")
}

// TestStreamsApplyReplicas pins `proxbus streams apply --stream-replicas 3` on a
// three-server JetStream cluster: every stream is created with three replicas.
func TestStreamsApplyReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a JetStream cluster")
	}
	t.Parallel()
	cl := testenv.StartCluster(t, 3)
	code, out, errOut := runCLI(t, "streams", "apply", "--stream-replicas", "3", "--nats-url", cl.URL)
	if code != 0 || !strings.Contains(out, "(replicas 3)") {
		t.Fatalf("code %d\n%s\n%s", code, out, errOut)
	}
	_, js := cl.Connect()
	for _, name := range []string{"PROXBUS_COMMANDS", "PROXBUS_EVENTS", "PROXBUS_DLQ"} {
		s, err := js.Stream(context.Background(), name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		info, err := s.Info(context.Background())
		if err != nil || info.Config.Replicas != 3 {
			t.Errorf("stream %s: replicas %v (%v), want 3", name, info, err)
		}
	}
}
