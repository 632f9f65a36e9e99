package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cejs "github.com/cloudevents/sdk-go/protocol/nats_jetstream/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/events"
)

// natsCLIVersion is the natscli release the nats CLI subtests were written against; it is
// only named in the skip message (the test never installs anything).
const natsCLIVersion = "v0.5.0"

// producer publishes cmd the way one real producer does.
type producer func(t *testing.T, e *env, cmd events.Command)

// TestProducers pins contract §2 against real producers rather than proxbus's own encoders:
// the CloudEvents Go SDK's JetStream binding (protocol/nats_jetstream/v2) in binary and in
// structured mode, and the nats CLI (`nats pub --jetstream` with headers) in both modes. Each
// publishes a read (vm.snapshot.list) and a write (vm.start or vm.stop) on the demo cluster
// and must get the proper first-hand result, with the attributes the producer set (endpoint,
// actor) honoured. The messages are also tapped on the wire, so a change in how the SDK sends
// events (no headers at all in structured mode, no Content-Type and no Nats-Msg-Id in binary
// mode) is noticed here.
func TestProducers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// The replica provisions the streams first: the SDK's sender adds a stream of its own
	// (named like the one it is given, with subjects "<stream>.*") when it cannot read it.
	e.start()
	cli, why := natsCLI()

	tests := []struct {
		name    string
		publish producer
		skip    string
		// wire checks the message as the producer put it on the command subject.
		wire func(t *testing.T, cmd events.Command, m *nats.Msg)
		// The write: verb on guest vmid, which must then have status guestStatus.
		verb        string
		vmid        int64
		guestStatus string
	}{
		{
			name: "sdk binary", publish: sdkProducer(binding.WithForceBinary),
			wire: func(t *testing.T, cmd events.Command, m *nats.Msg) {
				t.Helper()
				if m.Header.Get("ce-specversion") != "1.0" || m.Header.Get("ce-id") != cmd.ID || m.Header.Get("ce-endpointid") != "1" {
					t.Errorf("SDK binary headers %v: want ce-specversion, ce-id and ce-endpointid", m.Header)
				}
				if _, ok := m.Header[events.HeaderContentType]; ok || m.Header.Get("ce-datacontenttype") != "application/json" {
					t.Errorf("SDK binary headers %v: the SDK used to send ce-datacontenttype and no Content-Type", m.Header)
				}
				if got := m.Header.Get("ce-actor"); got != cmd.Actor {
					t.Errorf("SDK binary ce-actor %q, want %q sent as it is (not percent-encoded)", got, cmd.Actor)
				}
				if m.Header.Get(events.HeaderMsgID) != "" {
					t.Errorf("the SDK now sets %s: %v", events.HeaderMsgID, m.Header)
				}
			},
			verb: "vm.start", vmid: 101, guestStatus: "running",
		},
		{
			name: "sdk structured", publish: sdkProducer(binding.WithForceStructured),
			wire: func(t *testing.T, cmd events.Command, m *nats.Msg) {
				t.Helper()
				if len(m.Header) != 0 {
					t.Errorf("the SDK now sends structured events with headers %v: revisit contract §2's header-less rule", m.Header)
				}
				var ev map[string]any
				if err := json.Unmarshal(m.Data, &ev); err != nil || ev["specversion"] != "1.0" || ev["id"] != cmd.ID || ev["endpointid"] != 1.0 {
					t.Errorf("SDK structured body %s", m.Data)
				}
			},
			verb: "vm.stop", vmid: 104, guestStatus: "stopped",
		},
		{
			name: "nats cli binary", publish: cliProducer(cli, events.ModeBinary), skip: why,
			wire: func(t *testing.T, cmd events.Command, m *nats.Msg) {
				t.Helper()
				if m.Header.Get(events.HeaderMsgID) != cmd.ID || m.Header.Get("ce-actor") != "Jos%C3%A9,%20nats%20cli%20binary" {
					t.Errorf("nats CLI headers %v: want Nats-Msg-Id and the percent-encoded actor", m.Header)
				}
			},
			verb: "vm.start", vmid: 201, guestStatus: "running",
		},
		{
			name: "nats cli structured", publish: cliProducer(cli, events.ModeStructured), skip: why,
			wire: func(t *testing.T, cmd events.Command, m *nats.Msg) {
				t.Helper()
				if m.Header.Get(events.HeaderContentType) != events.ContentTypeCE || m.Header.Get(events.HeaderMsgID) != cmd.ID {
					t.Errorf("nats CLI headers %v", m.Header)
				}
			},
			verb: "vm.stop", vmid: 202, guestStatus: "stopped",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.skip != "" {
				t.Skip(tc.skip)
			}
			// A command publishes as tc.name's producer does, is seen on the wire, and gets
			// its result.
			send := func(cmd events.Command) events.Result {
				t.Helper()
				next := tapCommands(t, e, cmd.Verb)
				tc.publish(t, e, cmd)
				tc.wire(t, cmd, next())
				res := e.result(cmd)
				if res.CommandID != cmd.ID || res.CommandSource != cmd.Source || res.Verb != cmd.Verb || res.Replayed {
					t.Errorf("result %+v is not the first-hand result of %s", res, cmd.ID)
				}
				if res.EndpointID == nil || *res.EndpointID != cmd.EndpointID {
					t.Errorf("result endpoint_id %v, want %d", res.EndpointID, cmd.EndpointID)
				}
				return res
			}

			read := e.guestCommand("vm.snapshot.list", `{"vm":"200"}`)
			read.Actor = "José, " + tc.name
			res := send(read)
			if res.Status != 200 || res.Result != "ok" {
				t.Fatalf("vm.snapshot.list: %d %s %q (%s)", res.Status, res.Result, res.Reason, res.Detail)
			}
			var out struct {
				Snapshots []struct{ Name string } `json:"snapshots"`
			}
			if err := json.Unmarshal(res.Output, &out); err != nil {
				t.Fatalf("vm.snapshot.list output %s: %v", res.Output, err)
			}
			var names []string
			for _, s := range out.Snapshots {
				names = append(names, s.Name)
			}
			slices.Sort(names)
			if !slices.Equal(names, []string{"base", "before-update", "experiment"}) {
				t.Errorf("snapshots of 200: %v", names)
			}

			write := e.guestCommand(tc.verb, fmt.Sprintf(`{"vm":%d}`, tc.vmid))
			write.Actor = "José, " + tc.name
			res = send(write)
			if res.Status != 200 || res.Result != "ok" {
				t.Fatalf("%s %d: %d %s %q (%s)", tc.verb, tc.vmid, res.Status, res.Result, res.Reason, res.Detail)
			}
			wantGuestStatus(tc.vmid, tc.guestStatus)(t, e, res)
			journaled := false
			for _, je := range e.netbox.JournalEntries() {
				if strings.Contains(je.Comments, "- command_id: "+write.ID+"\n") {
					journaled = true
					if !strings.Contains(je.Comments, "- actor: "+write.Actor+"\n") {
						t.Errorf("journal entry of %s does not name the actor %q:\n%s", write.ID, write.Actor, je.Comments)
					}
				}
			}
			if !journaled {
				t.Errorf("no journal entry for %s", write.ID)
			}
		})
	}
}

// tapCommands subscribes (core NATS) to the command subject of verb and returns a function
// that waits for the next message published on it, as its producer sent it.
func tapCommands(t *testing.T, e *env, verb string) func() *nats.Msg {
	t.Helper()
	sub, err := e.nats.Conn.SubscribeSync(e.subjects.Command(verb))
	if err != nil {
		t.Fatalf("tap %s: %v", verb, err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := e.nats.Conn.Flush(); err != nil {
		t.Fatalf("tap flush: %v", err)
	}
	return func() *nats.Msg {
		t.Helper()
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("no message on %s: %v", sub.Subject, err)
		}
		return m
	}
}

// sdkProducer publishes with the CloudEvents Go SDK: the JetStream binding's Sender (one per
// command subject, as the binding fixes the subject) sends the event, in the content mode
// that force selects (binding.WithForceBinary or binding.WithForceStructured). The event
// carries the command's id, source, type, the time, endpointid and actor extensions and its
// data as application/json. It does what the SDK's client.Send does (validate, then
// Sender.Send of the event message) without the client package, whose logger dependency
// (go.uber.org/zap) is not in go.sum.
func sdkProducer(force func(context.Context) context.Context) producer {
	return func(t *testing.T, e *env, cmd events.Command) {
		t.Helper()
		sender, err := cejs.NewSenderFromConn(e.nats.Conn, e.subjects.CommandsStream(), e.subjects.Command(cmd.Verb), nil)
		if err != nil {
			t.Fatalf("SDK sender: %v", err)
		}
		t.Cleanup(func() { _ = sender.Close(context.Background()) })
		ev := event.New(event.CloudEventsVersionV1)
		ev.SetID(cmd.ID)
		ev.SetSource(cmd.Source)
		ev.SetType(cmd.Type)
		ev.SetTime(time.Now())
		ev.SetExtension(events.AttrEndpointID, cmd.EndpointID)
		ev.SetExtension(events.AttrActor, cmd.Actor)
		// json.RawMessage, not []byte: the SDK marks []byte data as binary (DataBase64), so a
		// structured event would carry data_base64, which proxbus refuses (contract §7).
		if err := ev.SetData(event.ApplicationJSON, cmd.Data); err != nil {
			t.Fatalf("SDK data: %v", err)
		}
		if err := ev.Validate(); err != nil {
			t.Fatalf("SDK event: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := sender.Send(force(ctx), binding.ToMessage(&ev)); err != nil {
			t.Fatalf("SDK send: %v", err)
		}
	}
}

// cliProducer publishes with `nats pub --jetstream`, as an operator would type it: in binary
// mode ce-* headers (values percent-encoded), Content-Type application/json and the data as
// the body; in structured mode the JSON event with Content-Type
// application/cloudevents+json. Both set Nats-Msg-Id to the id, as contract §2 asks.
func cliProducer(cli string, mode events.Mode) producer {
	return func(t *testing.T, e *env, cmd events.Command) {
		t.Helper()
		args := []string{"--server", e.nats.URL, "pub", "--jetstream", "--no-templates",
			"-H", events.HeaderMsgID + ":" + cmd.ID}
		var body []byte
		switch mode {
		case events.ModeBinary:
			for _, h := range [][2]string{
				{"ce-specversion", "1.0"}, {"ce-id", cmd.ID}, {"ce-source", cmd.Source}, {"ce-type", cmd.Type},
				{"ce-endpointid", strconv.FormatInt(cmd.EndpointID, 10)},
				{"ce-actor", strings.NewReplacer(" ", "%20", "é", "%C3%A9").Replace(cmd.Actor)},
				{"Content-Type", events.ContentTypeJSON},
			} {
				args = append(args, "-H", h[0]+":"+h[1])
			}
			body = cmd.Data
		case events.ModeStructured:
			args = append(args, "-H", events.HeaderContentType+":"+events.ContentTypeCE)
			var err error
			body, err = json.Marshal(map[string]any{
				"specversion": "1.0", "id": cmd.ID, "source": cmd.Source, "type": cmd.Type,
				"time": time.Now().UTC().Format(time.RFC3339Nano), "endpointid": cmd.EndpointID,
				"actor": cmd.Actor, "datacontenttype": events.ContentTypeJSON, "data": cmd.Data,
			})
			if err != nil {
				t.Fatalf("structured event: %v", err)
			}
		}
		args = append(args, e.subjects.Command(cmd.Verb), string(body))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c := exec.CommandContext(ctx, cli, args...)
		// No user's nats contexts: a home of its own.
		home := t.TempDir()
		c.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home)
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("nats %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// natsCLI returns the path of a nats CLI: $PROXBUS_NATS_CLI, else `nats` on PATH, else the one
// `go install github.com/nats-io/natscli/nats@<version>` leaves in $GOBIN or $GOPATH/bin.
// When there is none it returns "" and the reason to skip.
func natsCLI() (path, why string) {
	if p := os.Getenv("PROXBUS_NATS_CLI"); p != "" {
		return p, ""
	}
	if p, err := exec.LookPath("nats"); err == nil {
		return p, ""
	}
	dirs := []string{os.Getenv("GOBIN")}
	for _, gp := range filepath.SplitList(build.Default.GOPATH) {
		dirs = append(dirs, filepath.Join(gp, "bin"))
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		p := filepath.Join(d, "nats")
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, ""
		}
	}
	return "", "no nats CLI: not in $PROXBUS_NATS_CLI, on PATH, in $GOBIN or $GOPATH/bin " +
		"(go install github.com/nats-io/natscli/nats@" + natsCLIVersion + " provides one)"
}
