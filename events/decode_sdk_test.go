package events

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	cejs "github.com/cloudevents/sdk-go/protocol/nats_jetstream/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
)

// sdkMessage returns the headers and body the CloudEvents Go SDK's JetStream binding
// (protocol/nats_jetstream/v2, the writer its Sender uses) produces for ev in the given mode.
func sdkMessage(t *testing.T, ev event.Event, mode Mode) (nats.Header, []byte) {
	t.Helper()
	ctx := binding.WithForceBinary(context.Background())
	if mode == ModeStructured {
		ctx = binding.WithForceStructured(context.Background())
	}
	var body bytes.Buffer
	h, err := cejs.WriteMsg(ctx, binding.ToMessage(&ev), &body)
	if err != nil {
		t.Fatalf("SDK WriteMsg: %v", err)
	}
	return h, body.Bytes()
}

// TestDecodeSDKMessages pins that what the CloudEvents Go SDK's JetStream binding sends, in
// both modes, decodes to the command the producer meant, and pins how the SDK sends it: in
// structured mode no header at all (no Content-Type, so contract §2's header-less rule is what
// makes it structured), in binary mode ce-* headers with values not percent-encoded and
// ce-datacontenttype instead of Content-Type; neither mode sets Nats-Msg-Id.
func TestDecodeSDKMessages(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 29, 17, 0, 0, 123456789, time.UTC)
	newEvent := func(t *testing.T, mutate func(t *testing.T, ev *event.Event)) event.Event {
		t.Helper()
		ev := event.New(event.CloudEventsVersionV1)
		ev.SetID("sdk-1")
		ev.SetSource("/netbox/webhook/7")
		ev.SetType("proxbus.vm.start")
		if err := ev.SetData(event.ApplicationJSON, map[string]any{"vm": "web1"}); err != nil {
			t.Fatalf("SetData: %v", err)
		}
		if mutate != nil {
			mutate(t, &ev)
		}
		if err := ev.Validate(); err != nil {
			t.Fatalf("test event invalid: %v", err)
		}
		return ev
	}
	base := Command{ID: "sdk-1", Source: "/netbox/webhook/7", Type: "proxbus.vm.start", Verb: "vm.start", Data: json.RawMessage(`{"vm":"web1"}`)}
	full := base
	full.Time, full.Subject, full.EndpointID, full.HasEndpointID = at, "vm 100", 7, true
	full.IdempotencyKey, full.Actor, full.TraceParent = "key-1 x", "José Ortiz", testTraceParent
	full.Expires, full.DryRun = at.Add(15*time.Minute), true

	tests := []struct {
		name   string
		mutate func(t *testing.T, ev *event.Event)
		want   Command // Mode is set per mode
		// binaryReason and structuredReason, when set, are the poison reason in that mode.
		binaryReason, structuredReason string
	}{
		{name: "minimal", want: base},
		{
			name: "every attribute proxbus reads",
			mutate: func(_ *testing.T, ev *event.Event) {
				ev.SetTime(at)
				ev.SetSubject("vm 100")
				ev.SetExtension(AttrEndpointID, 7)
				ev.SetExtension(AttrIdempotencyKey, "key-1 x")
				ev.SetExtension(AttrActor, "José Ortiz")
				ev.SetExtension(AttrTraceParent, testTraceParent)
				ev.SetExtension(AttrExpires, at.Add(15*time.Minute))
				ev.SetExtension(AttrDryRun, true)
			},
			want: full,
		},
		{
			name:   "endpointid as a string extension",
			mutate: func(_ *testing.T, ev *event.Event) { ev.SetExtension(AttrEndpointID, "7") },
			want:   Command{ID: "sdk-1", Source: "/netbox/webhook/7", Type: "proxbus.vm.start", Verb: "vm.start", EndpointID: 7, HasEndpointID: true, Data: json.RawMessage(`{"vm":"web1"}`)},
		},
		{
			name: "no data",
			mutate: func(_ *testing.T, ev *event.Event) {
				ev.DataEncoded = nil
				ev.SetDataContentType("")
			},
			want: Command{ID: "sdk-1", Source: "/netbox/webhook/7", Type: "proxbus.vm.start", Verb: "vm.start"},
		},
		{
			// The SDK's binary writer sends values as they are; a '%' that does not start an
			// escape makes the attribute unreadable, which is the binding's defect, not ours.
			name:         "a percent sign in a binary value",
			mutate:       func(_ *testing.T, ev *event.Event) { ev.SetExtension(AttrActor, "100% sure") },
			want:         Command{ID: "sdk-1", Source: "/netbox/webhook/7", Type: "proxbus.vm.start", Verb: "vm.start", Actor: "100% sure", Data: json.RawMessage(`{"vm":"web1"}`)},
			binaryReason: "actor" + reasonPercentSuffix,
		},
		{
			// SetData with a []byte marks the data binary (DataBase64): in structured mode the
			// SDK writes data_base64, which is not JSON data (contract §7). Producers pass a
			// value or a json.RawMessage.
			name: "data given as []byte",
			mutate: func(t *testing.T, ev *event.Event) {
				if err := ev.SetData(event.ApplicationJSON, []byte(`{"vm":"web1"}`)); err != nil {
					t.Fatalf("SetData: %v", err)
				}
			},
			want:             base,
			structuredReason: reasonDataBase64,
		},
		{
			name: "data given as json.RawMessage",
			mutate: func(t *testing.T, ev *event.Event) {
				if err := ev.SetData(event.ApplicationJSON, json.RawMessage(`{"vm":"web1"}`)); err != nil {
					t.Fatalf("SetData: %v", err)
				}
			},
			want: base,
		},
	}
	for _, tc := range tests {
		for _, mode := range []Mode{ModeBinary, ModeStructured} {
			t.Run(tc.name+"/"+mode.String(), func(t *testing.T) {
				t.Parallel()
				h, body := sdkMessage(t, newEvent(t, tc.mutate), mode)
				switch mode {
				case ModeStructured:
					if len(h) != 0 {
						t.Errorf("the SDK now sends structured events with headers %v: revisit contract §2's header-less rule", h)
					}
				case ModeBinary:
					if _, ok := h[HeaderContentType]; ok || h.Get(HeaderPrefix+AttrSpecVersion) != specVersion {
						t.Errorf("SDK binary headers %v: expected ce-specversion and no Content-Type", h)
					}
				}
				if h.Get(HeaderMsgID) != "" {
					t.Errorf("the SDK now sets %s: %v", HeaderMsgID, h)
				}
				c, err := Decode(testSubjects.Command("vm.start"), h, body, testSubjects)
				reason := tc.binaryReason
				if mode == ModeStructured {
					reason = tc.structuredReason
				}
				if reason != "" {
					var p *PoisonError
					if !errors.As(err, &p) || p.Reason != reason {
						t.Fatalf("Decode = %+v, %v; want poison %q", c, err, reason)
					}
					return
				}
				if err != nil {
					t.Fatalf("Decode: %v (headers %v, body %s)", err, h, body)
				}
				want := tc.want
				want.Mode = mode
				sameCommand(t, c, want)
			})
		}
	}
}
