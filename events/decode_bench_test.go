package events

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// benchCommand is a typical command as proxbus's publishers (ingress, `proxbus send`, the
// benchmark harness) send it: time, endpoint, idempotency key, actor, traceparent and a small
// JSON object as data.
func benchCommand(source string) Command {
	return Command{
		ID: "cli-0123456789abcdef01234567", Source: source, Verb: "storage.pbs.create",
		Time:       time.Date(2026, 11, 29, 17, 0, 0, 123456789, time.UTC),
		EndpointID: 1, HasEndpointID: true, IdempotencyKey: "key-run1-42", Actor: "bench",
		TraceParent: testTraceParent,
		Data: json.RawMessage(`{"storage":"brun1-42","server":"pbs.example.net","datastore":"store1",` +
			`"username":"backup@pbs!proxbus","password":"bench-secret","fingerprint":"AB:CD:EF:01:23:45"}`),
	}
}

// BenchmarkDecode measures Decode of a valid command in the forms proxbus's own encoders
// produce: binary mode (the common case) and structured mode.
func BenchmarkDecode(b *testing.B) {
	type msg struct {
		subject string
		header  nats.Header
		body    []byte
	}
	build := func(b *testing.B, encode func(Subjects, Command) (*nats.Msg, error), source string) msg {
		b.Helper()
		m, err := encode(testSubjects, benchCommand(source))
		if err != nil {
			b.Fatalf("encode: %v", err)
		}
		return msg{m.Subject, m.Header, m.Data}
	}
	cases := []struct {
		name   string
		encode func(Subjects, Command) (*nats.Msg, error)
		source string
	}{
		{"binary", EncodeBinary, "/bench"},
		{"structured", EncodeStructured, "/bench"},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			m := build(b, tc.encode, tc.source)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode(m.subject, m.header, m.body, testSubjects); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
