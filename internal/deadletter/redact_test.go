package deadletter

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/events"
)

// TestRedactBody: every way a secret can sit in a body is scrubbed, the rest kept.
func TestRedactBody(t *testing.T) {
	t.Parallel()
	const secret = "S3CR3T-value"
	inner := []byte(`{"token":"` + secret + `","vm":"keep1","pad":"??>"}`) // "??>" encodes with + and / (- and _ URL-safe)
	b64 := base64.StdEncoding.EncodeToString(inner)
	unpadded := inner[:len(inner)/3*3-2] // a length that padding would round up
	b64Raw := base64.RawStdEncoding.EncodeToString(unpadded)
	b64URL := base64.URLEncoding.EncodeToString(inner)
	b64RawURL := base64.RawURLEncoding.EncodeToString(unpadded)
	tests := []struct {
		name string
		in   string
		keep string
	}{
		{"flat json", `{"password":"` + secret + `","storage":"keep1"}`, "keep1"},
		{"nested json", `{"data":{"cloud_init":{"password":"` + secret + `"},"name":"keep1"}}`, "keep1"},
		{"json inside a string", `{"note":"{\"token_secret\":\"` + secret + `\",\"a\":\"keep1\"}"}`, "keep1"},
		{"free text inside a string", `{"note":"password=` + secret + ` keep1"}`, "keep1"},
		{"data_base64", `{"id":"keep1","data_base64":"` + b64 + `"}`, "keep1"},
		{"not json", `server=keep1 password=` + secret, "keep1"},
		{"array", `[{"secret":"` + secret + `"},"keep1"]`, "keep1"},
		{"data_base64 unpadded", `{"id":"keep1","data_base64":"` + b64Raw + `"}`, "keep1"},
		{"data_base64 URL-safe", `{"id":"keep1","data_base64":"` + b64URL + `"}`, "keep1"},
		{"data_base64 URL-safe unpadded", `{"id":"keep1","data_base64":"` + b64RawURL + `"}`, "keep1"},
		{"data_base64 not base64", `{"id":"keep1","data_base64":"` + secret + `!"}`, "keep1"},
		{"escaped name in invalid json", `{"pass\u0077ord":"` + secret + `","storage":"keep1"`, "keep1"},
		{"escaped name in invalid json, upper-case hex", `{"TOK\u0045N": "` + secret + `", "storage":"keep1"`, "keep1"},
		{"secret in a key name", `{"password=` + secret + `":1,"storage":"keep1"}`, "keep1"},
		{"secret in a nested key name", `{"data":{"token: ` + secret + `":true},"storage":"keep1"}`, "keep1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := string(redactBody([]byte(tt.in)))
			if strings.Contains(out, secret) {
				t.Errorf("secret left in %s", out)
			}
			for _, enc := range []string{b64, b64Raw, b64URL, b64RawURL} {
				if strings.Contains(out, enc) {
					t.Errorf("data_base64 not redacted: %s", out)
				}
			}
			if !strings.Contains(out, tt.keep) {
				t.Errorf("lost %q: %s", tt.keep, out)
			}
		})
	}
}

// TestRedactHeader: secret-named headers are replaced, JetStream control headers dropped
// (the original message id kept apart), others kept.
func TestRedactHeader(t *testing.T) {
	t.Parallel()
	h := nats.Header{}
	h.Set("ce-id", "c1")
	h.Set("Authorization-Token", "tok")
	h.Set("X-Note", "password=hunter22")
	h.Set("Nats-Msg-Id", "c1")
	h.Set("Nats-Expected-Stream", "PROXBUS_COMMANDS")
	h["X-Password=hunter22"] = []string{"v"}
	h.Set("X-Escaped", `{"pass\u0077ord":"hunter22"`)
	out := redactHeader(h)
	for k, vs := range out {
		if strings.Contains(k+strings.Join(vs, ""), "hunter22") {
			t.Errorf("header %s: %q keeps the secret", k, vs)
		}
	}
	tests := []struct{ key, want string }{
		{"ce-id", "c1"},
		{"Authorization-Token", "[redacted]"},
		{"X-Note", "password=[redacted]"},
		{"Nats-Msg-Id", ""},
		{"Nats-Expected-Stream", ""},
		{HeaderDLQMsgID, "c1"},
	}
	for _, tt := range tests {
		if got := out.Get(tt.key); got != tt.want {
			t.Errorf("%s = %q, want %q", tt.key, got, tt.want)
		}
	}
}

// TestBuildDeadLetterTruncatesToMaxPayload: a copy that would not fit the server's max
// payload is cut and marked, so the dead letter can still be stored.
func TestBuildDeadLetterTruncatesToMaxPayload(t *testing.T) {
	t.Parallel()
	s := events.NewSubjects("proxbus")
	o := Original{Subject: "proxbus.cmd.vm.start", Header: nats.Header{}, Data: []byte(strings.Repeat("x", 10000)), StreamSeq: 7, Deliveries: 2}
	tests := []struct {
		name       string
		maxPayload int64
		truncated  bool
	}{
		{"unknown limit", 0, false},
		{"fits", 1 << 20, false},
		{"too big", 8000, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := Build(s, o, "", "max_deliveries", "", time.Unix(0, 0), tt.maxPayload)
			if m.Subject != "proxbus.dlq.unknown" || m.Header.Get("Nats-Msg-Id") != "dlq-7" || m.Header.Get(HeaderDLQDeliveries) != "2" {
				t.Errorf("copy = %s %v", m.Subject, m.Header)
			}
			if got := m.Header.Get(HeaderDLQTruncated) == "true"; got != tt.truncated {
				t.Errorf("truncated = %v, want %v", got, tt.truncated)
			}
			if tt.maxPayload > 0 && int64(len(m.Data)+headerSize(m.Header)) > tt.maxPayload {
				t.Errorf("copy of %d bytes exceeds %d", len(m.Data)+headerSize(m.Header), tt.maxPayload)
			}
		})
	}
}
