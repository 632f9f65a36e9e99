package ingress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/config"
)

// ErrRender is wrapped when a matching rule's templates cannot be rendered for a webhook (a
// missing key, a value of the wrong kind); the webhook is answered 422.
var ErrRender = errors.New("ingress: rule template failed")

// Rules maps plain NetBox webhook bodies to commands. Rules are tried in file order and the
// first that matches wins; see docs/ingress.md for the file format. A Rules value is
// immutable and safe for concurrent use.
type Rules struct{ rules []*rule }

// Mapped is the command a rule made of a webhook.
type Mapped struct {
	// Rule is the name of the rule that matched.
	Rule string
	Verb string
	// EndpointID is valid when HasEndpointID.
	EndpointID     int64
	HasEndpointID  bool
	Actor          string
	IdempotencyKey string
	// Data is the rendered command data (a JSON object), nil when the rule has none.
	Data json.RawMessage
}

type rule struct {
	name       string
	events     []string
	objectType string
	when       []condition
	verb       string
	endpoint   node // nil: no endpointid
	actor      node // nil: default actor
	idemKey    node // nil: none
	data       node // nil: no data
}

type ruleSpec struct {
	Name           string           `yaml:"name"`
	Events         []string         `yaml:"events"`
	ObjectType     string           `yaml:"object_type"`
	When           []map[string]any `yaml:"when"`
	Verb           string           `yaml:"verb"`
	Endpoint       any              `yaml:"endpoint"`
	Actor          string           `yaml:"actor"`
	IdempotencyKey string           `yaml:"idempotency_key"`
	Data           any              `yaml:"data"`
}

var ruleNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// LoadRules reads and parses a rules file (see [ParseRules]). A file that cannot be read is
// an error wrapping config.ErrInvalid too.
func LoadRules(path string) (*Rules, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ingress: rules file: %w: %w", config.ErrInvalid, err)
	}
	return ParseRules(data)
}

// ParseRules parses a YAML rules file: {rules: [{name, events?, object_type?, when?, verb,
// endpoint?, actor?, idempotency_key?, data?}]}. Unknown keys, duplicate or malformed names,
// invalid verbs, conditions without exactly one operator and templates that do not parse are
// errors wrapping config.ErrInvalid that name the rule.
func ParseRules(data []byte) (*Rules, error) {
	var f struct {
		Rules []ruleSpec `yaml:"rules"`
	}
	if err := config.UnmarshalYAMLStrict(data, &f); err != nil {
		return nil, fmt.Errorf("ingress: rules file: %w", err)
	}
	out := &Rules{}
	seen := map[string]bool{}
	for i, spec := range f.Rules {
		r, err := compileRule(spec)
		if err != nil {
			return nil, fmt.Errorf("ingress: rules file: %w: rule %d (%s): %w", config.ErrInvalid, i+1, spec.Name, err)
		}
		if seen[r.name] {
			return nil, fmt.Errorf("ingress: rules file: %w: rule %d: duplicate name %q", config.ErrInvalid, i+1, r.name)
		}
		seen[r.name] = true
		out.rules = append(out.rules, r)
	}
	return out, nil
}

// list returns the compiled rules (none for a nil Rules).
func (rs *Rules) list() []*rule {
	if rs == nil {
		return nil
	}
	return rs.rules
}

// Len is the number of rules.
func (rs *Rules) Len() int {
	if rs == nil {
		return 0
	}
	return len(rs.rules)
}

// Map returns the command the first matching rule makes of w; ok is false when no rule
// matches. A matching rule whose templates fail returns an error wrapping ErrRender that names
// the rule and the field, never a value, with m.Rule set.
func (rs *Rules) Map(w Webhook) (m Mapped, ok bool, err error) {
	if rs == nil {
		return Mapped{}, false, nil
	}
	for _, r := range rs.rules {
		if !r.matches(w) {
			continue
		}
		m, err := r.render(w)
		return m, true, err
	}
	return Mapped{}, false, nil
}

func compileRule(spec ruleSpec) (*rule, error) {
	if !ruleNamePattern.MatchString(spec.Name) {
		return nil, errors.New("name must be 1-64 of [A-Za-z0-9_.-], starting with a letter or digit")
	}
	r := &rule{name: spec.Name, objectType: strings.ToLower(spec.ObjectType), verb: spec.Verb}
	if _, ok := events.NewSubjects("").VerbOf(events.NewSubjects("").Command(spec.Verb)); !ok {
		return nil, errors.New("verb is missing or not a valid subject token sequence")
	}
	if strings.HasPrefix(spec.Verb, CommandVerbPrefix) {
		return nil, fmt.Errorf("verb %s: %w: command.* verbs (approvals, rejections) are never made from a webhook", spec.Verb, ErrVerbNotAllowed)
	}
	if r.objectType != "" && !strings.Contains(r.objectType, ".") {
		return nil, errors.New(`object_type must be "app_label.model", e.g. virtualization.virtualmachine`)
	}
	for _, e := range spec.Events {
		if e == "" {
			return nil, errors.New("events has an empty entry")
		}
		r.events = append(r.events, normalizeEvent(e))
	}
	for i, c := range spec.When {
		cond, err := compileCondition(c)
		if err != nil {
			return nil, fmt.Errorf("when[%d]: %w", i, err)
		}
		r.when = append(r.when, cond)
	}
	var err error
	switch ep := spec.Endpoint.(type) {
	case nil:
	case string:
		if r.endpoint, err = compileString(r.name, "endpoint", ep); err != nil {
			return nil, err
		}
	default:
		n, ok := positiveInt(ep)
		if !ok {
			return nil, errors.New("endpoint must be a positive integer or a template")
		}
		r.endpoint = literal{v: json.Number(strconv.FormatInt(n, 10))}
	}
	if spec.Actor != "" {
		if r.actor, err = compileString(r.name, "actor", spec.Actor); err != nil {
			return nil, err
		}
	}
	if spec.IdempotencyKey != "" {
		if r.idemKey, err = compileString(r.name, "idempotency_key", spec.IdempotencyKey); err != nil {
			return nil, err
		}
	}
	if spec.Data != nil {
		if _, ok := spec.Data.(map[string]any); !ok {
			return nil, errors.New("data must be a mapping")
		}
		if r.data, err = compileNode(r.name, "data", spec.Data); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *rule) matches(w Webhook) bool {
	if len(r.events) > 0 && !slices.Contains(r.events, w.Event) {
		return false
	}
	if r.objectType != "" && !w.matchesObjectType(r.objectType) {
		return false
	}
	for _, c := range r.when {
		if !c.holds(w.Context) {
			return false
		}
	}
	return true
}

func (r *rule) render(w Webhook) (Mapped, error) {
	m := Mapped{Rule: r.name, Verb: r.verb}
	fail := func(field string, err error) (Mapped, error) {
		return Mapped{Rule: r.name}, fmt.Errorf("%w: rule %s, %s: %w", ErrRender, r.name, field, err)
	}
	if r.endpoint != nil {
		v, err := r.endpoint.render(w.Context)
		if err != nil {
			return fail("endpoint", err)
		}
		if s, ok := v.(string); !ok || s != "" {
			n, ok := positiveInt(v)
			if !ok {
				return fail("endpoint", errors.New("not a positive integer"))
			}
			m.EndpointID, m.HasEndpointID = n, true
		}
	}
	if r.actor != nil {
		v, err := r.actor.render(w.Context)
		if err != nil {
			return fail("actor", err)
		}
		m.Actor = textOf(v)
	} else {
		m.Actor = "netbox"
		if w.Username != "" {
			m.Actor = "netbox:" + w.Username
		}
	}
	if r.idemKey != nil {
		v, err := r.idemKey.render(w.Context)
		if err != nil {
			return fail("idempotency_key", err)
		}
		m.IdempotencyKey = textOf(v)
	}
	if r.data != nil {
		v, err := r.data.render(w.Context)
		if err != nil {
			return fail("data", err)
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return fail("data", err)
		}
		m.Data = raw
	}
	return m, nil
}

// node is a compiled piece of a rule: a literal, a template, or a mapping/list of nodes.
type node interface {
	render(ctx map[string]any) (any, error)
}

type literal struct{ v any }

func (l literal) render(map[string]any) (any, error) { return l.v, nil }

type mapNode struct {
	keys []string
	vals []node
}

func (m mapNode) render(ctx map[string]any) (any, error) {
	out := make(map[string]any, len(m.keys))
	for i, k := range m.keys {
		v, err := m.vals[i].render(ctx)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

type listNode []node

func (l listNode) render(ctx map[string]any) (any, error) {
	out := make([]any, len(l))
	for i, n := range l {
		v, err := n.render(ctx)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// textTmpl renders a template to a string.
type textTmpl struct{ t *template.Template }

// noValue is what text/template prints for a nil value.
const noValue = "<no value>"

func (t textTmpl) render(ctx map[string]any) (any, error) {
	var b bytes.Buffer
	if err := t.t.Execute(&b, ctx); err != nil {
		return nil, err
	}
	if strings.Contains(b.String(), noValue) {
		return nil, fmt.Errorf("template %q renders no value", t.t.Name())
	}
	return b.String(), nil
}

// typedTmpl renders a template that is exactly one action and keeps the value's JSON type
// (a number stays a number, an object an object).
type typedTmpl struct{ t *template.Template }

func (t typedTmpl) render(ctx map[string]any) (any, error) {
	var b bytes.Buffer
	if err := t.t.Execute(&b, ctx); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(&b)
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("template %q: %w", t.t.Name(), err)
	}
	if v == nil {
		return nil, fmt.Errorf("template %q renders no value", t.t.Name())
	}
	return v, nil
}

var singleAction = regexp.MustCompile(`(?s)^\{\{-?\s*(.+?)\s*-?\}\}$`)

// funcs are the template functions beyond text/template's builtins.
var funcs = template.FuncMap{
	"toJSON": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
	"lower": strings.ToLower,
	"upper": strings.ToUpper,
	"trim":  strings.TrimSpace,
}

func newTemplate(name string) *template.Template {
	return template.New(name).Option("missingkey=error").Funcs(funcs)
}

// compileString compiles a string leaf: a plain string is a literal; a string that is exactly
// one {{ action }} keeps its value's type; any other template renders to a string.
func compileString(ruleName, path, s string) (node, error) {
	if !strings.Contains(s, "{{") {
		return literal{v: s}, nil
	}
	name := ruleName + ": " + path
	if m := singleAction.FindStringSubmatch(s); m != nil && !strings.Contains(m[1], "{{") && !strings.Contains(m[1], "}}") {
		if t, err := newTemplate(name).Parse("{{ (" + m[1] + ") | toJSON }}"); err == nil {
			return typedTmpl{t: t}, nil
		}
	}
	t, err := newTemplate(name).Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return textTmpl{t: t}, nil
}

func compileNode(ruleName, path string, v any) (node, error) {
	switch v := v.(type) {
	case string:
		return compileString(ruleName, path, v)
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		m := mapNode{keys: keys}
		for _, k := range keys {
			n, err := compileNode(ruleName, path+"."+k, v[k])
			if err != nil {
				return nil, err
			}
			m.vals = append(m.vals, n)
		}
		return m, nil
	case []any:
		l := make(listNode, len(v))
		for i, item := range v {
			n, err := compileNode(ruleName, fmt.Sprintf("%s[%d]", path, i), item)
			if err != nil {
				return nil, err
			}
			l[i] = n
		}
		return l, nil
	case nil, bool, int, int64, uint64, float64:
		return literal{v: v}, nil
	default:
		return nil, fmt.Errorf("%s: unsupported YAML value of type %T (keys must be strings)", path, v)
	}
}

// condition is one entry of a rule's `when`: a dot path into the webhook context and one
// operator.
type condition struct {
	path   []string
	op     string
	values []any
	exists bool
}

var conditionOps = []string{"equals", "not_equals", "in", "exists"}

func compileCondition(c map[string]any) (condition, error) {
	path, _ := c["path"].(string)
	if path == "" {
		return condition{}, errors.New("path is required")
	}
	cond := condition{path: strings.Split(path, ".")}
	for k := range c {
		if k != "path" && !slices.Contains(conditionOps, k) {
			return condition{}, fmt.Errorf("unknown key %q (want path and one of %s)", k, strings.Join(conditionOps, ", "))
		}
	}
	n := 0
	for _, op := range conditionOps {
		v, ok := c[op]
		if !ok {
			continue
		}
		n++
		cond.op = op
		switch op {
		case "equals", "not_equals":
			cond.values = []any{v}
		case "in":
			list, ok := v.([]any)
			if !ok || len(list) == 0 {
				return condition{}, errors.New("in must be a non-empty list")
			}
			cond.values = list
		case "exists":
			b, ok := v.(bool)
			if !ok {
				return condition{}, errors.New("exists must be true or false")
			}
			cond.exists = b
		}
	}
	if n != 1 {
		return condition{}, fmt.Errorf("exactly one of %s is required", strings.Join(conditionOps, ", "))
	}
	return cond, nil
}

func (c condition) holds(ctx map[string]any) bool {
	v, found := lookup(ctx, c.path)
	switch c.op {
	case "exists":
		return (found && v != nil) == c.exists
	case "not_equals":
		return !found || !sameValue(v, c.values[0])
	default: // equals, in
		if !found {
			return false
		}
		return slices.ContainsFunc(c.values, func(want any) bool { return sameValue(v, want) })
	}
}

// lookup follows a dot path through maps and lists (numeric segments index lists).
func lookup(v any, path []string) (any, bool) {
	for _, seg := range path {
		switch cur := v.(type) {
		case map[string]any:
			next, ok := cur[seg]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(cur) {
				return nil, false
			}
			v = cur[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// sameValue compares a webhook value with a rules-file value: numbers by value, strings and
// booleans exactly, null with null, anything else by its JSON encoding.
func sameValue(a, b any) bool {
	ka, va := canonical(a)
	kb, vb := canonical(b)
	return ka == kb && va == vb
}

func canonical(v any) (kind, text string) {
	switch v := v.(type) {
	case nil:
		return "null", ""
	case bool:
		return "bool", strconv.FormatBool(v)
	case string:
		return "string", v
	case json.Number:
		return numberText(v.String())
	case int, int64, uint64, float64:
		return numberText(fmt.Sprint(v))
	}
	raw, _ := json.Marshal(v)
	return "json", string(raw)
}

func numberText(s string) (string, string) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return "number", s
	}
	return "number", strconv.FormatFloat(f, 'g', -1, 64)
}

// positiveInt reads a positive integer from a YAML or JSON value or a decimal string.
func positiveInt(v any) (int64, bool) {
	var s string
	switch v := v.(type) {
	case string:
		s = strings.TrimSpace(v)
	case json.Number:
		s = v.String()
	case int:
		s = strconv.Itoa(v)
	case int64:
		s = strconv.FormatInt(v, 10)
	case uint64:
		s = strconv.FormatUint(v, 10)
	default:
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}

// textOf renders a rendered value as text (a typed template may have produced a number).
func textOf(v any) string {
	if s := scalarText(v); s != "" {
		return s
	}
	switch v.(type) {
	case nil, string:
		return ""
	}
	raw, _ := json.Marshal(v)
	return string(raw)
}
