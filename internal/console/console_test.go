package console

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/handlers"
	"github.com/proxbus/proxbus/internal/deadletter"
	"github.com/proxbus/proxbus/internal/testenv"
	"github.com/proxbus/proxbus/store"
)

// fixture is a console on a real JetStream server with the proxbus streams, serving over
// HTTP on loopback, and a publisher of events as a replica "r1" publishes them.
type fixture struct {
	t    *testing.T
	js   jetstream.JetStream
	s    events.Subjects
	c    *Console
	srv  *httptest.Server
	pub  *consumer.Publisher
	base string
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	return newFixtureOn(t, testenv.StartNATS(t).JS, cfg)
}

// newFixtureOn is [newFixture] on the JetStream of js.
func newFixtureOn(t *testing.T, js jetstream.JetStream, cfg Config) *fixture {
	t.Helper()
	s := events.NewSubjects("")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := consumer.Provision(ctx, js, consumer.Config{Subjects: s}); err != nil {
		t.Fatal(err)
	}
	cfg.JetStream, cfg.Subjects = js, s
	if cfg.LiveInterval == 0 {
		cfg.LiveInterval = 10 * time.Millisecond
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(runCtx) }()
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(func() {
		stop()
		<-done
		srv.Close()
	})
	return &fixture{t: t, js: js, s: s, c: c, srv: srv, pub: consumer.NewPublisher(js, events.NewEmitter(s, "r1")), base: srv.URL}
}

// publish publishes payload p about command id as replica r1 does.
func (f *fixture) publish(id, verb string, p events.Payload) {
	f.t.Helper()
	ep := int64(1)
	if err := f.pub.Publish(context.Background(), events.Origin{ID: id, Source: "/test", Verb: verb, Actor: "alice", EndpointID: &ep}, p); err != nil {
		f.t.Fatal(err)
	}
}

// finish publishes a started and a done step and the result of command id.
func (f *fixture) finish(id string) {
	f.t.Helper()
	f.publish(id, "vm.start", events.Step{Seq: 1, Step: "start_vm", Status: events.StepStarted, Attempt: 1})
	f.publish(id, "vm.start", events.Step{Seq: 2, Step: "start_vm", Status: events.StepDone, Attempt: 1, UPID: "UPID:pve1:1:2:3:qmstart:100:x:"})
	f.publish(id, "vm.start", events.Result{Status: 200, Result: "started"})
}

// held waits until the console holds command id with its result.
func (f *fixture) held(id string) {
	f.t.Helper()
	f.waitFor(id, "with its result", func(c Command) bool { return c.Result != nil })
}

// waitFor waits until the console holds command id as ok says (what names it for the error).
func (f *fixture) waitFor(id, what string, ok func(Command) bool) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, found := f.c.ix.Get(id); found && ok(c) {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("the console never held command %s %s", id, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// deadLetter stores a dead letter of body and returns its sequence.
func (f *fixture) deadLetter(body string) uint64 {
	f.t.Helper()
	h := nats.Header{}
	h.Set("ce-id", "poison-1")
	h.Set("ce-source", "/test")
	msg := deadletter.Build(f.s, deadletter.Original{Subject: f.s.Command("vm.start"), Header: h, Data: []byte(body), StreamSeq: 7, Deliveries: 1},
		"vm.start", deadletter.ReasonInvalidCommand, "not JSON", time.Now(), 1<<20)
	ack, err := f.js.PublishMsg(context.Background(), msg)
	if err != nil {
		f.t.Fatal(err)
	}
	return ack.Sequence
}

// client is a browser: a cookie jar, redirects followed, a header set on every request.
type client struct {
	t      *testing.T
	hc     *http.Client
	base   string
	header http.Header
}

func (f *fixture) client(header ...string) *client {
	f.t.Helper()
	jar, _ := cookiejar.New(nil)
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	return &client{t: f.t, hc: &http.Client{Jar: jar}, base: f.base, header: h}
}

func (c *client) do(method, path string, form url.Values) (int, string, http.Header) {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func (c *client) get(path string) (int, string) {
	c.t.Helper()
	status, body, _ := c.do(http.MethodGet, path, nil)
	return status, body
}

func (c *client) login(token string) int {
	c.t.Helper()
	status, _, _ := c.do(http.MethodPost, "/ui/login", url.Values{"token": {token}, "next": {"/ui/commands"}})
	return status
}

// csrfOf is the CSRF token of the first form of body.
func csrfOf(t *testing.T, body string) string {
	t.Helper()
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("the page has no CSRF field:\n%s", body)
	}
	return m[1]
}

var tokens = Access{ReadToken: testReadToken, OperatorToken: testOperatorToken}

// TestWithoutCredentialsNothingButTheLoginForm: every page and live stream answers a request
// without credentials 401, showing the login form and nothing of the data.
func TestWithoutCredentialsNothingButTheLoginForm(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{Access: tokens})
	f.finish("secret-plan-42")
	f.held("secret-plan-42")
	seq := f.deadLetter(`{"id":"poison-1"}`)
	anon := f.client()
	bad := f.client("Authorization", "Bearer not-the-token-0123456789")
	paths := []string{"/ui", "/ui/", "/ui/commands", "/ui/commands/secret-plan-42", "/ui/live/commands", "/ui/live/commands/secret-plan-42",
		"/ui/live/replicas", "/ui/deadletters", "/ui/deadletters/1", "/ui/deadletters/1/replay", "/ui/deadletters/purge",
		"/ui/repairs", "/ui/approvals", "/ui/schedules", "/ui/replicas", "/ui/proxmox", "/ui/nope"}
	for _, c := range []*client{anon, bad} {
		for _, p := range paths {
			status, body := c.get(p)
			// The id may come back in the form's "next" field (the page asked for); no data may.
			if status != http.StatusUnauthorized || strings.Contains(body, "start_vm") || strings.Contains(body, "UPID") || strings.Contains(body, "<nav>") {
				t.Errorf("GET %s: status %d (want 401), data shown: %v", p, status, strings.Contains(body, "start_vm"))
			}
		}
		for _, p := range []string{"/ui/deadletters/1/replay", "/ui/deadletters/purge"} {
			if status, _, _ := c.do(http.MethodPost, p, url.Values{"before": {time.Now().Format(time.RFC3339Nano)}}); status != http.StatusUnauthorized {
				t.Errorf("POST %s: status %d, want 401", p, status)
			}
		}
	}
	if l, err := deadletter.Get(context.Background(), f.js, f.s, seq); err != nil || len(l.Replays) != 0 {
		t.Errorf("the dead letter changed without credentials: %v, replays %d", err, len(l.Replays))
	}
}

// TestLogin: a wrong token is answered 401 with the form again; the read token sets an
// HttpOnly, SameSite=Strict session cookie that opens every page but the operator's ones.
// loginCookie posts the login form with token over the fixture's plain HTTP and returns the
// answer's status and Set-Cookie header.
func (f *fixture) loginCookie(token string) (int, string) {
	f.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.base+"/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Set-Cookie")
}

// TestLoginSecureCookieBehindProxy: behind a reverse proxy that terminates TLS, proxbus sees
// plain HTTP; with SecureCookie (--ui-secure-cookie) the session cookie is Secure all the same,
// so a browser never sends it over plain HTTP.
func TestLoginSecureCookieBehindProxy(t *testing.T) {
	t.Parallel()
	a := tokens
	a.SecureCookie = true
	f := newFixture(t, Config{Access: a})
	status, set := f.loginCookie(testReadToken)
	if status != http.StatusSeeOther || !strings.Contains(set, "; Secure") {
		t.Errorf("login with SecureCookie: status %d, Set-Cookie %q, want Secure", status, set)
	}
}

func TestLogin(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{Access: tokens})
	f.finish("cmd-1")
	f.held("cmd-1")
	c := f.client()
	status, body, _ := c.do(http.MethodPost, "/ui/login", url.Values{"token": {"wrong-token-0123456789"}})
	if status != http.StatusUnauthorized || !strings.Contains(body, `id="login-error"`) || strings.Contains(body, "cmd-1") {
		t.Fatalf("wrong token: status %d, error shown %v", status, strings.Contains(body, "login-error"))
	}
	status, set := f.loginCookie(testReadToken)
	if status != http.StatusSeeOther || !strings.Contains(set, "HttpOnly") || !strings.Contains(set, "SameSite=Strict") || strings.Contains(set, testReadToken) {
		t.Fatalf("read-token login: status %d, Set-Cookie %q", status, set)
	}
	if strings.Contains(set, "Secure") {
		t.Errorf("plain-HTTP login without SecureCookie: Set-Cookie %q is Secure (the browser would not send it back)", set)
	}
	if c.login(testReadToken) != http.StatusOK {
		t.Fatal("login with the read token did not land on a page")
	}
	if status, body := c.get("/ui/commands"); status != http.StatusOK || !strings.Contains(body, `id="c-cmd-1"`) || !strings.Contains(body, ">reader<") {
		t.Errorf("commands as reader: status %d, row shown %v", status, strings.Contains(body, "c-cmd-1"))
	}
	if status, body := c.get("/ui/commands/cmd-1"); status != http.StatusOK || !strings.Contains(body, `data-step="start_vm"`) {
		t.Errorf("a command's page: status %d", status)
	}
	if status, _ := c.get("/ui/deadletters/purge"); status != http.StatusForbidden {
		t.Errorf("the purge page as reader: status %d, want 403", status)
	}
}

// TestReplayAndPurgeNeedTheOperator: a reader can neither replay nor purge a dead letter
// and sees no button for it; an operator's replay without the form's CSRF token is refused;
// with it the letter is published once on its original subject, and purge empties the stream.
func TestReplayAndPurgeNeedTheOperator(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{Access: tokens})
	seq := f.deadLetter(`{"id":"poison-1","data":{"vm":100}}`)
	path := "/ui/deadletters/" + itoa(seq)

	reader := f.client()
	reader.login(testReadToken)
	status, body := reader.get(path)
	if status != http.StatusOK || strings.Contains(body, `id="replay"`) || !strings.Contains(body, "poison-1") {
		t.Fatalf("dead letter as reader: status %d, replay button %v", status, strings.Contains(body, `id="replay"`))
	}
	if status, _, _ := reader.do(http.MethodPost, path+"/replay", url.Values{"csrf": {csrfOf(t, body)}}); status != http.StatusForbidden {
		t.Errorf("replay by a reader: status %d, want 403", status)
	}

	op := f.client()
	op.login(testOperatorToken)
	if status, _, _ := op.do(http.MethodPost, path+"/replay", url.Values{}); status != http.StatusForbidden {
		t.Errorf("replay without a CSRF token: status %d, want 403", status)
	}
	status, confirm := op.get(path + "/replay")
	if status != http.StatusOK || !strings.Contains(confirm, `id="confirm"`) {
		t.Fatalf("replay confirmation page: status %d", status)
	}
	status, done, _ := op.do(http.MethodPost, path+"/replay", url.Values{"csrf": {csrfOf(t, confirm)}})
	if status != http.StatusOK || !strings.Contains(done, `id="replayed"`) || !strings.Contains(done, "poison-1-replay-"+itoa(seq)) {
		t.Fatalf("confirmed replay: status %d, replayed shown %v", status, strings.Contains(done, `id="replayed"`))
	}
	if n := streamMsgs(t, f.js, f.s.CommandsStream()); n != 1 {
		t.Errorf("commands stream holds %d messages after the replay, want 1", n)
	}
	if status, _, _ := op.do(http.MethodPost, path+"/replay", url.Values{"csrf": {csrfOf(t, confirm)}}); status != http.StatusOK {
		t.Errorf("second replay: status %d", status)
	}
	if n := streamMsgs(t, f.js, f.s.CommandsStream()); n != 1 {
		t.Errorf("commands stream holds %d messages after a second replay, want still 1", n)
	}

	if status, _, _ := reader.do(http.MethodPost, "/ui/deadletters/purge", url.Values{"before": {time.Now().Add(time.Minute).Format(time.RFC3339Nano)}}); status != http.StatusForbidden {
		t.Errorf("purge by a reader: status %d, want 403", status)
	}
	status, confirm = op.get("/ui/deadletters/purge")
	if status != http.StatusOK || !strings.Contains(confirm, "Purge all 1 dead letters?") {
		t.Fatalf("purge confirmation: status %d", status)
	}
	before := regexp.MustCompile(`name="before" value="([^"]+)"`).FindStringSubmatch(confirm)
	if before == nil {
		t.Fatal("the purge form has no before field")
	}
	if status, _, _ := op.do(http.MethodPost, "/ui/deadletters/purge", url.Values{"csrf": {csrfOf(t, confirm)}, "before": {before[1]}}); status != http.StatusOK {
		t.Errorf("confirmed purge: status %d", status)
	}
	if letters, err := deadletter.List(context.Background(), f.js, f.s, 0); err != nil || len(letters) != 0 {
		t.Errorf("after the purge: %d letters, %v", len(letters), err)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

func streamMsgs(t *testing.T, js jetstream.JetStream, name string) uint64 {
	t.Helper()
	st, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// sse reads a live stream, sending each event's name and data to the returned channel until
// the test ends.
func sse(t *testing.T, c *client, path string) <-chan [2]string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	for k, v := range c.header {
		req.Header[k] = v
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET %s: status %d, type %q", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan [2]string, 100)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 16<<20)
		var name string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				select {
				case out <- [2]string{name, strings.TrimPrefix(line, "data: ")}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

// next waits for the next event of ch whose data contains want.
func next(t *testing.T, ch <-chan [2]string, name, want string) string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-ch:
			if ev[0] == name && strings.Contains(ev[1], want) {
				return ev[1]
			}
		case <-timeout:
			t.Fatalf("no %q event containing %q", name, want)
		}
	}
}

// TestLiveList: a command published after the list page was rendered arrives on its live
// stream as a row, and a row leaving the page's filter is removed.
func TestLiveList(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{Access: tokens})
	c := f.client("Authorization", "Bearer "+testReadToken)
	_, page := c.get("/ui/commands?status=running")
	live := regexp.MustCompile(`data-live="([^"]+)"`).FindStringSubmatch(page)
	if live == nil {
		t.Fatal("the list page names no live stream")
	}
	ch := sse(t, c, strings.ReplaceAll(live[1], "&amp;", "&"))
	f.publish("late-1", "vm.start", events.Step{Seq: 1, Step: "start_vm", Status: events.StepStarted, Attempt: 1})
	next(t, ch, "rows", `"id":"c-late-1","html"`)
	f.publish("late-1", "vm.start", events.Result{Status: 200, Result: "started"})
	next(t, ch, "rows", `{"id":"c-late-1","remove":true}`)
}

// TestLiveCommand: a running command's page streams its detail as it changes and ends the
// stream with "done" once the result is in.
func TestLiveCommand(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{Access: tokens})
	c := f.client("Authorization", "Bearer "+testReadToken)
	f.publish("run-1", "vm.start", events.Step{Seq: 1, Step: "start_vm", Status: events.StepStarted, Attempt: 1})
	deadline := time.Now().Add(10 * time.Second)
	for _, ok := f.c.ix.Get("run-1"); !ok && time.Now().Before(deadline); _, ok = f.c.ix.Get("run-1") {
		time.Sleep(5 * time.Millisecond)
	}
	_, page := c.get("/ui/commands/run-1")
	if !strings.Contains(page, `data-live="/ui/live/commands/run-1"`) {
		t.Fatal("a running command's page has no live stream")
	}
	ch := sse(t, c, "/ui/live/commands/run-1")
	next(t, ch, "html", "start_vm")
	f.publish("run-1", "vm.start", events.Step{Seq: 2, Step: "start_vm", Status: events.StepDone, Attempt: 1})
	f.publish("run-1", "vm.start", events.Result{Status: 200, Result: "started"})
	next(t, ch, "html", `id=\"result\"`)
	next(t, ch, "done", "")
	if _, page := c.get("/ui/commands/run-1"); strings.Contains(page, `data-live="/ui`) {
		t.Error("a finished command's page still listens for updates")
	}
}

// TestNeverShowsASecret: a configured secret that reached an event or a dead letter in a
// form no name-based redaction catches is still cut from every page and live update.
func TestNeverShowsASecret(t *testing.T) {
	t.Parallel()
	const canary = "CANARY-console-9f3b2e71"
	f := newFixture(t, Config{Access: tokens, Secrets: []string{canary}})
	f.publish("leaky", "vm.start", events.Step{Seq: 1, Step: "start_vm", Status: events.StepError, Attempt: 1, Detail: "GET https://pve:" + canary + "@pve1/ refused"})
	f.publish("leaky", "vm.start", events.Result{Status: 502, Result: "failed", Detail: "upstream said " + canary, Output: []byte(`{"note":"` + canary + `"}`)})
	f.held("leaky")
	seq := f.deadLetter(`{"id":"poison-1","note":"` + canary + `"}`)
	c := f.client("Authorization", "Bearer "+testOperatorToken)
	var all strings.Builder
	for _, p := range []string{"/ui/commands", "/ui/commands/leaky", "/ui/deadletters", "/ui/deadletters/" + itoa(seq), "/ui/deadletters/" + itoa(seq) + "/replay", "/ui/replicas", "/ui/proxmox"} {
		status, body := c.get(p)
		if status != http.StatusOK {
			t.Errorf("GET %s: status %d", p, status)
		}
		all.WriteString(body)
	}
	all.WriteString(next(t, sse(t, c, "/ui/live/commands"), "rows", "leaky"))
	all.WriteString(next(t, sse(t, c, "/ui/live/commands/leaky"), "html", "leaky"))
	if !strings.Contains(all.String(), "upstream said") || !strings.Contains(all.String(), "poison-1") {
		t.Fatal("the pages do not show the events: the scan would prove nothing")
	}
	if i := strings.Index(all.String(), canary); i >= 0 {
		t.Errorf("the secret is shown: …%s…", all.String()[max(0, i-80):i+len(canary)])
	}
}

// TestStorePages: pending journal repairs, approvals and schedules (with their next firing
// and a link to their last firing's command) are listed from the store.
func TestStorePages(t *testing.T) {
	t.Parallel()
	r := testenv.StartRedis(t)
	st, err := store.New(r.Client, store.Options{Prefix: r.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := st.SaveRepair(ctx, store.Repair{Command: store.CommandKey{Source: "/test", ID: "fix-me"}, EndpointID: 1, JournalID: 17,
		JournalURL: "http://netbox.example/api/extras/journal-entries/17/", Kind: "success", Verb: "vm.start", LastError: "NetBox answered 503"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RequestApproval(ctx, store.Approval{Command: store.CommandKey{Source: "/test", ID: "delete-me"}, Verb: "vm.delete",
		EndpointID: 1, Requester: "alice", Summary: "guest 100 on pve1"}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutSchedule(ctx, store.Schedule{Name: "nightly", Verb: "vm.backup", EndpointID: 1, Actor: "alice",
		Pattern: "0 0 2 * * *", TZ: "Europe/Berlin", Window: 15 * time.Minute, MadeAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	fired := time.Now().UTC().Truncate(time.Second)
	if err := st.RecordFiring(ctx, "nightly", "nightly."+fired.Format("20060102T150405Z"), fired, fired.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, Config{Access: tokens, Store: st})
	c := f.client("Authorization", "Bearer "+testReadToken)
	status, body := c.get("/ui/schedules")
	lastRef := events.Ref(events.ScheduleSource("nightly"), "nightly."+fired.Format("20060102T150405Z"))
	for _, want := range []string{"nightly", "0 0 2 * * *", "Europe/Berlin", "vm.backup", fmtTime(fired.Add(24 * time.Hour)), "/ui/commands/" + lastRef} {
		if status != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("schedules page: status %d, lacks %q", status, want)
		}
	}
	if status, body := c.get("/ui/repairs"); status != http.StatusOK || !strings.Contains(body, "fix-me") || !strings.Contains(body, "NetBox answered 503") {
		t.Errorf("repairs page: status %d, repair shown %v", status, strings.Contains(body, "fix-me"))
	}
	if status, body := c.get("/ui/approvals"); status != http.StatusOK || !strings.Contains(body, "delete-me") || !strings.Contains(body, "guest 100 on pve1") {
		t.Errorf("approvals page: status %d, approval shown %v", status, strings.Contains(body, "delete-me"))
	}
	noStore := newFixture(t, Config{Access: tokens})
	if status, _ := noStore.client("Authorization", "Bearer "+testReadToken).get("/ui/repairs"); status != http.StatusServiceUnavailable {
		t.Errorf("repairs without a store: status %d, want 503", status)
	}
}

// TestSecurityHeaders: every response, a refusal included, carries the strict CSP and is
// not to be cached or framed.
func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{Access: tokens})
	for _, c := range []*client{f.client(), f.client("Authorization", "Bearer "+testReadToken)} {
		for _, p := range []string{"/ui/commands", "/ui/login", "/ui/static/console.js"} {
			_, _, h := c.do(http.MethodGet, p, nil)
			if h.Get("Content-Security-Policy") != contentSecurityPolicy || h.Get("X-Frame-Options") != "DENY" || h.Get("Cache-Control") != "no-store" {
				t.Errorf("GET %s: headers %v", p, h)
			}
		}
	}
	if !strings.Contains(contentSecurityPolicy, "script-src 'self'") || strings.Contains(contentSecurityPolicy, "unsafe") {
		t.Errorf("the CSP is not strict: %s", contentSecurityPolicy)
	}
}

// TestAnonymousLoopback: with anonymous loopback access (dev) a request from loopback is an
// operator without a token; one from elsewhere still gets 401.
func TestAnonymousLoopback(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{Access: Access{AnonymousLoopback: true}})
	if status, body := f.client().get("/ui/commands"); status != http.StatusOK || !strings.Contains(body, "anonymous, loopback") {
		t.Errorf("from loopback: status %d", status)
	}
	r := httptest.NewRequest(http.MethodGet, "/ui/commands", nil)
	r.RemoteAddr = "198.51.100.7:40000"
	w := httptest.NewRecorder()
	f.c.Handler().ServeHTTP(w, r)
	if w.Code != http.StatusUnauthorized {
		t.Errorf("from elsewhere: status %d, want 401", w.Code)
	}
}

// TestNobodyGetsInWithoutATokenOrDev: a console with no token says how to configure one.
func TestNobodyGetsInWithoutATokenOrDev(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	status, body := f.client().get("/ui/commands")
	if status != http.StatusUnauthorized || !strings.Contains(body, "--ui-token-file") {
		t.Errorf("status %d; the page does not name --ui-token-file", status)
	}
}

// TestLongListIsStatic: a list of more than maxLiveRows rows is served without a live stream,
// saying so; a shorter one has one.
func TestLongListIsStatic(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{Access: tokens})
	c := f.client("Authorization", "Bearer "+testReadToken)
	if _, body := c.get("/ui/commands?limit=5000"); strings.Contains(body, `data-live="/ui`) || !strings.Contains(body, `id="static"`) {
		t.Error("a 5,000-row list updates live")
	}
	if _, body := c.get("/ui/commands?limit=1000"); !strings.Contains(body, `data-live="/ui/live/commands`) {
		t.Error("a 1,000-row list has no live stream")
	}
}

// TestListAndPageTellTheTruth: the list row names the command's target, its state as contract
// §4 names it and its whole reason; a rejected command no longer shows its approval wait;
// the journal link opens NetBox's page of the entry, not its API.
func TestListAndPageTellTheTruth(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{Access: tokens})
	f.publish("del-1", "vm.delete", events.Step{Seq: 1, Step: "approval", Status: events.StepWaiting, Detail: "awaiting approval", Attempt: 1})
	f.publish("del-1", "vm.delete", events.Result{Status: 403, Result: "refused", Reason: "approval_rejected",
		JournalEntryURL: "http://netbox.example/api/extras/journal-entries/7/", Output: []byte(`{"vmid":101,"name":"web1","node":"pve1"}`)})
	f.publish("gate-1", "vm.start", events.Result{Status: 403, Result: "refused", Reason: "endpoint_writes_disabled"})
	f.held("del-1")
	f.held("gate-1")
	c := f.client("Authorization", "Bearer "+testReadToken)
	status, list := c.get("/ui/commands")
	if status != http.StatusOK {
		t.Fatalf("list: status %d", status)
	}
	row := regexp.MustCompile(`(?s)<tr id="c-[^"]*del-1".*?</tr>`).FindString(list)
	for _, want := range []string{`data-state="rejected"`, `<td class="target">VM 101 (web1) on node pve1</td>`, `approval_rejected`} {
		if !strings.Contains(row, want) {
			t.Errorf("the rejected command's row lacks %s:\n%s", want, row)
		}
	}
	if strings.Contains(row, "approval waiting") || strings.Contains(row, "awaiting") {
		t.Errorf("the rejected command's row still shows its approval wait:\n%s", row)
	}
	if !strings.Contains(list, `<span class="reason">endpoint_writes_disabled</span>`) {
		t.Error("the list does not show the whole reason endpoint_writes_disabled")
	}
	if _, css := c.get("/ui/static/console.css"); !strings.Contains(css, "td.status, table.commands td.target { white-space: normal") {
		t.Error("the style sheet cuts the status or target cell")
	}
	status, page := c.get("/ui/commands/del-1")
	if !strings.Contains(page, `<dd id="target">VM 101 (web1) on node pve1</dd>`) {
		t.Error("the command's page does not name its target")
	}
	if status != http.StatusOK || !strings.Contains(page, `href="http://netbox.example/extras/journal-entries/7/"`) || strings.Contains(page, "/api/extras") {
		t.Errorf("command page: status %d, journal link to the page %v", status, strings.Contains(page, "netbox.example/extras/journal-entries/7/"))
	}
}

// TestDeadLetterDetail: a dead letter's page shows its reason, detail, original subject,
// headers and body, each escaped.
func TestDeadLetterDetail(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{Access: tokens})
	seq := f.deadLetter(`{"id":"poison-1","data":{"note":"<script>alert(1)</script>"}}`)
	c := f.client("Authorization", "Bearer "+testReadToken)
	status, list := c.get("/ui/deadletters")
	if status != http.StatusOK || !strings.Contains(list, `href="/ui/deadletters/`+itoa(seq)+`"`) || !strings.Contains(list, "not JSON") {
		t.Errorf("dead-letter list: status %d, links and shows the detail: %v", status, strings.Contains(list, "not JSON"))
	}
	status, page := c.get("/ui/deadletters/" + itoa(seq))
	if status != http.StatusOK {
		t.Fatalf("dead letter: status %d", status)
	}
	for _, want := range []string{
		`<dd id="dl-reason">` + deadletter.ReasonInvalidCommand + `</dd>`, `<dd id="dl-detail">not JSON</dd>`,
		`<code>` + f.s.Command("vm.start") + `</code>`, `<th>ce-id</th><td><code>poison-1</code>`, `&lt;script&gt;alert(1)&lt;/script&gt;`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the dead letter's page lacks %s", want)
		}
	}
	if strings.Contains(page, "<script>alert") {
		t.Error("the dead letter's body is not escaped")
	}
}

// decisionSent is the newest command published on subject of verb, decoded, or false.
func (f *fixture) decisionSent(verb string) (events.Command, bool) {
	f.t.Helper()
	ctx := context.Background()
	st, err := f.js.Stream(ctx, f.s.CommandsStream())
	if err != nil {
		f.t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(ctx, f.s.Command(verb))
	if err != nil {
		return events.Command{}, false
	}
	c, err := events.Decode(m.Subject, m.Header, m.Data, f.s)
	if err != nil {
		f.t.Fatalf("the console published an undecodable %s: %v", verb, err)
	}
	return c, true
}

// TestDecisionsFromTheConsole: an operator approves, rejects (with a reason) and cancels a
// command from its page, each through a confirmation form with the CSRF token, publishing
// command.approve, command.reject or command.cancel on the commands stream as the console's
// actor; a reader gets no button and 403; a rejection without a reason is not sent; an
// answered command offers no decision.
func TestDecisionsFromTheConsole(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{Access: tokens, Actor: "console:ops"})
	f.publish("del-1", "vm.delete", events.Step{Seq: 1, Step: "approval", Status: events.StepWaiting, Detail: "awaiting approval", Attempt: 1})
	f.waitFor("del-1", "awaiting approval", func(c Command) bool { return c.State() == handlers.StateAwaitingApproval })
	page := "/ui/commands/del-1"

	reader := f.client()
	reader.login(testReadToken)
	status, body := reader.get(page)
	if status != http.StatusOK || strings.Contains(body, `id="approve"`) || strings.Contains(body, `id="reject"`) || strings.Contains(body, `id="cancel"`) {
		t.Fatalf("command page as reader: status %d, offers a decision %v", status, strings.Contains(body, `class="decide"`))
	}
	for _, a := range []string{"approve", "reject", "cancel"} {
		if status, _ := reader.get(page + "/" + a); status != http.StatusForbidden {
			t.Errorf("%s page for a reader: status %d, want 403", a, status)
		}
		if status, _, _ := reader.do(http.MethodPost, page+"/"+a, url.Values{"csrf": {csrfOf(t, body)}, "reason": {"x"}}); status != http.StatusForbidden {
			t.Errorf("%s by a reader: status %d, want 403", a, status)
		}
	}

	op := f.client()
	op.login(testOperatorToken)
	status, body = op.get(page)
	for _, a := range []string{"approve", "reject", "cancel"} {
		if !strings.Contains(body, `id="`+a+`" href="/ui/commands/del-1/`+a+`"`) {
			t.Errorf("command page as operator (status %d): no %s button", status, a)
		}
	}
	if status, _, _ := op.do(http.MethodPost, page+"/approve", url.Values{}); status != http.StatusForbidden {
		t.Errorf("approve without a CSRF token: status %d, want 403", status)
	}
	if _, ok := f.decisionSent("command.approve"); ok {
		t.Fatal("a refused form published command.approve")
	}
	_, confirm := op.get(page + "/reject")
	if status, _, _ := op.do(http.MethodPost, page+"/reject", url.Values{"csrf": {csrfOf(t, confirm)}}); status != http.StatusBadRequest {
		t.Errorf("reject without a reason: status %d, want 400", status)
	}
	if _, ok := f.decisionSent("command.reject"); ok {
		t.Fatal("a rejection without a reason was published")
	}

	for _, tc := range []struct{ action, verb, reason string }{
		{"approve", "command.approve", ""},
		{"reject", "command.reject", "not <today>"},
		{"cancel", "command.cancel", "maintenance window\r\n  moved"},
	} {
		status, confirm := op.get(page + "/" + tc.action)
		if status != http.StatusOK || !strings.Contains(confirm, `id="confirm"`) || !strings.Contains(confirm, `name="reason"`) {
			t.Fatalf("%s confirmation: status %d", tc.action, status)
		}
		status, after, _ := op.do(http.MethodPost, page+"/"+tc.action, url.Values{"csrf": {csrfOf(t, confirm)}, "reason": {tc.reason}})
		if status != http.StatusOK || !strings.Contains(after, `id="sent"`) || !strings.Contains(after, tc.verb+" published") {
			t.Errorf("%s: status %d, says it was published: %v", tc.action, status, strings.Contains(after, `id="sent"`))
		}
		got, ok := f.decisionSent(tc.verb)
		if !ok {
			t.Fatalf("%s: nothing published on %s", tc.action, f.s.Command(tc.verb))
		}
		var in handlers.DecisionInput
		if err := json.Unmarshal(got.Data, &in); err != nil {
			t.Fatal(err)
		}
		want := handlers.DecisionInput{CommandID: "del-1", CommandSource: "/test", Reason: strings.Join(strings.Fields(tc.reason), " ")}
		if got.Actor != "console:ops" || got.Source != Source || in != want {
			t.Errorf("%s published as actor %q source %q with %+v", tc.action, got.Actor, got.Source, in)
		}
	}

	f.publish("del-1", "vm.delete", events.Result{Status: 403, Result: "refused", Reason: handlers.ReasonApprovalRejected})
	f.held("del-1")
	if _, body := op.get(page); strings.Contains(body, `class="decide"`) {
		t.Error("a rejected command still offers a decision")
	}
}

// TestDecisionNotPermitted: a decision the NATS server does not let the replica's user
// publish (deploy/nats/accounts.conf denies proxbus.cmd.command.> to user proxbus) is
// answered "Not sent" naming the subject and the fix, not reported as published.
func TestDecisionNotPermitted(t *testing.T) {
	t.Parallel()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true,
		Users: []*server.User{{Username: "proxbus", Password: "console-test-password", Permissions: &server.Permissions{
			Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"proxbus.cmd.command.>"}},
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start() // ended by Shutdown in the cleanup, which waits for it
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS server not ready")
	}
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("proxbus", "console-test-password"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureOn(t, js, Config{Access: tokens})
	f.c.publishWait = 2 * time.Second
	f.publish("del-1", "vm.delete", events.Step{Seq: 1, Step: "approval", Status: events.StepWaiting, Detail: "awaiting approval", Attempt: 1})
	f.waitFor("del-1", "awaiting approval", func(c Command) bool { return c.State() == handlers.StateAwaitingApproval })
	op := f.client()
	op.login(testOperatorToken)
	_, confirm := op.get("/ui/commands/del-1/approve")
	status, body, _ := op.do(http.MethodPost, "/ui/commands/del-1/approve", url.Values{"csrf": {csrfOf(t, confirm)}})
	if status != http.StatusBadGateway || !strings.Contains(body, "may not publish") || !strings.Contains(body, "proxbus.cmd.command.approve") || strings.Contains(body, `id="sent"`) {
		t.Errorf("a refused publish: status %d, says not permitted %v", status, strings.Contains(body, "may not publish"))
	}
}
