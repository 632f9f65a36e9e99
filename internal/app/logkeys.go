package app

import (
	"context"
	"log/slog"
	"slices"
)

// uniqueKeys is a handler whose top-level attributes have unique keys: an attribute added
// with WithAttrs replaces an earlier one of the same key (a sub-component's "component"
// replaces its parent's, so a repairer line says "repairer" once, not "pipeline" and then
// "repairer"), and a record's attribute replaces a preset one. Attributes inside a group
// are passed through unchanged.
type uniqueKeys struct {
	base    slog.Handler // the wrapped handler before any preset attribute
	preset  []slog.Attr  // top-level attributes, unique by key, in the order first added
	next    slog.Handler // base.WithAttrs(preset), or a grouped handler once a group is open
	grouped bool
}

// newUniqueKeys wraps h in a [uniqueKeys].
func newUniqueKeys(h slog.Handler) *uniqueKeys { return &uniqueKeys{base: h, next: h} }

func (h *uniqueKeys) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *uniqueKeys) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	if h.grouped {
		return &uniqueKeys{next: h.next.WithAttrs(attrs), grouped: true}
	}
	preset := slices.Clone(h.preset)
	for _, a := range attrs {
		i := slices.IndexFunc(preset, func(p slog.Attr) bool { return a.Key != "" && p.Key == a.Key })
		if i >= 0 {
			preset[i] = a
		} else {
			preset = append(preset, a)
		}
	}
	return &uniqueKeys{base: h.base, preset: preset, next: h.base.WithAttrs(preset)}
}

func (h *uniqueKeys) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &uniqueKeys{next: h.next.WithGroup(name), grouped: true}
}

func (h *uniqueKeys) Handle(ctx context.Context, r slog.Record) error {
	if h.grouped || len(h.preset) == 0 {
		return h.next.Handle(ctx, r)
	}
	var overridden []string
	r.Attrs(func(a slog.Attr) bool {
		if slices.ContainsFunc(h.preset, func(p slog.Attr) bool { return p.Key == a.Key }) {
			overridden = append(overridden, a.Key)
		}
		return true
	})
	if len(overridden) == 0 {
		return h.next.Handle(ctx, r)
	}
	keep := slices.DeleteFunc(slices.Clone(h.preset), func(p slog.Attr) bool { return slices.Contains(overridden, p.Key) })
	return h.base.WithAttrs(keep).Handle(ctx, r)
}
