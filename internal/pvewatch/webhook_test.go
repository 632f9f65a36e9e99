package pvewatch

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/redact"
)

// TestWebhook pins the answers of POST /webhooks/proxmox: what is refused (and with which
// status and hint) publishes nothing; a notification is published once per request on its
// endpoint's subject.
func TestWebhook(t *testing.T) {
	t.Parallel()
	const body = `{"severity":"warning","title":"t","message":"m","fields":{"type":"vzdump"}}`
	tests := []struct {
		name, secret, query, body string
		fail                      error
		want                      int
		hint                      string
	}{
		{"published", "s3cret", "endpoint_id=2", body, nil, http.StatusAccepted, ""},
		{"no secret", "", "endpoint_id=2", body, nil, http.StatusUnauthorized, SecretHeader},
		{"wrong secret", "s3creT", "endpoint_id=2", body, nil, http.StatusUnauthorized, SecretHeader},
		{"no endpoint", "s3cret", "", body, nil, http.StatusBadRequest, "endpoint_id"},
		{"unknown endpoint", "s3cret", "endpoint_id=9", body, nil, http.StatusNotFound, "endpoint_id 9"},
		{"not the template's body", "s3cret", "endpoint_id=2", `{"text":"x"}`, nil, http.StatusBadRequest, "docs/operations.md"},
		{"stream down", "s3cret", "endpoint_id=2", body, errors.New("no responders"), http.StatusServiceUnavailable, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []*nats.Msg
			h := &Webhook{Secret: "s3cret", Endpoints: []int64{1, 2}, Emitter: events.NewEmitter(events.NewSubjects(""), "r1"),
				Publish: func(_ context.Context, m *nats.Msg) error { got = append(got, m); return tt.fail }}
			req := httptest.NewRequest(http.MethodPost, WebhookPath+"?"+tt.query, strings.NewReader(tt.body))
			if tt.secret != "" {
				req.Header.Set(SecretHeader, tt.secret)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.want || !strings.Contains(rec.Body.String(), tt.hint) {
				t.Errorf("%d %q, want %d naming %q", rec.Code, rec.Body.String(), tt.want, tt.hint)
			}
			wantPublished := tt.want == http.StatusAccepted || tt.fail != nil
			if (len(got) == 1) != wantPublished || len(got) > 1 {
				t.Fatalf("%d publications", len(got))
			}
			if len(got) == 1 && got[0].Subject != "proxbus.evt.pve.2.notification" {
				t.Errorf("subject %s", got[0].Subject)
			}
		})
	}
}

// FuzzWebhook feeds the Proxmox webhook route any body and query: it never panics, answers
// only the statuses it documents, publishes nothing without the right secret, publishes at
// most one notification, and a secret-named value of the body never reaches the message.
func FuzzWebhook(f *testing.F) {
	f.Add("s3cret", "endpoint_id=2", `{"severity":"warning","title":"t","message":"m","fields":{"type":"vzdump"}}`)
	f.Add("s3cret", "endpoint_id=1", `{"severity":"info","title":"","message":"","fields":{"password":"canary-1"}}`)
	f.Add("", "endpoint_id=2", `{}`)
	f.Add("s3cret", "endpoint_id=x", `[`)
	f.Add("s3cret", "endpoint_id=2&endpoint_id=3", `{"severity":"error","title":"t\n- injected: x","message":"m"}`)
	f.Fuzz(func(t *testing.T, secret, query, body string) {
		var got []*nats.Msg
		h := &Webhook{Secret: "s3cret", Endpoints: []int64{1, 2}, Emitter: events.NewEmitter(events.NewSubjects(""), "r1"),
			Publish: func(_ context.Context, m *nats.Msg) error { got = append(got, m); return nil }}
		req := httptest.NewRequest(http.MethodPost, WebhookPath, strings.NewReader(body))
		req.URL.RawQuery = query
		if secret != "" {
			req.Header.Set(SecretHeader, secret)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusAccepted, http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		if len(got) > 1 || (len(got) == 1) != (rec.Code == http.StatusAccepted) {
			t.Fatalf("%d publications for status %d", len(got), rec.Code)
		}
		if secret != "s3cret" && len(got) > 0 {
			t.Fatal("published without the secret")
		}
		if len(got) == 1 {
			var ev struct {
				Data struct {
					Fields map[string]any `json:"fields"`
				} `json:"data"`
			}
			if err := json.Unmarshal(got[0].Data, &ev); err != nil {
				t.Fatalf("published %s: %v", got[0].Data, err)
			}
			if path := secretValue(ev.Data.Fields, "fields"); path != "" {
				t.Fatalf("the secret-named field %s reached the bus: %s", path, got[0].Data)
			}
		}
	})
}

// secretValue is the path of a secret-named member of v whose value is not redacted ("" when
// none).
func secretValue(v any, path string) string {
	switch t := v.(type) {
	case map[string]any:
		for k, sub := range t {
			if redact.IsSecretName(k) && sub != redact.Placeholder {
				return path + "." + k
			}
			if p := secretValue(sub, path+"."+k); p != "" {
				return p
			}
		}
	case []any:
		for _, sub := range t {
			if p := secretValue(sub, path); p != "" {
				return p
			}
		}
	}
	return ""
}
