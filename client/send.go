package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
)

// ErrNoResult is returned by [Client.Send] when the events stream ended or ctx ended before the
// command's result came (the error then also wraps ctx's error). The command may still run.
var ErrNoResult = errors.New("no result received")

// ErrStreamsMissing is wrapped by the error of [Client.Send] and [Client.Publish] when a
// proxbus stream they need does not exist on the NATS server: nothing was published.
// `proxbus streams apply` creates the streams, and so does `proxbus serve` at start.
var ErrStreamsMissing = errors.New("the proxbus streams do not exist")

// ErrTooLarge is wrapped by the error of [Client.Send] and [Client.Publish] (a
// [*TooLargeError]) for a command larger than the NATS server or the commands stream accepts:
// nothing was stored.
var ErrTooLarge = errors.New("command too large")

// TooLargeError is a command of Size bytes (its data and headers) over Limit bytes, the limit
// that Of names ("the NATS server's max_payload", "the PROXBUS_COMMANDS stream's
// max_msg_size"); Limit is 0 when the server refused the command by a limit that could not be
// read.
type TooLargeError struct {
	Size, Limit int64
	Of          string
}

func (e *TooLargeError) Error() string {
	if e.Limit <= 0 { // refused by a limit that could not be read
		return fmt.Sprintf("the command is %d bytes (data and headers), over %s", e.Size, e.Of)
	}
	return fmt.Sprintf("the command is %d bytes (data and headers), over %s of %d bytes", e.Size, e.Of, e.Limit)
}

// Unwrap returns [ErrTooLarge].
func (e *TooLargeError) Unwrap() error { return ErrTooLarge }

// Sent is JetStream's answer to the publish of a command.
type Sent struct {
	// ID and Source identify the command; Ref is its event-subject token (contract §1):
	// proxbus.evt.<Ref>.> follows it.
	ID, Source, Ref string
	// Seq is the command's sequence in the commands stream.
	Seq uint64
	// Duplicate: the commands stream already held a command with this id (Nats-Msg-Id) within
	// its duplicate window: it was not stored again, nothing new will run, and the events
	// followed are the earlier publication's, from its first one.
	Duplicate bool
}

// SendOpt is a choice of [Client.Send] or [Client.Publish].
type SendOpt func(*sendOpts)

type sendOpts struct {
	onSent       func(Sent)
	onStep       func(Step)
	awaitStreams bool
}

// OnSent has fn called once JetStream acknowledged the publish (the command is stored),
// before any event is delivered.
func OnSent(fn func(Sent)) SendOpt { return func(o *sendOpts) { o.onSent = fn } }

// OnStep has fn called with each step event of the command stored after the publish, in
// order, while [Client.Send] waits for the result.
func OnStep(fn func(Step)) SendOpt { return func(o *sendOpts) { o.onStep = fn } }

// AwaitStreams has [Client.Publish] not look the events stream up first: streams that do
// not exist yet are waited for within the publish retry (a producer started alongside
// `proxbus serve`, which creates them).
func AwaitStreams() SendOpt { return func(o *sendOpts) { o.awaitStreams = true } }

// lookupWait bounds a lookup made only to explain a refusal.
const lookupWait = 5 * time.Second

// Publish publishes cmd in binary mode and returns once JetStream stored it, without following
// it. Unless [AwaitStreams], it first checks that the events stream exists and fails with
// [ErrStreamsMissing], publishing nothing, when it does not.
func (c *Client) Publish(ctx context.Context, cmd Command, opts ...SendOpt) (Sent, error) {
	o := sendOptions(opts)
	ec, err := c.build(cmd)
	if err != nil {
		return Sent{}, err
	}
	if !o.awaitStreams {
		if _, err := c.js.Stream(ctx, c.subjects.EventsStream()); errors.Is(err, jetstream.ErrStreamNotFound) {
			return Sent{}, fmt.Errorf("%w: stream %s not found", ErrStreamsMissing, c.subjects.EventsStream())
		} // another failure (a lookup not permitted): the publish answers
	}
	return c.publish(ctx, ec, o)
}

// Send publishes cmd in binary mode and follows its events until its result, which it
// returns, passing each step to [OnStep]. Only events stored after the publish are delivered
// (a re-sent command's earlier steps are not; a re-sent finished command's replayed result
// is): the follow starts before the publish, so none is missed. A publish answered as a
// duplicate follows the earlier publication's events from its first.
//
// It stores nothing and fails with [ErrStreamsMissing] when the events stream does not exist,
// and with a [*TooLargeError] for a command over the NATS server's max_payload or the
// commands stream's max_msg_size. When ctx ends first it returns an error wrapping
// [ErrNoResult] and ctx's error.
func (c *Client) Send(ctx context.Context, cmd Command, opts ...SendOpt) (Result, error) {
	o := sendOptions(opts)
	ec, err := c.build(cmd)
	if err != nil {
		return Result{}, err
	}
	msgs, err := c.followFromNow(ctx, ec.Ref())
	if err != nil {
		return Result{}, err
	}
	defer func() { msgs.Stop() }()
	sent, err := c.publish(ctx, ec, o)
	if err != nil {
		return Result{}, err
	}
	if sent.Duplicate {
		msgs.Stop()
		if msgs, err = c.eventMessages(ctx, c.subjects.Follow(sent.Ref), jetstream.DeliverAllPolicy); err != nil {
			return Result{}, err
		}
	}
	return awaitResult(ctx, msgs, o.onStep)
}

func sendOptions(opts []SendOpt) sendOpts {
	var o sendOpts
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// publish encodes and publishes a built command and reports it to onSent.
func (c *Client) publish(ctx context.Context, cmd events.Command, o sendOpts) (Sent, error) {
	msg, err := events.EncodeBinary(c.subjects, cmd)
	if err != nil {
		return Sent{}, err
	}
	return c.publishMsg(ctx, cmd, msg, o)
}

// publishMsg publishes msg, the encoded cmd, after checking its size against the server's
// max_payload.
func (c *Client) publishMsg(ctx context.Context, cmd events.Command, msg *nats.Msg, o sendOpts) (Sent, error) {
	size := int64(msg.Size() - len(msg.Subject) - len(msg.Reply))
	if limit := c.js.Conn().MaxPayload(); limit > 0 && size > limit {
		return Sent{}, &TooLargeError{Size: size, Limit: limit, Of: "the NATS server's max_payload"}
	}
	ack, err := c.publishWithRetry(ctx, msg)
	if err != nil {
		return Sent{}, c.publishError(ctx, err, size)
	}
	sent := Sent{ID: cmd.ID, Source: cmd.Source, Ref: cmd.Ref(), Seq: ack.Sequence, Duplicate: ack.Duplicate}
	if o.onSent != nil {
		o.onSent(sent)
	}
	return sent, nil
}

// Forward publishes a command decoded from a structured-mode CloudEvent body (a webhook that
// is a CloudEvent): body as it is when the client has no hook that changes commands, else
// the command re-encoded in structured mode after the hooks.
func (c *Client) Forward(ctx context.Context, cmd events.Command, body []byte) (Sent, error) {
	var msg *nats.Msg
	if len(c.hooks) == 0 {
		msg = nats.NewMsg(c.subjects.Command(cmd.Verb))
		msg.Header.Set(events.HeaderContentType, events.ContentTypeCE)
		msg.Header.Set(events.HeaderMsgID, cmd.ID)
		msg.Data = body
	} else {
		if err := c.prepare(&cmd); err != nil {
			return Sent{}, err
		}
		var err error
		if msg, err = events.EncodeStructured(c.subjects, cmd); err != nil {
			return Sent{}, err
		}
	}
	return c.publishMsg(ctx, cmd, msg, sendOpts{})
}

// awaitResult passes the step events of msgs to onStep until the result event, which it
// returns.
func awaitResult(ctx context.Context, msgs jetstream.MessagesContext, onStep func(Step)) (Result, error) {
	var res Result
	found := false
	err := deliverEvents(ctx, msgs, func(subject string, ev events.Received) bool {
		switch {
		case strings.HasSuffix(subject, ".step"):
			var st Step
			if json.Unmarshal(ev.Data, &st) == nil && onStep != nil {
				onStep(st)
			}
		case strings.HasSuffix(subject, ".result"):
			found = json.Unmarshal(ev.Data, &res) == nil
			return !found
		}
		return true
	})
	switch {
	case found:
		return res, nil
	case err == nil:
		return Result{}, ErrNoResult
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return Result{}, fmt.Errorf("%w: %w", ErrNoResult, err)
	}
	return Result{}, err
}

// publishError turns a refused publish of size bytes into a [*TooLargeError] when a limit
// refused it (looking up the commands stream's max_msg_size to name it), and wraps any other
// error.
func (c *Client) publishError(ctx context.Context, err error, size int64) error {
	commands := c.subjects.CommandsStream()
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrMaxPayload):
		return &TooLargeError{Size: size, Limit: c.js.Conn().MaxPayload(), Of: "the NATS server's max_payload"}
	case errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum:
		tl := &TooLargeError{Size: size, Of: "the " + commands + " stream's max_msg_size"}
		lctx, cancel := context.WithTimeout(ctx, lookupWait)
		defer cancel()
		if s, err := c.js.Stream(lctx, commands); err == nil && s.CachedInfo().Config.MaxMsgSize > 0 {
			tl.Limit = int64(s.CachedInfo().Config.MaxMsgSize)
		}
		return tl
	}
	return fmt.Errorf("publish: %w", err)
}

// Publish retry policy (see [WithPublishRetry]): a publish that no stream leader answered is
// retried with the same message, so the same Nats-Msg-Id, which the stream dedupes should an
// earlier attempt have been stored after all.
const (
	publishAttempts       = 4
	publishAttemptTimeout = 5 * time.Second
	publishNoRespondWait  = 250 * time.Millisecond
	publishNoRespondTries = 8
)

// publishWithRetry publishes msg with the retry policy above (or once, without it), until it
// is acknowledged, fails for a reason a retry cannot cure, or ctx ends.
func (c *Client) publishWithRetry(ctx context.Context, msg *nats.Msg) (*jetstream.PubAck, error) {
	if !c.retry {
		return c.js.PublishMsg(ctx, msg)
	}
	var (
		ack *jetstream.PubAck
		err error
	)
	for attempt := 1; attempt <= publishAttempts; attempt++ {
		actx, cancel := context.WithTimeout(ctx, publishAttemptTimeout)
		ack, err = c.js.PublishMsg(actx, msg, jetstream.WithRetryWait(publishNoRespondWait), jetstream.WithRetryAttempts(publishNoRespondTries))
		cancel()
		if err == nil || ctx.Err() != nil || !retryablePublish(err) {
			break
		}
	}
	return ack, err
}

// retryablePublish reports whether a publish failed only for want of an answer.
func retryablePublish(err error) bool {
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)
}
