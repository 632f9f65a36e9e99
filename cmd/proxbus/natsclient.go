package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/internal/app"
)

// errPermission: the NATS server refused the client's user a publish or a subscription.
var errPermission = errors.New("NATS permissions violation")

// natsClient is a client subcommand's connection: ctx is the subcommand's context, ended
// early, with the violation as its cause, when the server refuses the user a publish or a
// subscription (which NATS reports asynchronously: without this the subcommand would wait for
// an answer that never comes, until its timeout).
type natsClient struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// connectNATS connects as nf says, with inbox the reply inbox prefix of the subcommand's role
// (see [natsFlags.security]), after pointing it at a running dev's NATS when it names none
// (see [cliEnv.natsFromDev]).
func (e *cliEnv) connectNATS(nf *natsFlags, inbox string) (*natsClient, error) {
	e.natsFromDev(&nf.NATSURL, &nf.SubjectPrefix)
	nc, js, err := app.ConnectClient(nf.NATSURL, nf.security(inbox))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(e.ctx)
	user := natsUser(nf)
	server := app.RedactURL(nf.NATSURL)
	nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			cancel(permissionError(user, server, err))
		}
	})
	e.nats = &natsClient{nc: nc, js: js, ctx: ctx, cancel: cancel}
	return e.nats, nil
}

// Close closes the connection.
func (c *natsClient) Close() {
	c.nc.SetErrorHandler(nil)
	c.nc.Close()
	c.cancel(nil)
}

// violation is the permissions violation that ended c.ctx, or nil.
func (c *natsClient) violation() error {
	if cause := context.Cause(c.ctx); errors.Is(cause, errPermission) {
		return cause
	}
	return nil
}

// explain is the permissions violation when one ended the operation that returned err,
// else err.
func (c *natsClient) explain(err error) error {
	if err == nil {
		return nil
	}
	if v := c.violation(); v != nil {
		return v
	}
	return err
}

// violationSubject matches what the server says it refused: `… for publish to "subject"`.
var violationSubject = regexp.MustCompile(`(?i)for (publish|subscription) to "([^"]*)"`)

// permissionError names the user, what it may not do and the server.
func permissionError(user, server string, err error) error {
	what := "was refused an operation"
	if m := violationSubject.FindStringSubmatch(err.Error()); m != nil {
		verb := "publish to"
		if strings.EqualFold(m[1], "subscription") {
			verb = "subscribe to"
		}
		what = fmt.Sprintf("may not %s %q", verb, m[2])
	}
	return fmt.Errorf("%w: NATS user %s %s (server %s). Grant it in the server's permissions (deploy/nats/accounts.conf lists what each proxbus role needs), or connect as a user that has it",
		errPermission, user, what, server)
}

// natsUser names the user the flags connect as: the URL's user, or the credentials file.
func natsUser(nf *natsFlags) string {
	switch {
	case nf.NATSCreds != "":
		return "of --nats-creds " + nf.NATSCreds
	case nf.NATSNKey != "":
		return "of --nats-nkey " + nf.NATSNKey
	}
	first, _, _ := strings.Cut(nf.NATSURL, ",")
	if u, err := url.Parse(strings.TrimSpace(first)); err == nil && u.User != nil && u.User.Username() != "" {
		return fmt.Sprintf("%q", u.User.Username())
	}
	return "(anonymous)"
}
