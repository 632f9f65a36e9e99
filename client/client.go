package client

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
)

// DefaultSource is the CloudEvents source of the commands a [Client] sends unless
// [WithSource] or [Command].Source names another.
const DefaultSource = "urn:proxbus:client"

// Result is a command's result event (contract §3).
type Result = events.Result

// Step is one step event of a command (contract §3).
type Step = events.Step

// Client sends commands to proxbus and follows them. Create it with [New].
type Client struct {
	js       jetstream.JetStream
	subjects events.Subjects
	source   string
	actor    string
	newID    func() string
	now      func() time.Time
	retry    bool
	// hooks change each outgoing command after it is built and before it is encoded, in
	// their stage order (see hook).
	hooks []hook
}

// hook is one change applied to every outgoing command before it is published: sealing its
// secret fields, signing it. Hooks run by stage, then in the order their options were given,
// so a signature always covers what the earlier stages made.
type hook struct {
	stage int
	fn    func(*events.Command) error
}

// Hook stages: a signature is made last, over the command as it will be published.
const (
	stageTransform = iota // e.g. sealing secret fields (contract §8)
	stageSign             // signing the canonical command (contract §8a)
)

// Option configures a [Client] in [New].
type Option func(*Client) error

// withHook has every outgoing command changed by fn at stage: the options that seal secret
// fields (stageTransform) and sign commands (stageSign) are made with it.
func withHook(stage int, fn func(*events.Command) error) Option {
	return func(c *Client) error {
		c.hooks = append(c.hooks, hook{stage: stage, fn: fn})
		return nil
	}
}

// WithSubjectPrefix sets the subject prefix of proxbus's subjects and streams ("" and the
// default: "proxbus"; contract §1).
func WithSubjectPrefix(prefix string) Option {
	return func(c *Client) error {
		c.subjects = events.NewSubjects(prefix)
		return nil
	}
}

// WithSource sets the CloudEvents source of the commands the client sends when a [Command]
// names none (default [DefaultSource]). It must be a URI-reference; source and id together
// identify a command (contract §2, §5).
func WithSource(source string) Option {
	return func(c *Client) error {
		if _, err := events.EncodeBinary(c.subjects, events.Command{ID: "x", Source: source, Verb: "x"}); err != nil {
			return fmt.Errorf("client: WithSource(%q): not a URI-reference", source)
		}
		c.source = source
		return nil
	}
}

// WithActor sets the actor of the commands the client sends when a [Command] names none:
// who asked, recorded in the journal (default none: proxbus records "proxbus").
func WithActor(actor string) Option {
	return func(c *Client) error {
		if !events.ValidActor(actor) {
			return fmt.Errorf("client: WithActor: the actor is not a valid actor (printable, at most 255 bytes)")
		}
		c.actor = actor
		return nil
	}
}

// WithIDs sets the generator of command ids for commands that name none (default: "pbc-" and
// 32 random hex digits). Ids must be unique per source (contract §2).
func WithIDs(newID func() string) Option {
	return func(c *Client) error {
		if newID == nil {
			return errors.New("client: WithIDs: the generator is nil")
		}
		c.newID = newID
		return nil
	}
}

// WithClock sets the clock of the commands' time attribute (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(c *Client) error {
		if now == nil {
			return errors.New("client: WithClock: the clock is nil")
		}
		c.now = now
		return nil
	}
}

// WithPublishRetry sets whether a publish that no stream leader answered (a JetStream leader
// election on a clustered server, streams being created) is retried with the same
// Nats-Msg-Id for up to about 20 s (the default, true). false publishes once, with
// JetStream's own retries only.
func WithPublishRetry(retry bool) Option {
	return func(c *Client) error {
		c.retry = retry
		return nil
	}
}

// New returns a client publishing and following commands through js.
func New(js jetstream.JetStream, opts ...Option) (*Client, error) {
	if js == nil {
		return nil, errors.New("client: New: the JetStream context is nil")
	}
	c := &Client{js: js, subjects: events.NewSubjects(""), source: DefaultSource, newID: newCommandID, now: time.Now, retry: true}
	for _, opt := range opts {
		if err := opt(c); err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(c.hooks, func(a, b hook) int { return a.stage - b.stage })
	return c, nil
}

// Subjects returns the subject and stream names the client uses.
func (c *Client) Subjects() events.Subjects { return c.subjects }

// Input is a verb's data: one of the generated typed inputs (VMStart, StoragePBSCreate, …) or
// [Raw]. Its JSON form is the command's data.
type Input interface {
	// VerbName is the verb the data is for, e.g. "vm.start".
	VerbName() string
}

// Raw is a command's data as JSON, for any verb: the typed inputs are for verbs this client
// knows; Raw sends what it is given.
type Raw struct {
	// Verb is the verb, e.g. "vm.start".
	Verb string
	// Data is the JSON data; nil sends none (the pipeline reads it as {}).
	Data json.RawMessage
}

// Verb implements [Input].
func (r Raw) VerbName() string { return r.Verb }

// Secret is a write-only value (a password, a token secret): proxbus never emits it
// (contract §8).
type Secret string

// Command is one command to send: a verb's data and the CloudEvents attributes around it
// (contract §2). Only Input is required.
type Command struct {
	// Input is the verb and its data.
	Input Input
	// EndpointID is the NetBox id of the ProxmoxEndpoint the command acts on (the endpointid
	// attribute); 0 sends none, which every endpoint verb refuses (403 endpoint_id_required).
	EndpointID int64
	// ID is the command's id, unique per source; "" takes a fresh one (see [WithIDs]).
	ID string
	// Source is the command's CloudEvents source; "" is the client's (see [WithSource]).
	Source string
	// Time is the command's time; zero is now.
	Time time.Time
	// Expires, when set, is when the command must not start any more (410 command_expired).
	Expires time.Time
	// DryRun plans the command: its checks and reads run, nothing is written (contract §4a).
	DryRun bool
	// IdempotencyKey is the Idempotency-Key (contract §5), "" for none.
	IdempotencyKey string
	// Actor is who asked, recorded in the journal; "" is the client's (see [WithActor]).
	Actor string
	// TraceParent is a W3C traceparent carried into every event, "" for none.
	TraceParent string
	// Subject is the CloudEvents subject attribute (what the command is about), "" for none.
	Subject string
}

// build turns cmd into the command to publish: defaults filled, data encoded, hooks applied.
func (c *Client) build(cmd Command) (events.Command, error) {
	if cmd.Input == nil {
		return events.Command{}, fmt.Errorf("client: %w: the command has no Input", events.ErrEncode)
	}
	data, err := inputData(cmd.Input)
	if err != nil {
		return events.Command{}, err
	}
	out := events.Command{
		ID: cmd.ID, Source: cmd.Source, Verb: cmd.Input.VerbName(), Time: cmd.Time, Expires: cmd.Expires,
		DryRun: cmd.DryRun, Subject: cmd.Subject, EndpointID: cmd.EndpointID, HasEndpointID: cmd.EndpointID != 0,
		IdempotencyKey: cmd.IdempotencyKey, Actor: cmd.Actor, TraceParent: cmd.TraceParent, Data: data,
	}
	if out.ID == "" {
		out.ID = c.newID()
	}
	if out.Source == "" {
		out.Source = c.source
	}
	if out.Actor == "" {
		out.Actor = c.actor
	}
	if out.Time.IsZero() {
		out.Time = c.now()
	}
	out.Time = out.Time.UTC()
	if !out.Expires.IsZero() {
		out.Expires = out.Expires.UTC()
	}
	return out, c.prepare(&out)
}

// prepare applies the client's hooks to an outgoing command.
func (c *Client) prepare(cmd *events.Command) error {
	for _, h := range c.hooks {
		if err := h.fn(cmd); err != nil {
			return fmt.Errorf("client: command %s: %w", cmd.ID, err)
		}
	}
	return nil
}

// inputData is the JSON data of in.
func inputData(in Input) (json.RawMessage, error) {
	if r, ok := in.(Raw); ok {
		return r.Data, nil
	}
	if r, ok := in.(*Raw); ok {
		return r.Data, nil
	}
	data, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("client: %w: data of %s: %w", events.ErrEncode, in.VerbName(), err)
	}
	return data, nil
}

// newCommandID returns a fresh random command id ("pbc-" and 32 hex digits).
func newCommandID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "pbc-" + hex.EncodeToString(b)
}

// CommandOf returns the command to send for a command assembled as the events package
// describes it: its data sent as it is ([Raw]).
func CommandOf(c events.Command) Command {
	verb := c.Verb
	if verb == "" {
		verb = strings.TrimPrefix(c.Type, events.TypePrefix)
	}
	out := Command{
		Input: Raw{Verb: verb, Data: c.Data}, ID: c.ID, Source: c.Source, Time: c.Time, Expires: c.Expires,
		DryRun: c.DryRun, IdempotencyKey: c.IdempotencyKey, Actor: c.Actor, TraceParent: c.TraceParent, Subject: c.Subject,
	}
	if c.HasEndpointID {
		out.EndpointID = c.EndpointID
	}
	return out
}
