package ingress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrNotWebhook is returned by [ParseWebhook] when a body is not a NetBox webhook body.
var ErrNotWebhook = errors.New("ingress: not a NetBox webhook body")

// Webhook is a NetBox webhook body, normalised across NetBox 4.2 to 4.7:
//
//   - 4.2, 4.3: event, timestamp, model (bare model name), username, request_id, data,
//     snapshots;
//   - 4.4: object_type ("app_label.model") added beside model;
//   - 4.5: model removed;
//   - 4.6: a request object ({id, method, path, user}) added beside the deprecated username
//     and request_id;
//   - 4.7: username and request_id removed (request.id, request.user remain).
//
// Events may also be spelled as event types (object_created, ...) by a body template; they
// are normalised to created, updated and deleted.
type Webhook struct {
	// Event is created, updated, deleted, or another NetBox event type as sent.
	Event string
	// Timestamp is the event's time as NetBox wrote it.
	Timestamp string
	// ObjectType is "app_label.model" (NetBox 4.4+); "" when the body has only model.
	ObjectType string
	// Model is the bare model name: the body's model, or the part of ObjectType after the dot.
	Model string
	// ObjectID is data.id as text; "" when absent.
	ObjectID string
	// RequestID is request.id or request_id; "" when absent (changes made outside a request).
	RequestID string
	// Username is request.user or username; "" when absent.
	Username string
	// Context is the body as a template context, with event, object_type, model, object_id,
	// request_id, username, timestamp, data and snapshots always present (normalised).
	Context map[string]any
}

// ParseWebhook decodes a plain NetBox webhook body. It returns an error wrapping
// ErrNotWebhook when the body is not a JSON object with an event and a data object. Numbers are
// kept as json.Number, so ids and custom field values keep their exact text.
func ParseWebhook(body []byte) (Webhook, error) {
	var ctx map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&ctx); err != nil || ctx == nil {
		return Webhook{}, fmt.Errorf("%w: not a JSON object", ErrNotWebhook)
	}
	if dec.More() {
		return Webhook{}, fmt.Errorf("%w: trailing data after the JSON object", ErrNotWebhook)
	}
	w := Webhook{Context: ctx}
	event, _ := ctx["event"].(string)
	if event == "" {
		return Webhook{}, fmt.Errorf("%w: no event", ErrNotWebhook)
	}
	w.Event = normalizeEvent(event)
	data, ok := ctx["data"].(map[string]any)
	if !ok {
		return Webhook{}, fmt.Errorf("%w: no data object", ErrNotWebhook)
	}
	w.Timestamp = scalarText(ctx["timestamp"])
	w.ObjectType, _ = ctx["object_type"].(string)
	w.Model, _ = ctx["model"].(string)
	if w.Model == "" {
		if _, model, ok := strings.Cut(w.ObjectType, "."); ok {
			w.Model = model
		}
	}
	w.ObjectID = scalarText(data["id"])
	if req, ok := ctx["request"].(map[string]any); ok {
		w.RequestID = scalarText(req["id"])
		w.Username = scalarText(req["user"])
	}
	if w.RequestID == "" {
		w.RequestID = scalarText(ctx["request_id"])
	}
	if w.Username == "" {
		w.Username = scalarText(ctx["username"])
	}
	ctx["event"] = w.Event
	ctx["timestamp"] = w.Timestamp
	ctx["object_type"] = w.ObjectType
	ctx["model"] = w.Model
	ctx["object_id"] = w.ObjectID
	ctx["request_id"] = w.RequestID
	ctx["username"] = w.Username
	if _, ok := ctx["snapshots"]; !ok {
		ctx["snapshots"] = nil
	}
	return w, nil
}

// normalizeEvent maps NetBox event types to the webhook event words.
func normalizeEvent(e string) string {
	switch e {
	case "object_created", "create":
		return "created"
	case "object_updated", "update":
		return "updated"
	case "object_deleted", "delete":
		return "deleted"
	}
	return e
}

// scalarText renders a JSON scalar (string, json.Number, bool) as text; "" for anything else.
func scalarText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	case bool:
		if v {
			return "true"
		}
		return "false"
	}
	return ""
}

// matchesObjectType reports whether the webhook is about objectType ("app_label.model"):
// by object_type when the body has it (4.4+), else by the bare model name (4.2, 4.3).
func (w Webhook) matchesObjectType(objectType string) bool {
	if w.ObjectType != "" {
		return strings.EqualFold(w.ObjectType, objectType)
	}
	_, model, ok := strings.Cut(objectType, ".")
	if !ok {
		model = objectType
	}
	return w.Model != "" && strings.EqualFold(w.Model, model)
}
