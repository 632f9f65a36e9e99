package pvewatch

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/redact"
)

// WebhookPath is where PVE's webhook notification target posts.
const WebhookPath = "/webhooks/proxmox"

// SecretHeader carries the shared secret (--pve-webhook-secret) in every request of the
// target; set it in the target's headers as {{ secrets.proxbus }}.
const SecretHeader = "X-Proxbus-Secret"

// maxBody bounds a notification's body.
const maxBody = 1 << 20

// Webhook is the handler of POST /webhooks/proxmox?endpoint_id=N: a Proxmox VE notification
// sent by a webhook target (PVE 8.3+) with the body
//
//	{"severity": "{{ severity }}", "title": "{{ escape title }}",
//	 "message": "{{ escape message }}", "fields": {{ json fields }}}
//
// is published as a notification event of endpoint N. The secret header is compared in
// constant time; a missing or wrong one is 401, an unknown endpoint 404, a body that is not
// such an object 400 (each with a message naming what to fix); a publication that failed is
// 503, so PVE's next notification is not lost with it; success is 202.
type Webhook struct {
	// Secret is the value SecretHeader must carry; the handler refuses every request when it
	// is empty.
	Secret string
	// Endpoints are the ids of the configured endpoints.
	Endpoints []int64
	Emitter   events.Emitter
	Publish   Publish
	Logger    *slog.Logger
}

// ServeHTTP answers one notification.
func (h *Webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	got, want := sha256.Sum256([]byte(r.Header.Get(SecretHeader))), sha256.Sum256([]byte(h.Secret))
	if h.Secret == "" || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		http.Error(w, "missing or wrong "+SecretHeader+" header: set it in the webhook target's headers to the value of --pve-webhook-secret", http.StatusUnauthorized)
		return
	}
	ep, err := strconv.ParseInt(r.URL.Query().Get(endpointParam), 10, 64)
	if err != nil {
		http.Error(w, "query parameter "+endpointParam+" must be the endpoint's id (the NetBox ProxmoxEndpoint id): add ?"+endpointParam+"=N to the target's URL", http.StatusBadRequest)
		return
	}
	if !slices.Contains(h.Endpoints, ep) {
		http.Error(w, endpointParam+" "+formatID(ep)+" is not a configured endpoint: use the id of an endpoint in the endpoints file", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		http.Error(w, "the body could not be read or is larger than 1 MiB", http.StatusBadRequest)
		return
	}
	var n struct {
		Severity *string        `json:"severity"`
		Title    *string        `json:"title"`
		Message  string         `json:"message"`
		Fields   map[string]any `json:"fields"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&n); err != nil || n.Severity == nil || n.Title == nil {
		http.Error(w, "the body must be a JSON object with severity, title, message and fields: set the target's body to the template in docs/operations.md", http.StatusBadRequest)
		return
	}
	if n.Fields == nil {
		n.Fields = map[string]any{}
	}
	scrubFields(n.Fields) // contract §8: a secret-named value never reaches the bus
	m, err := h.Emitter.PVEEvent(events.PVENotification{EndpointID: ep, Severity: *n.Severity, Title: *n.Title,
		Message: n.Message, Fields: n.Fields, Body: body})
	if err == nil {
		err = h.Publish(r.Context(), m)
	}
	if err != nil {
		if h.Logger != nil {
			h.Logger.Warn("Proxmox notification not published", "endpoint_id", ep, "err", err)
		}
		status := http.StatusServiceUnavailable
		if errors.Is(err, events.ErrEncode) {
			status = http.StatusBadRequest
		}
		http.Error(w, "the notification could not be published: "+http.StatusText(status), status)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// scrubFields replaces, in a notification's fields and everything nested in them, the value of
// every secret-named member (password, secret, token) with redact.Placeholder.
func scrubFields(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, sub := range t {
			if redact.IsSecretName(k) {
				t[k] = redact.Placeholder
				continue
			}
			scrubFields(sub)
		}
	case []any:
		for _, sub := range t {
			scrubFields(sub)
		}
	}
}
