package app

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/client"
	"github.com/proxbus/proxbus/events"
)

// ErrNoResult is [client.ErrNoResult]: returned by [Send] and [SendCommand] when the stream
// ended or ctx expired before a result came (the error then also wraps ctx's error).
var ErrNoResult = client.ErrNoResult

// ErrStreamsMissing is [client.ErrStreamsMissing]: wrapped by the error of [SendCommand] when
// a proxbus stream it needs does not exist on the NATS server: nothing was published.
var ErrStreamsMissing = client.ErrStreamsMissing

// ErrTooLarge is [client.ErrTooLarge]: wrapped by the error of [SendCommand] (a
// [*TooLargeError]) for a command larger than the NATS server or the commands stream accepts.
var ErrTooLarge = client.ErrTooLarge

// TooLargeError is [client.TooLargeError].
type TooLargeError = client.TooLargeError

// Sent is JetStream's answer to the publish of a command ([client.Sent]).
type Sent = client.Sent

// newClient is the client of subjects on js.
func newClient(js jetstream.JetStream, subjects events.Subjects) (*client.Client, error) {
	return client.New(js, client.WithSubjectPrefix(subjects.Prefix))
}

// Follow delivers every event of one command (steps, result, journal), from the first one the
// events stream holds, until fn returns false or ctx ends.
func Follow(ctx context.Context, js jetstream.JetStream, subjects events.Subjects, ref string, fn func(subject string, ev events.Received) bool) error {
	return Tail(ctx, js, subjects, subjects.Follow(ref), true, fn)
}

// Tail delivers the events matching filter (default all events), starting with new ones
// unless all is set, until fn returns false or ctx ends ([client.Client.Tail]).
func Tail(ctx context.Context, js jetstream.JetStream, subjects events.Subjects, filter string, all bool, fn func(subject string, ev events.Received) bool) error {
	c, err := newClient(js, subjects)
	if err != nil {
		return err
	}
	return c.Tail(ctx, filter, all, fn)
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

// Send publishes a command in binary mode and, unless noWait, follows its events until the
// result arrives, passing each step to onStep. It is [SendCommand] with AwaitStreams: with
// noWait, streams not created yet are waited for by the publish retry.
func Send(ctx context.Context, js jetstream.JetStream, subjects events.Subjects, cmd events.Command, noWait bool, onStep func(events.Step)) (events.Result, error) {
	return SendCommand(ctx, js, subjects, cmd, SendOptions{NoWait: noWait, OnStep: onStep, AwaitStreams: true})
}

// SendCommand publishes a command with [client.Client.Send], or [client.Client.Publish] with
// opts.NoWait, and returns its result (zero with NoWait).
func SendCommand(ctx context.Context, js jetstream.JetStream, subjects events.Subjects, cmd events.Command, opts SendOptions) (events.Result, error) {
	c, err := newClient(js, subjects)
	if err != nil {
		return events.Result{}, err
	}
	var so []client.SendOpt
	if opts.OnSent != nil {
		so = append(so, client.OnSent(opts.OnSent))
	}
	if opts.OnStep != nil {
		so = append(so, client.OnStep(opts.OnStep))
	}
	if !opts.NoWait {
		return c.Send(ctx, client.CommandOf(cmd), so...)
	}
	if opts.AwaitStreams {
		so = append(so, client.AwaitStreams())
	}
	_, err = c.Publish(ctx, client.CommandOf(cmd), so...)
	return events.Result{}, err
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
