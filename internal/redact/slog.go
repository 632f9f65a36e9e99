package redact

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
)

// Handler is a slog.Handler that redacts, before the wrapped handler sees them, every attribute
// whose key is secret-named ([IsSecretName]) and every string attribute that contains one of the
// known secret values. It is installed at the edge, around the terminal handler, so no code path
// can log a secret by naming it.
type Handler struct {
	next    slog.Handler
	secrets []string
	more    func() []string // secrets learnt while running; nil: none
}

// NewHandler wraps next. secrets are literal values (token secrets read from the endpoints
// file) that must never appear in any attribute or message.
func NewHandler(next slog.Handler, secrets ...string) *Handler {
	return &Handler{next: next, secrets: secrets}
}

// NewHandlerFunc is [NewHandler] with more secrets that change while the program runs (token
// secrets of endpoints read from NetBox): more is called for every record, and must be safe
// for concurrent use.
func NewHandlerFunc(next slog.Handler, more func() []string, secrets ...string) *Handler {
	return &Handler{next: next, secrets: secrets, more: more}
}

// known is every secret to cut out now.
func (h *Handler) known() []string {
	if h.more == nil {
		return h.secrets
	}
	return append(append([]string(nil), h.secrets...), h.more()...)
}

// Enabled reports whether the wrapped handler handles records at level.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle redacts the record's message and attributes and passes it on.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	secrets := h.known()
	out := slog.NewRecord(r.Time, r.Level, Values(r.Message, secrets...), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a, secrets))
		return true
	})
	return h.next.Handle(ctx, out)
}

// WithAttrs returns a handler whose preset attributes are redacted.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	secrets := h.known()
	red := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		red[i] = redactAttr(a, secrets)
	}
	return &Handler{next: h.next.WithAttrs(red), secrets: h.secrets, more: h.more}
}

// WithGroup returns a handler that nests later attributes in a group.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), secrets: h.secrets, more: h.more}
}

// redactAttr is a with secret-named keys and the values of secrets redacted.
func redactAttr(a slog.Attr, secrets []string) slog.Attr {
	if IsSecretName(a.Key) {
		return slog.String(a.Key, Placeholder)
	}
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindGroup:
		group := v.Group()
		red := make([]any, len(group))
		for i, g := range group {
			red[i] = redactAttr(g, secrets)
		}
		return slog.Group(a.Key, red...)
	case slog.KindString:
		return slog.String(a.Key, Values(v.String(), secrets...))
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, Values(x.Error(), secrets...))
		case []byte: // json.RawMessage too: logged as text, redacted by name and by value
			return slog.String(a.Key, Values(string(JSON(x)), secrets...))
		case json.RawMessage:
			return slog.String(a.Key, Values(string(JSON(x)), secrets...))
		}
		// Arbitrary values are flattened to text so a secret inside a struct is still cut out.
		return slog.String(a.Key, Values(fmt.Sprintf("%+v", v.Any()), secrets...))
	default:
		return slog.Attr{Key: a.Key, Value: v}
	}
}
