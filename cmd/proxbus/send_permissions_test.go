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
	admin, err := nats.Connect(srv.ClientURL(), nats.UserInfo("admin", password("admin")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	subjects := events.NewSubjects("")
	if err := consumer.Provision(context.Background(), js, consumer.Config{Subjects: subjects}); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(srv.ClientURL())
	u.User = url.UserPassword("cli", password("cli"))
	cliURL := u.String()

	// A fresh command, answered once it is sent.
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	stderr := newLineWriter()
	done := make(chan int, 1)
	var stdout strings.Builder
	go func() {
		done <- cmdSend(ctx, []string{"vm.start", "--endpoint", "1", "--data", `{"vm":100}`, "--id", "perm-2", "--nats-url", cliURL},
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
