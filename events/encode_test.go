package events

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/internal/testenv"
)

func roundTripCommands() map[string]Command {
	return map[string]Command{
		"full": {
			ID: "cmd-1", Source: "/netbox/webhook/7", Verb: "storage.pbs.create",
			Time: time.Date(2026, 11, 29, 17, 0, 0, 5, time.UTC), Subject: `pbs "backup" é`,
			EndpointID: 7, HasEndpointID: true, IdempotencyKey: `k 100% "x"`, Actor: "Zoë « admin »",
			TraceParent: testTraceParent, Expires: time.Date(2026, 11, 29, 17, 15, 0, 0, time.UTC), DryRun: true,
			Data: json.RawMessage(`{"storage":"pbs1","port":8007}`),
		},
		"minimal": {ID: "x", Source: "urn:proxbus:cli", Verb: "vm.list"},
		"hashed id and big endpoint": {
			ID: "id with spaces/and.dots", Source: "urn:proxbus:cli", Verb: "vm.start",
			EndpointID: 1 << 40, HasEndpointID: true, Data: json.RawMessage(`[1,2]`),
		},
	}
}

// TestEncodeDecodeRoundTrip pins that Encode→Decode is lossless in both modes and that the
// messages carry the subject, Nats-Msg-Id and Content-Type the contract requires.
func TestEncodeDecodeRoundTrip(t *testing.T) {
	t.Parallel()
	encoders := []struct {
		mode   Mode
		encode func(Subjects, Command) (*nats.Msg, error)
		ct     string
	}{
		{ModeBinary, EncodeBinary, ContentTypeJSON},
		{ModeStructured, EncodeStructured, ContentTypeCE},
	}
	for name, c := range roundTripCommands() {
		for _, enc := range encoders {
			t.Run(name+"/"+enc.mode.String(), func(t *testing.T) {
				t.Parallel()
				msg, err := enc.encode(testSubjects, c)
				if err != nil {
					t.Fatalf("encode: %v", err)
				}
				if msg.Subject != testSubjects.Command(c.Verb) {
					t.Errorf("subject = %q", msg.Subject)
				}
				if got := msg.Header.Get(HeaderMsgID); got != c.ID {
					t.Errorf("Nats-Msg-Id = %q, want %q", got, c.ID)
				}
				if got := msg.Header.Get(HeaderContentType); got != enc.ct {
					t.Errorf("Content-Type = %q, want %q", got, enc.ct)
				}
				got, err := Decode(msg.Subject, msg.Header, msg.Data, testSubjects)
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				want := c
				want.Type = TypePrefix + c.Verb
				want.Mode = enc.mode
				sameCommand(t, got, want)
			})
		}
	}
}

// TestEncodeBinaryPercentEncodes pins that binary headers are percent-encoded on output.
func TestEncodeBinaryPercentEncodes(t *testing.T) {
	t.Parallel()
	msg, err := EncodeBinary(testSubjects, roundTripCommands()["full"])
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"ce-specversion":    "1.0",
		"ce-type":           "proxbus.storage.pbs.create",
		"ce-subject":        "pbs%20%22backup%22%20%C3%A9",
		"ce-idempotencykey": "k%20100%25%20%22x%22",
		"ce-actor":          "Zo%C3%AB%20%C2%AB%20admin%20%C2%BB",
		"ce-endpointid":     "7",
		"ce-time":           "2026-11-29T17:00:00.000000005Z",
		"ce-traceparent":    testTraceParent,
	}
	for k, v := range want {
		if got := msg.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
}

// TestEncodeStructuredJSON pins the structured body: CloudEvents JSON with endpointid as a
// number when it fits a CloudEvents Integer and as a string otherwise.
func TestEncodeStructuredJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		c    Command
		want string
	}{
		{"small endpointid", roundTripCommands()["full"], `7`},
		{"big endpointid", roundTripCommands()["hashed id and big endpoint"], `"1099511627776"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			msg, err := EncodeStructured(testSubjects, tc.c)
			if err != nil {
				t.Fatal(err)
			}
			var body map[string]json.RawMessage
			if err := json.Unmarshal(msg.Data, &body); err != nil {
				t.Fatal(err)
			}
			if string(body["endpointid"]) != tc.want {
				t.Errorf("endpointid = %s, want %s", body["endpointid"], tc.want)
			}
			if string(body["specversion"]) != `"1.0"` || string(body["id"]) != `"`+tc.c.ID+`"` {
				t.Errorf("body = %s", msg.Data)
			}
			if !jsonEqual(t, body["data"], tc.c.Data) {
				t.Errorf("data = %s, want %s", body["data"], tc.c.Data)
			}
		})
	}
}

// TestEncodeRejects pins that the encoders refuse what Decode would refuse.
func TestEncodeRejects(t *testing.T) {
	t.Parallel()
	base := Command{ID: "x", Source: "urn:proxbus:cli", Verb: "vm.list"}
	tests := []struct {
		name   string
		mutate func(c *Command)
	}{
		{"no id", func(c *Command) { c.ID = "" }},
		{"id with newline", func(c *Command) { c.ID = "a\nb" }},
		{"no source", func(c *Command) { c.Source = "" }},
		{"no verb", func(c *Command) { c.Verb = "" }},
		{"wildcard verb", func(c *Command) { c.Verb = "vm.*" }},
		{"type mismatch", func(c *Command) { c.Type = "proxbus.vm.start" }},
		{"endpointid zero", func(c *Command) { c.HasEndpointID = true }},
		{"idempotency key too long", func(c *Command) { c.IdempotencyKey = strings.Repeat("k", 256) }},
		{"bad traceparent", func(c *Command) { c.TraceParent = "nope" }},
		{"data not JSON", func(c *Command) { c.Data = json.RawMessage(`{`) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := base
			tc.mutate(&c)
			for _, enc := range []func(Subjects, Command) (*nats.Msg, error){EncodeBinary, EncodeStructured} {
				if msg, err := enc(testSubjects, c); !errors.Is(err, ErrEncode) {
					t.Errorf("encode = %v, %v; want ErrEncode", msg, err)
				}
			}
		})
	}
	c := base
	c.Verb, c.Type = "", "proxbus.vm.list"
	if msg, err := EncodeBinary(testSubjects, c); err != nil || msg.Subject != "proxbus.cmd.vm.list" {
		t.Errorf("verb from type: %v, %v", msg, err)
	}
}

// TestHeadersSurviveTheWire publishes encoded commands through a real NATS server and decodes
// what a subscriber receives, so header casing and percent-encoding are proven end to end.
func TestHeadersSurviveTheWire(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	sub, err := n.Conn.SubscribeSync(testSubjects.CommandsFilter())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	c := roundTripCommands()["full"]
	for _, enc := range []func(Subjects, Command) (*nats.Msg, error){EncodeBinary, EncodeStructured} {
		msg, err := enc(testSubjects, c)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Conn.PublishMsg(msg); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	for _, mode := range []Mode{ModeBinary, ModeStructured} {
		got, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got.Header.Get(HeaderMsgID) != c.ID {
			t.Errorf("%s: Nats-Msg-Id = %q", mode, got.Header.Get(HeaderMsgID))
		}
		dec, err := Decode(got.Subject, got.Header, got.Data, testSubjects)
		if err != nil {
			t.Fatalf("%s: decode after the wire: %v", mode, err)
		}
		want := c
		want.Type, want.Mode = TypePrefix+c.Verb, mode
		sameCommand(t, dec, want)
	}
}
