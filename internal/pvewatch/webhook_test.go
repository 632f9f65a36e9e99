package pvewatch

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/events"
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
