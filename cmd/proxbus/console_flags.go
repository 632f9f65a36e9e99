package main

import (
	"errors"

	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/console"
)

// consoleFlags are the web console's flags (serve and dev).
type consoleFlags struct {
	UITokenFile         string `name:"ui-token-file" help:"File holding the web console's read token (/ui: every page, no changes)."`
	UIOperatorTokenFile string `name:"ui-operator-token-file" help:"File holding the web console's operator token (also replays and purges dead letters)."`
	UIHistory           int    `name:"ui-history" default:"${ui_history}" help:"Commands the web console keeps, the newest."`
	UIActor             string `name:"ui-actor" default:"${ui_actor}" help:"Who an operator's approvals, rejections and cancellations in the web console are made as (the decision's actor, journaled)."`
	UISecureCookie      bool   `name:"ui-secure-cookie" help:"Mark the web console's session cookie Secure on plain HTTP too: set it when a reverse proxy terminates TLS."`
}

// maxConsoleHistory bounds --ui-history: the console holds that many commands in memory.
const maxConsoleHistory = 1_000_000

// config reads the token files. anonymousLoopback (dev without token files) lets loopback
// requests in without a token. An unreadable or too short token is an error naming its flag,
// for [cliEnv.problems] to report with the others.
func (f *consoleFlags) config(e *cliEnv, anonymousLoopback bool) (app.Console, error) {
	var (
		a    console.Access
		errs []error
	)
	read := func(path, name string, into *string) {
		if path == "" {
			return
		}
		tok, err := console.ReadTokenFile(path, e.shown(name))
		if err != nil {
			errs = append(errs, err)
		}
		*into = tok
	}
	read(f.UITokenFile, "ui-token-file", &a.ReadToken)
	read(f.UIOperatorTokenFile, "ui-operator-token-file", &a.OperatorToken)
	if err := errors.Join(errs...); err != nil {
		return app.Console{}, err
	}
	a.AnonymousLoopback = anonymousLoopback && a.ReadToken == "" && a.OperatorToken == ""
	a.SecureCookie = f.UISecureCookie
	return app.Console{Access: a, History: f.UIHistory, Actor: f.UIActor}, nil
}
