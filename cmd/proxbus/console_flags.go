package main

import (
	"errors"

	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/console"
)

// consoleFlags are the web console's flags (serve and dev).
type consoleFlags struct {
	fs                      *flagSet
	tokenFile, operatorFile *string
	history                 *int
	secureCookie            *bool
}

// maxConsoleHistory bounds --ui-history: the console holds that many commands in memory.
const maxConsoleHistory = 1_000_000

func addConsoleFlags(fs *flagSet) *consoleFlags {
	return &consoleFlags{
		fs:           fs,
		tokenFile:    fs.str("ui-token-file", "", "file holding the web console's read token (/ui: every page, no changes)"),
		operatorFile: fs.str("ui-operator-token-file", "", "file holding the web console's operator token (also replays and purges dead letters)"),
		history:      fs.intIn("ui-history", console.DefaultHistory, 100, maxConsoleHistory, "commands the web console keeps, the newest"),
		secureCookie: fs.boolean("ui-secure-cookie", false, "mark the web console's session cookie Secure on plain HTTP too: set it when a reverse proxy terminates TLS"),
	}
}

// config reads the token files. anonymousLoopback (dev without token files) lets loopback
// requests in without a token. An unreadable or too short token is an error naming its flag,
// for [flagSet.problems] to report with the others.
func (f *consoleFlags) config(anonymousLoopback bool) (app.Console, error) {
	var (
		a    console.Access
		errs []error
	)
	read := func(path *string, name string, into *string) {
		if *path == "" {
			return
		}
		tok, err := console.ReadTokenFile(*path, f.fs.shown(name))
		if err != nil {
			errs = append(errs, err)
		}
		*into = tok
	}
	read(f.tokenFile, "ui-token-file", &a.ReadToken)
	read(f.operatorFile, "ui-operator-token-file", &a.OperatorToken)
	if err := errors.Join(errs...); err != nil {
		return app.Console{}, err
	}
	a.AnonymousLoopback = anonymousLoopback && a.ReadToken == "" && a.OperatorToken == ""
	a.SecureCookie = *f.secureCookie
	return app.Console{Access: a, History: *f.history}, nil
}
