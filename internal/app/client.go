package app

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

// ErrNoResult is returned by [Send] and [SendCommand] when the stream ended or ctx expired
// before a result came (the error then also wraps ctx's error).
var ErrNoResult = errors.New("no result received")

// ErrStreamsMissing is wrapped by the error of [SendCommand] when a proxbus stream it needs
// does not exist on the NATS server: nothing was published. `proxbus streams apply` creates
// the streams, and so does `proxbus serve` at start.
var ErrStreamsMissing = errors.New("the proxbus streams do not exist")

// ErrTooLarge is wrapped by the error of [SendCommand] (a [*TooLargeError]) for a command
// larger than the NATS server or the commands stream accepts: nothing was stored.
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

// Follow delivers every event of one command (steps, result, journal), from the first one the
// events stream holds, until fn returns false or ctx ends.
func Follow(ctx context.Context, js jetstream.JetStream, subjects events.Subjects, ref string, fn func(subject string, ev events.Received) bool) error {
	return tail(ctx, js, subjects, subjects.Follow(ref), jetstream.DeliverAllPolicy, fn)
}

// Tail delivers the events matching filter (default all events), starting with new ones
// unless all is set, until fn returns false or ctx ends.
func Tail(ctx context.Context, js jetstream.JetStream, subjects events.Subjects, filter string, all bool, fn func(subject string, ev events.Received) bool) error {
	if filter == "" {
		filter = subjects.EventsFilter()
	}
	policy := jetstream.DeliverNewPolicy
	if all {
		policy = jetstream.DeliverAllPolicy
	}
	return tail(ctx, js, subjects, filter, policy, fn)
}

func tail(ctx context.Context, js jetstream.JetStream, subjects events.Subjects, filter string, policy jetstream.DeliverPolicy, fn func(string, events.Received) bool) error {
	msgs, err := eventMessages(ctx, js, subjects.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter}, DeliverPolicy: policy,
	})
	if err != nil {
		return err
	}
	defer msgs.Stop()
	return deliverEvents(ctx, msgs, fn)
}

// eventMessages starts an ordered consumer of the events stream: the server-side consumer
// exists when it returns, so every event stored from cfg's start on is delivered.
func eventMessages(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.OrderedConsumerConfig) (jetstream.MessagesContext, error) {
	c, err := js.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("follow events: %w", err)
	}
	msgs, err := c.Messages()
	if err != nil {
		return nil, fmt.Errorf("follow events: %w", err)
	}
	return msgs, nil
}

// deliverEvents passes each event of msgs to fn until fn returns false or ctx ends (then it
// returns ctx's error); unparsable events are skipped.
func deliverEvents(ctx context.Context, msgs jetstream.MessagesContext, fn func(string, events.Received) bool) error {
	stop := context.AfterFunc(ctx, msgs.Stop)
	defer stop()
	for {
		m, err := msgs.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("follow events: %w", err)
		}
		ev, err := events.ParseEvent(m.Data())
		if err != nil {
			continue
		}
		if !fn(m.Subject(), ev) {
			return nil
		}
	}
}

// SendOptions are the choices of [SendCommand]; the zero value publishes and follows.
type SendOptions struct {
	// NoWait returns once JetStream acknowledged the publish, without following.
	NoWait bool
	// OnSent, when set, is called once JetStream acknowledged the publish (the command is
	// stored), before any event is delivered.
	OnSent func(Sent)
	// OnStep, when set, receives each step event of the command stored after the publish.
	OnStep func(events.Step)
	// AwaitStreams: with NoWait, streams that do not exist yet are waited for within the
	// publish retry policy (a producer started alongside `proxbus serve`, which creates them),
	// and are not looked up first.
	AwaitStreams bool
}

// Sent is JetStream's answer to the publish of a command, as [SendOptions.OnSent] sees it.
type Sent struct {
	// Seq is the command's sequence in the commands stream.
	Seq uint64
	// Duplicate: the commands stream already held a command with this id (Nats-Msg-Id) within
	// its duplicate window: it was not stored again, nothing new will run, and the events
	// followed are the earlier publication's, from its first one.
	Duplicate bool
}

// lookupWait bounds a lookup made only to explain a refusal.
const lookupWait = 5 * time.Second

// Send publishes a command in binary mode and, unless noWait, follows its events until the
// result arrives, passing each step to onStep. It is [SendCommand] with AwaitStreams: with
// noWait, streams not created yet are waited for by the publish retry.
func Send(ctx context.Context, js jetstream.JetStream, subjects events.Subjects, cmd events.Command, noWait bool, onStep func(events.Step)) (events.Result, error) {
	return SendCommand(ctx, js, subjects, cmd, SendOptions{NoWait: noWait, OnStep: onStep, AwaitStreams: true})
}

// SendCommand publishes a command in binary mode and, unless opts.NoWait, follows its events
// until its result, passing each step to opts.OnStep. Only events stored after the publish are
// delivered (a re-sent command's earlier steps are not): the events stream's last sequence is
// read and the follow consumer created before publishing, so none is missed. A publish no
// stream leader answers (a leader election on a clustered broker) is retried with the same
// Nats-Msg-Id, for up to about 20 s. It returns the result (zero with NoWait).
//
// It stores nothing and fails with [ErrStreamsMissing] when the events stream does not exist
// (looked up first unless NoWait and AwaitStreams), and with a [*TooLargeError] for a command
// over the NATS server's max_payload or the commands stream's max_msg_size. The lookups need
// only the permissions of the cli user of deploy/nats/accounts.conf.
func SendCommand(ctx context.Context, js jetstream.JetStream, subjects events.Subjects, cmd events.Command, opts SendOptions) (events.Result, error) {
	msg, err := events.EncodeBinary(subjects, cmd)
	if err != nil {
		return events.Result{}, err
	}
	size := int64(msg.Size() - len(msg.Subject) - len(msg.Reply))
	if limit := js.Conn().MaxPayload(); limit > 0 && size > limit {
		return events.Result{}, &TooLargeError{Size: size, Limit: limit, Of: "the NATS server's max_payload"}
	}
	var sent Sent
	var msgs jetstream.MessagesContext
	switch {
	case !opts.NoWait:
		msgs, err = followFromNow(ctx, js, subjects, cmd.Ref())
		if err != nil {
			return events.Result{}, err
		}
		defer func() { msgs.Stop() }()
	case !opts.AwaitStreams:
		if _, err := js.Stream(ctx, subjects.EventsStream()); errors.Is(err, jetstream.ErrStreamNotFound) {
			return events.Result{}, fmt.Errorf("%w: stream %s not found", ErrStreamsMissing, subjects.EventsStream())
		} // another failure (a lookup not permitted): the publish answers
	}
	ack, err := publishCommand(ctx, js, msg)
	if err != nil {
		return events.Result{}, publishError(ctx, js, err, size, subjects.CommandsStream())
	}
	sent.Seq, sent.Duplicate = ack.Sequence, ack.Duplicate
	if opts.OnSent != nil {
		opts.OnSent(sent)
	}
	if opts.NoWait {
		return events.Result{}, nil
	}
	if ack.Duplicate {
		msgs.Stop()
		msgs, err = eventMessages(ctx, js, subjects.EventsStream(), jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{subjects.Follow(cmd.Ref())}, DeliverPolicy: jetstream.DeliverAllPolicy,
		})
		if err != nil {
			return events.Result{}, err
		}
	}
	var res events.Result
	found := false
	err = deliverEvents(ctx, msgs, func(subject string, ev events.Received) bool {
		switch {
		case strings.HasSuffix(subject, ".step"):
			var st events.Step
			if json.Unmarshal(ev.Data, &st) == nil && opts.OnStep != nil {
				opts.OnStep(st)
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
		return events.Result{}, ErrNoResult
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return events.Result{}, fmt.Errorf("%w: %w", ErrNoResult, err)
	}
	return events.Result{}, err
}

// followFromNow starts the consumer of the command's events stored after the events stream's
// current last one. A re-sent finished command's replay is among them: replays have an event
// id of their own (contract §3).
func followFromNow(ctx context.Context, js jetstream.JetStream, subjects events.Subjects, ref string) (jetstream.MessagesContext, error) {
	name := subjects.EventsStream()
	s, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("%w: stream %s not found", ErrStreamsMissing, name)
	}
	if err != nil {
		return nil, fmt.Errorf("follow events: %w", err)
	}
	return eventMessages(ctx, js, name, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subjects.Follow(ref)}, DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq: s.CachedInfo().State.LastSeq + 1,
	})
}

// publishError turns a refused publish of size bytes into a [*TooLargeError] when a limit
// refused it (looking up the commands stream's max_msg_size to name it), and wraps any other
// error.
func publishError(ctx context.Context, js jetstream.JetStream, err error, size int64, commands string) error {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrMaxPayload):
		return &TooLargeError{Size: size, Limit: js.Conn().MaxPayload(), Of: "the NATS server's max_payload"}
	case errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum:
		tl := &TooLargeError{Size: size, Of: "the " + commands + " stream's max_msg_size"}
		lctx, cancel := context.WithTimeout(ctx, lookupWait)
		defer cancel()
		if s, err := js.Stream(lctx, commands); err == nil && s.CachedInfo().Config.MaxMsgSize > 0 {
			tl.Limit = int64(s.CachedInfo().Config.MaxMsgSize)
		}
		return tl
	}
	return fmt.Errorf("publish: %w", err)
}

// Publish retry policy of [SendCommand]: a publish that no stream leader answered (a JetStream
// leader election on a clustered broker, or a stream not created yet) is retried with the same
// message, so the same Nats-Msg-Id, which the stream dedupes should an earlier attempt have
// been stored after all.
const (
	publishAttempts       = 4
	publishAttemptTimeout = 5 * time.Second
	publishNoRespondWait  = 250 * time.Millisecond
	publishNoRespondTries = 8
)

// publishCommand publishes msg with the retry policy above, until it is acknowledged, fails
// for a reason a retry cannot cure, or ctx ends.
func publishCommand(ctx context.Context, js jetstream.JetStream, msg *nats.Msg) (*jetstream.PubAck, error) {
	var (
		ack *jetstream.PubAck
		err error
	)
	for attempt := 1; attempt <= publishAttempts; attempt++ {
		actx, cancel := context.WithTimeout(ctx, publishAttemptTimeout)
		ack, err = js.PublishMsg(actx, msg, jetstream.WithRetryWait(publishNoRespondWait), jetstream.WithRetryAttempts(publishNoRespondTries))
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

// Connect opens a NATS connection and its JetStream context for the CLI's client commands.
func Connect(url string) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(url, nats.Name("proxbus-cli"))
	if err != nil {
		return nil, nil, fmt.Errorf("nats: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	return nc, js, nil
}
