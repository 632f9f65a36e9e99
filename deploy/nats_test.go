package deploy_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/console"
	"github.com/proxbus/proxbus/internal/deadletter"
	"github.com/proxbus/proxbus/seal"
)

// waitLimit bounds every wait below. It is a safety net against a hung test, not a timed
// assertion: each wait ends as soon as its condition holds.
const waitLimit = 30 * time.Second

// natsUser is one client of the accounts.conf server, with the asynchronous errors (the
// server's permission violations) its connection received.
type natsUser struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	errs chan error
}

// inboxOf is the inbox prefix each user of nats/accounts.conf connects with.
var inboxOf = map[string]string{
	"proxbus": app.InboxService, "producer": app.InboxProducer, "subscriber": app.InboxSubscriber,
	"cli": app.InboxCLI, "approver": app.InboxApprover, "admin": app.InboxAdmin,
}

// startAccountsServer runs a JetStream server whose users and permissions are exactly
// nats/accounts.conf, with a password per variable it reads, and returns a connect function
// that connects as a user with that user's inbox prefix ([inboxOf]), or with nats.go's
// default "_INBOX" when inbox is "".
func startAccountsServer(t *testing.T) func(user string) *natsUser {
	connect := startAccountsServerInbox(t)
	return func(user string) *natsUser {
		t.Helper()
		return connect(user, inboxOf[user])
	}
}

// startAccountsServerInbox is [startAccountsServer] whose connect function takes the inbox
// prefix.
func startAccountsServerInbox(t *testing.T) func(user, inbox string) *natsUser {
	t.Helper()
	passwords := map[string]string{}
	for _, v := range natsPasswordVariables(t) {
		passwords[v] = "pw-" + strings.ToLower(v)
		t.Setenv(v, passwords[v])
	}
	dir := t.TempDir()
	raw, err := os.ReadFile("nats/accounts.conf")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "accounts.conf"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "server.conf")
	if err := os.WriteFile(conf, []byte("include accounts.conf\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("accounts.conf: %v", err)
	}
	opts.Host, opts.Port = "127.0.0.1", -1
	opts.JetStream, opts.StoreDir = true, t.TempDir()
	opts.NoLog, opts.NoSigs = true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("server with accounts.conf: %v", err)
	}
	go srv.Start() // ended by Shutdown in the cleanup, which waits for it
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	if !srv.ReadyForConnections(waitLimit) {
		t.Fatal("server with accounts.conf not ready")
	}
	return func(user, inbox string) *natsUser {
		t.Helper()
		u := &natsUser{errs: make(chan error, 64)}
		pw := passwords["NATS_"+strings.ToUpper(user)+"_PASSWORD"]
		opts := []nats.Option{nats.UserInfo(user, pw),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
				select {
				case u.errs <- err:
				default:
				}
			})}
		if inbox != "" {
			opts = append(opts, nats.CustomInboxPrefix(inbox))
		}
		nc, err := nats.Connect(srv.ClientURL(), opts...)
		if err != nil {
			t.Fatalf("connect as %s: %v", user, err)
		}
		t.Cleanup(nc.Close)
		if u.js, err = jetstream.New(nc); err != nil {
			t.Fatal(err)
		}
		u.nc = nc
		return u
	}
}

// denied reports whether the server refused the last operation with a permission violation.
func (u *natsUser) denied(t *testing.T) bool {
	t.Helper()
	if err := u.nc.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	select {
	case err := <-u.errs:
		return errors.Is(err, nats.ErrPermissionViolation) || strings.Contains(strings.ToLower(err.Error()), "permissions violation")
	case <-time.After(waitLimit):
		return false
	}
}

// noErrors fails when the connection received any asynchronous error.
func (u *natsUser) noErrors(t *testing.T, who string) {
	t.Helper()
	for {
		select {
		case err := <-u.errs:
			t.Errorf("%s: %v", who, err)
		default:
			return
		}
	}
}

// runConsumer runs proxbus's consumer as svc with handler h until the returned function is
// called (also at cleanup); it returns once the consumer has stopped.
func runConsumer(ctx context.Context, t *testing.T, svc *natsUser, cfg consumer.Config, h consumer.Handler) (stop func()) {
	t.Helper()
	c, err := consumer.New(svc.js, cfg, h, consumer.NewPublisher(svc.js, events.NewEmitter(cfg.Subjects, "deploy-test")))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := c.Run(runCtx); err != nil {
			t.Errorf("proxbus: consumer run: %v", err)
		}
	})
	stop = func() { cancel(); wg.Wait() }
	t.Cleanup(stop)
	return stop
}

// eventually reports whether cond held within waitLimit, polling it.
func eventually(cond func() bool) bool {
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// TestNATSAccountPermissions runs proxbus's consumer, a producer, a subscriber and the CLI
// against a server configured by nats/accounts.conf: each role can do its whole job (the
// proxbus user provisions, fetches, acks, dead-letters a poison message and a command its
// handler gives up on, and reads a command's events back) and nothing outside it. Not parallel: it sets
// the password variables in the environment.
func TestNATSAccountPermissions(t *testing.T) {
	connect := startAccountsServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	t.Cleanup(cancel)
	subjects := events.NewSubjects("")
	cfg := consumer.Config{
		Subjects: subjects, FetchWait: 200 * time.Millisecond,
		AckWait: 2 * time.Second, Heartbeat: 500 * time.Millisecond,
		Instance: "deploy-test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}

	svc := connect("proxbus")
	if _, err := svc.js.AccountInfo(ctx); err != nil {
		t.Fatalf("proxbus: account info (readiness): %v", err)
	}
	if err := consumer.Provision(ctx, svc.js, cfg); err != nil {
		t.Fatalf("proxbus: provision: %v", err)
	}
	sealKey, err := seal.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := seal.PublishPublicKeys(ctx, svc.js, subjects, []string{sealKey.Public}); err != nil {
		t.Fatalf("proxbus: publish the sealing key: %v", err)
	}
	for _, role := range []string{"producer", "cli"} {
		if got, err := seal.LookupPublicKey(ctx, connect(role).js, subjects); err != nil || got != sealKey.Public {
			t.Errorf("%s: read the sealing key = %q, %v", role, got, err)
		}
	}

	producer := connect("producer")
	for _, c := range []events.Command{
		{Verb: "vm.start", ID: "ok-1", Source: "/deploy-test", Data: []byte(`{"vm":100}`)},
		{Verb: "vm.start", ID: "exhaust-1", Source: "/deploy-test", Data: []byte(`{"vm":101}`)},
	} {
		m, err := events.EncodeBinary(subjects, c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := producer.js.PublishMsg(ctx, m); err != nil {
			t.Fatalf("producer: publish command: %v", err)
		}
	}
	poison := nats.NewMsg(subjects.Command("vm.start"))
	poison.Header.Set("ce-specversion", "0.3")
	poison.Header.Set("ce-id", "poison-1")
	poison.Header.Set("ce-source", "/deploy-test")
	poison.Header.Set("ce-type", "proxbus.vm.start")
	poison.Data = []byte(`{}`)
	if _, err := producer.js.PublishMsg(ctx, poison); err != nil {
		t.Fatalf("producer: publish poison: %v", err)
	}

	var mu sync.Mutex
	handled := map[string]int{}
	history := app.NewHistory(svc.js, subjects)
	h := consumer.HandlerFunc(func(ctx context.Context, cmd events.Command, _ events.Delivery) events.Disposition {
		mu.Lock()
		handled[cmd.ID]++
		mu.Unlock()
		// The pipeline's reads on a later delivery: the newest step and the stored result.
		if _, _, err := history.LastStep(ctx, cmd.Ref()); err != nil {
			t.Errorf("proxbus: read the newest step: %v", err)
		}
		if _, err := history.HasResult(ctx, cmd.Ref()); err != nil {
			t.Errorf("proxbus: look up the result: %v", err)
		}
		if cmd.ID == "exhaust-1" {
			return events.Disposition{Action: events.DeadLetter, Reason: "attempts_exhausted"}
		}
		return events.Disposition{Action: events.Ack}
	})
	stopConsumer := runConsumer(ctx, t, svc, cfg, h)
	var wg sync.WaitGroup

	admin := connect("admin")
	msgs := func(stream string) uint64 {
		s, err := admin.js.Stream(ctx, stream)
		if err != nil {
			t.Fatalf("admin: stream %s: %v", stream, err)
		}
		return s.CachedInfo().State.Msgs
	}
	if !eventually(func() bool {
		return msgs(subjects.CommandsStream()) == 0 && msgs(subjects.DLQStream()) == 2 && msgs(subjects.EventsStream()) == 1
	}) {
		svc.noErrors(t, "proxbus") // the permission the proxbus user lacked, if any
		t.Fatalf("never happened: commands acked or dead-lettered, 2 dead letters, 1 result (the poison's) (now %d, %d, %d)",
			msgs(subjects.CommandsStream()), msgs(subjects.DLQStream()), msgs(subjects.EventsStream()))
	}
	stopConsumer()
	mu.Lock()
	if handled["ok-1"] != 1 || handled["exhaust-1"] != 1 {
		t.Errorf("handled %v, want ok-1 and exhaust-1 once each", handled)
	}
	mu.Unlock()
	dls, err := deadletter.List(ctx, admin.js, subjects, 0)
	if err != nil {
		t.Fatalf("admin: list dead letters: %v", err)
	}
	reasons := map[string]bool{}
	for _, d := range dls {
		reasons[d.Reason] = true
	}
	if !reasons[deadletter.ReasonInvalidCommand] || !reasons["attempts_exhausted"] {
		t.Errorf("dead-letter reasons %v, want %s and attempts_exhausted", reasons, deadletter.ReasonInvalidCommand)
	}
	svc.noErrors(t, "proxbus")
	producer.noErrors(t, "producer")

	// The web console of a replica reads as the proxbus user: the events stream and the
	// dead letters.
	ui, err := console.New(console.Config{JetStream: svc.js, Subjects: subjects, Access: console.Access{ReadToken: "deploy-test-read-token"}})
	if err != nil {
		t.Fatal(err)
	}
	uiCtx, stopUI := context.WithCancel(ctx)
	wg.Go(func() { ui.Run(uiCtx) })
	uiGet := func(path string) (int, string) {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Authorization", "Bearer deploy-test-read-token")
		w := httptest.NewRecorder()
		ui.Handler().ServeHTTP(w, req)
		return w.Code, w.Body.String()
	}
	if !eventually(func() bool { _, body := uiGet("/ui/commands"); return strings.Contains(body, `id="c-poison-1"`) }) {
		t.Error("proxbus: the console never showed the poison command's result from the events stream")
	}
	if status, body := uiGet("/ui/deadletters"); status != http.StatusOK || !strings.Contains(body, "attempts_exhausted") {
		t.Errorf("proxbus: the console's dead letters: status %d", status)
	}
	stopUI()
	wg.Wait()
	svc.noErrors(t, "proxbus (console)")

	sub := connect("subscriber")
	oc, err := sub.js.OrderedConsumer(ctx, subjects.EventsStream(), jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("subscriber: ordered consumer on events: %v", err)
	}
	batch, err := oc.Fetch(1, jetstream.FetchMaxWait(waitLimit))
	if err != nil {
		t.Fatalf("subscriber: fetch events: %v", err)
	}
	n := 0
	for range batch.Messages() {
		n++
	}
	if n != 1 {
		t.Errorf("subscriber read %d events, want 1 (%v)", n, batch.Error())
	}
	if _, err := sub.nc.SubscribeSync(subjects.EventsFilter()); err != nil {
		t.Fatalf("subscriber: subscribe events: %v", err)
	}
	sub.noErrors(t, "subscriber")

	cli := connect("cli")
	m, err := events.EncodeBinary(subjects, events.Command{Verb: "vm.list", ID: "cli-1", Source: "urn:proxbus:cli", Data: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.js.PublishMsg(ctx, m); err != nil {
		t.Errorf("cli: publish command: %v", err)
	}
	if _, err := cli.js.OrderedConsumer(ctx, subjects.EventsStream(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{subjects.Follow("cli-1")}}); err != nil {
		t.Errorf("cli: follow events: %v", err)
	}
	cli.noErrors(t, "cli")

	approver := connect("approver")
	approval, err := events.EncodeBinary(subjects, events.Command{Verb: "command.approve", ID: "approve-1", Source: "urn:proxbus:cli",
		Actor: "bob", Data: []byte(`{"command_id":"cli-1","command_source":"urn:proxbus:cli"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := approver.js.PublishMsg(ctx, approval); err != nil {
		t.Errorf("approver: publish command.approve: %v", err)
	}
	if _, err := approver.js.OrderedConsumer(ctx, subjects.EventsStream(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{subjects.Follow("approve-1")}}); err != nil {
		t.Errorf("approver: follow events: %v", err)
	}
	approver.noErrors(t, "approver")

	refusals := []struct {
		name string
		u    *natsUser
		do   func(u *natsUser) error
	}{
		{"producer publishes an event", producer, func(u *natsUser) error { return u.nc.Publish(subjects.Result("x"), []byte(`{}`)) }},
		{"producer reads events", producer, func(u *natsUser) error { _, err := u.nc.SubscribeSync(subjects.EventsFilter()); return err }},
		{"producer reads dead letters", producer, func(u *natsUser) error { _, err := u.nc.SubscribeSync(subjects.DLQFilter()); return err }},
		{"subscriber publishes a command", sub, func(u *natsUser) error { return u.nc.Publish(subjects.Command("vm.start"), []byte(`{}`)) }},
		{"subscriber publishes an event", sub, func(u *natsUser) error { return u.nc.Publish(subjects.Result("x"), []byte(`{}`)) }},
		{"subscriber deletes the events stream", sub, func(u *natsUser) error {
			return u.nc.Publish("$JS.API.STREAM.DELETE."+subjects.EventsStream(), nil)
		}},
		{"proxbus publishes a command", svc, func(u *natsUser) error { return u.nc.Publish(subjects.Command("vm.start"), []byte(`{}`)) }},
		{"proxbus deletes a stream", svc, func(u *natsUser) error {
			return u.nc.Publish("$JS.API.STREAM.DELETE."+subjects.CommandsStream(), nil)
		}},
		{"proxbus reads commands outside its consumer", svc, func(u *natsUser) error { _, err := u.nc.SubscribeSync(subjects.CommandsFilter()); return err }},
		{"cli approves a command", cli, func(u *natsUser) error { return u.nc.Publish(subjects.Command("command.approve"), []byte(`{}`)) }},
		{"producer approves a command", producer, func(u *natsUser) error { return u.nc.Publish(subjects.Command("command.approve"), []byte(`{}`)) }},
		{"producer rejects a command", producer, func(u *natsUser) error { return u.nc.Publish(subjects.Command("command.reject"), []byte(`{}`)) }},
		{"approver publishes another command", approver, func(u *natsUser) error { return u.nc.Publish(subjects.Command("vm.start"), []byte(`{}`)) }},
		{"cli deletes the events stream", cli, func(u *natsUser) error {
			return u.nc.Publish("$JS.API.STREAM.DELETE."+subjects.EventsStream(), nil)
		}},
		{"proxbus approves a command (for a webhook)", svc, func(u *natsUser) error {
			return u.nc.Publish(subjects.Command("command.approve"), []byte(`{}`))
		}},
		{"proxbus rejects a command (for a webhook)", svc, func(u *natsUser) error {
			return u.nc.Publish(subjects.Command("command.reject"), []byte(`{}`))
		}},
	}
	for _, r := range refusals {
		if err := r.do(r.u); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		if !r.u.denied(t) {
			t.Errorf("%s: allowed, want a permission violation", r.name)
		}
	}
}

// TestNATSClusterConfigParses checks that nats/cluster.conf (with accounts.conf) is a valid
// server configuration: JetStream fsyncing every write, and a three-route cluster. Not
// parallel: it sets the password variables in the environment.
func TestNATSClusterConfigParses(t *testing.T) {
	for _, v := range natsPasswordVariables(t) {
		t.Setenv(v, "x")
	}
	opts, err := server.ProcessConfigFile("nats/cluster.conf")
	if err != nil {
		t.Fatalf("nats/cluster.conf: %v", err)
	}
	if !opts.JetStream {
		t.Error("JetStream is not enabled")
	}
	if !opts.SyncAlways {
		t.Error("JetStream does not fsync every write: want sync_interval: always (docs/operations.md \"Durability\")")
	}
	if len(opts.Routes) != 3 {
		t.Errorf("%d routes, want 3", len(opts.Routes))
	}
	if opts.Cluster.Name == "" {
		t.Error("the cluster has no name")
	}
	if len(opts.Accounts) == 0 {
		t.Error("accounts.conf defines no account")
	}
}

// TestNATSInboxesArePrivate reproduces the review's attack on the shipped permissions: every
// user but admin listens on nats.go's default inbox "_INBOX.>" and on every other role's inbox
// prefix while the proxbus user pulls a storage.pbs.create carrying a password. The server
// must refuse each of those subscriptions and no eavesdropper may receive the command; each
// role may still subscribe under its own prefix. Not parallel: it sets the password
// variables in the environment.
func TestNATSInboxesArePrivate(t *testing.T) {
	connect := startAccountsServerInbox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	t.Cleanup(cancel)
	subjects := events.NewSubjects("")
	cfg := consumer.Config{Subjects: subjects, Instance: "deploy-test", Logger: slog.New(slog.DiscardHandler)}
	svc := connect("proxbus", app.InboxService)
	if err := consumer.Provision(ctx, svc.js, cfg); err != nil {
		t.Fatalf("proxbus: provision: %v", err)
	}

	type tap struct {
		who     string
		u       *natsUser
		msgs    chan *nats.Msg
		allowed bool
	}
	var taps []tap
	roles := []string{"proxbus", "producer", "subscriber", "cli", "approver"}
	for _, user := range roles {
		u := connect(user, inboxOf[user])
		if _, err := u.nc.SubscribeSync(inboxOf[user] + ".own"); err != nil {
			t.Fatal(err)
		}
		if err := u.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		u.noErrors(t, user+" subscribes under its own inbox prefix")
		for _, inbox := range append([]string{"_INBOX"}, slices.Collect(maps.Values(inboxOf))...) {
			if inbox == inboxOf[user] {
				continue
			}
			ch := make(chan *nats.Msg, 16)
			if _, err := u.nc.ChanSubscribe(inbox+".>", ch); err != nil {
				t.Fatal(err)
			}
			taps = append(taps, tap{who: user + " on " + inbox + ".>", u: u, msgs: ch})
		}
	}
	for _, tp := range taps {
		if !tp.u.denied(t) {
			t.Errorf("%s: subscription allowed, want a permission violation", tp.who)
		}
	}

	producer := connect("producer", app.InboxProducer)
	const canary = "pbs-password-canary-7f3a"
	m, err := events.EncodeBinary(subjects, events.Command{Verb: "storage.pbs.create", ID: "secret-1", Source: "/deploy-test",
		Data: []byte(`{"storage":"pbs1","server":"pbs.example","datastore":"ds","username":"u@pbs","password":"` + canary + `"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := producer.js.PublishMsg(ctx, m); err != nil {
		t.Fatalf("producer: publish: %v", err)
	}
	pull, err := svc.js.Consumer(ctx, subjects.CommandsStream(), consumer.DefaultDurable)
	if err != nil {
		t.Fatalf("proxbus: consumer: %v", err)
	}
	batch, err := pull.Fetch(1, jetstream.FetchMaxWait(waitLimit))
	if err != nil {
		t.Fatalf("proxbus: fetch: %v", err)
	}
	got := 0
	for msg := range batch.Messages() {
		got++
		if !strings.Contains(string(msg.Data()), canary) {
			t.Errorf("proxbus fetched %q, want the command", msg.Data())
		}
	}
	if got != 1 {
		t.Fatalf("proxbus fetched %d commands, want 1 (%v)", got, batch.Error())
	}
	svc.noErrors(t, "proxbus")
	for _, tp := range taps {
		if err := tp.u.nc.Flush(); err != nil { // what the server sent before the fetch ended has arrived
			t.Fatal(err)
		}
		if n := len(tp.msgs); n > 0 {
			t.Errorf("%s: received %d of the service's replies (the pulled command with its password)", tp.who, n)
		}
	}
}

// TestNATSScheduleForgery reproduces the review's schedule attack on the shipped permissions,
// with message schedules allowed on the commands stream (contract §11): a producer, denied
// proxbus.cmd.command.>, publishes a schedule on a subject it may write whose target is
// proxbus.cmd.command.approve; nats-server stores the fired approval (it checks only that the
// target is in the stream). The service must dead-letter it as poison, never handle it, while a
// schedule under proxbus.schedule.> (which only proxbus and admin may write) fires a command
// that runs. Not parallel: it sets the password variables in the environment.
func TestNATSScheduleForgery(t *testing.T) {
	connect := startAccountsServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	t.Cleanup(cancel)
	subjects := events.NewSubjects("")
	cfg := consumer.Config{
		Subjects: subjects, FetchWait: 200 * time.Millisecond, AckWait: 2 * time.Second, Heartbeat: 500 * time.Millisecond,
		Instance: "deploy-test", Logger: slog.New(slog.DiscardHandler),
	}
	svc := connect("proxbus")
	if err := consumer.Provision(ctx, svc.js, cfg); err != nil {
		t.Fatalf("proxbus: provision: %v", err)
	}
	admin := connect("admin")
	st, err := admin.js.Stream(ctx, subjects.CommandsStream())
	if err != nil {
		t.Fatal(err)
	}
	if sc := st.CachedInfo().Config; !sc.AllowMsgSchedules {
		t.Fatal("provisioning did not allow message schedules on the commands stream")
	}

	schedule := func(u *natsUser, subject, verb, id, source string) {
		t.Helper()
		m, err := events.EncodeBinary(subjects, events.Command{Verb: verb, ID: id, Source: source, Actor: "alice",
			Data: []byte(`{"command_id":"victim-1","command_source":"urn:proxbus:cli","vm":100}`)})
		if err != nil {
			t.Fatal(err)
		}
		m.Subject = subject
		m.Header.Del(events.HeaderMsgID)
		m.Header.Set("Nats-Schedule", "@at "+time.Now().UTC().Format(time.RFC3339))
		m.Header.Set("Nats-Schedule-Target", subjects.Command(verb))
		if _, err := u.js.PublishMsg(ctx, m); err != nil {
			t.Fatalf("publish the schedule on %s: %v", subject, err)
		}
	}
	producer := connect("producer")
	schedule(producer, subjects.Command("vm.start"), "command.approve", "forged-1", "/deploy-test")
	schedule(admin, subjects.Schedule("approvals"), "command.approve", "forged-2", events.ScheduleSource("approvals"))
	schedule(admin, subjects.Schedule("fake"), "vm.start", "forged-3", "/deploy-test")
	// proxbus's own schedule, as schedule.add stores it, with the service's permissions
	if err := (consumer.Schedules{JS: svc.js, Subjects: subjects}).Add(ctx, events.Schedule{Name: "nightly",
		At: time.Now().UTC().Truncate(time.Second).Add(time.Second), Verb: "vm.start", EndpointID: 1, Data: []byte(`{"vm":100}`)}); err != nil {
		t.Fatalf("proxbus: add a schedule: %v", err)
	}
	producer.noErrors(t, "producer")
	// a producer may not write a schedule under proxbus.schedule.>
	denied, cancelDenied := context.WithTimeout(ctx, 2*time.Second)
	defer cancelDenied()
	if _, err := producer.js.Publish(denied, subjects.Schedule("mine"), []byte("{}")); err == nil {
		t.Error("producer: publishing on proxbus.schedule.mine succeeded, want it denied")
	}

	fired := func(verb string) uint64 {
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(">"))
		if err != nil {
			t.Fatal(err)
		}
		if verb == ">" {
			return info.State.Msgs
		}
		return info.State.Subjects[subjects.Command(verb)]
	}
	// Each @at schedule is purged once it fired (Nats-Schedule-Next: purge), so the stream then
	// holds exactly the fired commands: two approvals, two vm.start ("fake" and "nightly").
	fireDone := func() bool {
		return fired("command.approve") == 2 && fired("vm.start") == 2 && fired(">") == 4
	}
	if !eventually(fireDone) {
		t.Fatalf("the schedules never fired (%d approvals, %d vm.start, %d in all)", fired("command.approve"), fired("vm.start"), fired(">"))
	}

	var mu sync.Mutex
	handled := map[string]int{}
	h := consumer.HandlerFunc(func(_ context.Context, cmd events.Command, _ events.Delivery) events.Disposition {
		mu.Lock()
		handled[cmd.ID]++
		mu.Unlock()
		return events.Disposition{Action: events.Ack}
	})
	stopConsumer := runConsumer(ctx, t, svc, cfg, h)
	if !eventually(func() bool {
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(subjects.CommandsFilter()))
		return err == nil && len(info.State.Subjects) == 0
	}) {
		t.Fatal("the fired commands were never taken off the commands stream")
	}
	stopConsumer()
	mu.Lock()
	defer mu.Unlock()
	for _, id := range []string{"forged-1", "forged-2", "forged-3"} {
		if handled[id] != 0 {
			t.Errorf("%s was handled %d times, want it dead-lettered as poison", id, handled[id])
		}
	}
	nightly := 0
	for id, n := range handled {
		if strings.HasPrefix(id, "nightly.") {
			nightly += n
		}
	}
	if nightly != 1 {
		t.Errorf("the proxbus schedule's command was handled %d times, want 1 (handled: %v)", nightly, handled)
	}
	dls, err := deadletter.List(ctx, admin.js, subjects, 0)
	if err != nil {
		t.Fatal(err)
	}
	forged := 0
	for _, d := range dls {
		if d.Reason == deadletter.ReasonInvalidCommand {
			forged++
		}
	}
	if forged < 3 {
		t.Errorf("%d poison dead letters, want the 3 forged commands among them", forged)
	}
	svc.noErrors(t, "proxbus")
}
