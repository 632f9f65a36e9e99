package main

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
)

// testWait bounds a wait of these tests (a safety net, not a timed assertion).
const testWait = 30 * time.Second

// TestSendAsCLIUser pins that send needs no more than the permissions of the cli user of
// deploy/nats/accounts.conf: a command is followed to its result. A lookup the user may not
// make would go unanswered until --timeout, and send would fail.
func TestSendAsCLIUser(t *testing.T) {
	cliURL, js := startAccountsServer(t)
	subjects := events.NewSubjects("")

	// A fresh command, answered once it is sent.
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	stderr := newLineWriter()
	done := make(chan int, 1)
	var stdout strings.Builder
	go func() {
		done <- cmdSend(ctx, []string{"vm.start", "--endpoint", "1", "--data", `{"vm":100}`, "--id", "perm-2", "--nats-url", cliURL("cli")},
			strings.NewReader(""), &stdout, stderr)
	}()
	if l := stderr.next(t); !strings.HasPrefix(l, "sent vm.start id=perm-2") {
		t.Fatalf("line %q, want the sent line", l)
	}
	publishEvent(t, js, subjects, events.Command{ID: "perm-2", Source: defaultSource, Verb: "vm.start"}, events.Result{Status: 200, Result: "already_running"})
	if code := <-done; code != 0 || !strings.Contains(stdout.String(), "already_running") {
		t.Errorf("fresh command: code %d\n%s", code, stdout.String())
	}
}

// startAccountsServer runs a NATS server with deploy/nats/accounts.conf and the proxbus
// streams, and returns the URL of each user (with its password) and an admin's JetStream.
func startAccountsServer(t *testing.T) (userURL func(user string) string, admin jetstream.JetStream) {
	t.Helper()
	raw, err := os.ReadFile("../../deploy/nats/accounts.conf")
	if err != nil {
		t.Fatal(err)
	}
	password := func(user string) string { return "pw-" + user }
	for _, m := range regexp.MustCompile(`(?m)^\s*password:\s*\$([A-Z0-9_]+)\s*$`).FindAllStringSubmatch(string(raw), -1) {
		t.Setenv(m[1], password(strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(m[1], "NATS_"), "_PASSWORD"))))
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "server.conf")
	if err := os.WriteFile(filepath.Join(dir, "accounts.conf"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("include accounts.conf\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("accounts.conf: %v", err)
	}
	opts.Host, opts.Port, opts.JetStream, opts.StoreDir, opts.NoLog, opts.NoSigs = "127.0.0.1", -1, true, t.TempDir(), true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start() // ended by Shutdown in the cleanup, which waits for it
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(testWait) {
		t.Fatal("server not ready")
	}
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("admin", password("admin")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := consumer.Provision(context.Background(), js, consumer.Config{Subjects: events.NewSubjects("")}); err != nil {
		t.Fatal(err)
	}
	return func(user string) string {
		u, _ := url.Parse(srv.ClientURL())
		u.User = url.UserPassword(user, password(user))
		return u.String()
	}, js
}

// TestPermissionViolationNamed pins that a NATS permissions violation ends the subcommand at
// once with a message naming the user, what it may not do and the subject, instead of a
// timeout: approve as the cli user (only approver may publish command.approve), dlq list as
// the cli user (no access to the dead-letter stream).
func TestPermissionViolationNamed(t *testing.T) {
	userURL, _ := startAccountsServer(t)
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"approve as cli", []string{"approve", "some-id", "--actor", "bob", "--timeout", "10m", "--nats-url", userURL("cli"),
			"--nats-inbox-prefix", "_INBOX_cli"}, // its own inbox: the publish is what it may not do
			[]string{`NATS user "cli" may not publish to "proxbus.cmd.command.approve"`, "accounts.conf"}},
		{"approve as cli, the approver's inbox", []string{"approve", "some-id", "--actor", "bob", "--timeout", "10m", "--nats-url", userURL("cli")},
			[]string{`NATS user "cli" may not subscribe to "_INBOX_approver.`, "accounts.conf"}},
		{"dlq list as producer", []string{"dlq", "list", "--nats-url", userURL("producer")},
			[]string{`NATS user "producer" may not`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, tt.args...)
			if code != 1 {
				t.Errorf("exit %d, want 1: %s", code, errOut)
			}
			for _, w := range tt.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			if strings.Contains(errOut, "deadline") || strings.Contains(errOut, "pw-") {
				t.Errorf("stderr speaks of a timeout or shows a password:\n%s", errOut)
			}
		})
	}
}
