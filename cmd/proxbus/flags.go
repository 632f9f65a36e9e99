package main

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/proxbus/proxbus/internal/app"
)

// durationZero is a time.Duration, for reflect.TypeOf.
var durationZero time.Duration

// errUsage marks a usage error: a command line or configuration that cannot work (exit 2).
var errUsage = errors.New("usage")

// natsFlags are the connection flags every subcommand that talks to NATS shares: the URL, the
// credentials and TLS files, and the subject prefix.
type natsFlags struct {
	NATSURL       string `name:"nats-url" default:"${nats_url}" help:"NATS server URL."`
	NATSCreds     string `name:"nats-creds" help:"NATS credentials file (user JWT and NKey seed)."`
	NATSNKey      string `name:"nats-nkey" help:"File holding a NATS user NKey seed (SU…)."`
	NATSTLSCA     string `name:"nats-tls-ca" help:"PEM file of the CAs trusted for NATS (requires TLS)."`
	NATSTLSCert   string `name:"nats-tls-cert" help:"PEM client certificate for NATS mutual TLS."`
	NATSTLSKey    string `name:"nats-tls-key" help:"PEM key of --nats-tls-cert."`
	NATSTLSFirst  bool   `name:"nats-tls-first" help:"TLS handshake before the NATS INFO (server handshake_first)."`
	NATSInbox     string `name:"nats-inbox-prefix" help:"Subject prefix of this connection's reply inboxes; the NATS user must be allowed to subscribe to <prefix>.> (deploy/nats/accounts.conf gives each role its own; default: the role of the subcommand)."`
	SubjectPrefix string `name:"subject-prefix" default:"${subject_prefix}" help:"Prefix of every subject and stream name."`
}

// security is the NATS part of app.Security, with inbox the inbox prefix of the role the
// subcommand is meant for (app.InboxCLI, …) unless --nats-inbox-prefix names another.
func (f *natsFlags) security(inbox string) app.Security {
	return app.Security{NATSCreds: f.NATSCreds, NATSNKey: f.NATSNKey, NATSTLSCA: f.NATSTLSCA, NATSTLSCert: f.NATSTLSCert,
		NATSTLSKey: f.NATSTLSKey, NATSTLSFirst: f.NATSTLSFirst, NATSInboxPrefix: cmp.Or(f.NATSInbox, inbox)}
}

// storeFlags are the flags of the subcommands that read or write the store directly.
type storeFlags struct {
	RedisURL       string `name:"redis-url" default:"${redis_url}" help:"Redis URL of the store the replicas use."`
	RedisKeyPrefix string `name:"redis-key-prefix" default:"${redis_key_prefix}" help:"Prefix of every Redis key (serve's --redis-key-prefix)."`
}

// outputFlags is --output of the client subcommands.
type outputFlags struct {
	Output string `name:"output" default:"text" help:"Output format: text (human lines) or json (machine-readable documents)."`
}

// format is the chosen output format.
func (f *outputFlags) format() outputFormat { return outputFormat(f.Output) }

// logFlags are --log-format and --log-level (serve, dev).
type logFlags struct {
	LogFormat string `name:"log-format" default:"auto" help:"auto (tint on a terminal, else JSON), json or text."`
	LogLevel  string `name:"log-level" default:"info" help:"debug, info, warn or error."`
}

// check reports an unknown log format or level, naming the flag.
func (f *logFlags) check(e *cliEnv) []error {
	var errs []error
	if err := e.oneOf("log-format", f.LogFormat, []string{"auto", "json", "text"}); err != nil {
		errs = append(errs, err)
	}
	var l slog.Level
	if l.UnmarshalText([]byte(f.LogLevel)) != nil {
		errs = append(errs, fmt.Errorf("%s %q: must be debug, info, warn or error", e.shown("log-level"), f.LogLevel))
	}
	return errs
}

// handler is the log handler the flags select, writing to e's stderr.
func (f *logFlags) handler(e *cliEnv) (slog.Handler, error) {
	return logHandler(e.stderr, f.LogFormat, f.LogLevel)
}

// intIn is an error naming flag name (and its variable) when v lies outside [lo, hi].
func (e *cliEnv) intIn(name string, v, lo, hi int) error {
	if v < lo || v > hi {
		return fmt.Errorf("%s %d: must be %d–%d", e.shown(name), v, lo, hi)
	}
	return nil
}

// durationIn is [cliEnv.intIn] for durations (hi 0: no maximum).
func (e *cliEnv) durationIn(name string, v, lo, hi time.Duration) error {
	switch {
	case hi == 0 && v < lo:
		return fmt.Errorf("%s %s: must be at least %s", e.shown(name), v, lo)
	case hi != 0 && (v < lo || v > hi):
		return fmt.Errorf("%s %s: must be %s–%s", e.shown(name), v, lo, hi)
	}
	return nil
}

// named is "--name ($PROXBUS_NAME)", or "--name (from $PROXBUS_NAME)" when the value came
// from there: both ways of setting it, for a setting that is missing or unusable.
func (e *cliEnv) named(name string) string {
	if !e.set[name] && e.fromEnv[name] {
		return "--" + name + " (from $" + envName(name) + ")"
	}
	return "--" + name + " ($" + envName(name) + ")"
}

// orList is "a, b or c".
func orList(values []string) string {
	if len(values) < 2 {
		return strings.Join(values, "")
	}
	return strings.Join(values[:len(values)-1], ", ") + " or " + values[len(values)-1]
}

// flagErrors is every bad flag value of one command line. It wraps errUsage (exit code 2)
// and each error.
type flagErrors struct{ errs []error }

func (e *flagErrors) Error() string {
	if len(e.errs) == 1 {
		return errUsage.Error() + ": " + e.errs[0].Error()
	}
	lines := make([]string, len(e.errs))
	for i, err := range e.errs {
		lines[i] = "  " + err.Error()
	}
	return fmt.Sprintf("%s: %d problems (fix them all, then run again):\n%s", errUsage, len(e.errs), strings.Join(lines, "\n"))
}

func (e *flagErrors) Unwrap() []error { return append([]error{errUsage}, e.errs...) }

// secretValue is a secret given inline (--name) or in a file (--name-file), never both: the
// inline value, or the file's content without its trailing newline. Both set, an unreadable
// file or an empty one is an error naming the flags and the file, never the content.
func (e *cliEnv) secretValue(name, inline, file string) (string, error) {
	if file == "" {
		return inline, nil
	}
	fileFlag := e.shown(name + "-file")
	if inline != "" {
		return "", fmt.Errorf("%s and %s: set only one of them", e.shown(name), fileFlag)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", fmt.Errorf("%s %s: cannot read it: %w", fileFlag, file, err)
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	if v == "" {
		return "", fmt.Errorf("%s %s: the file is empty", fileFlag, file)
	}
	return v, nil
}

// oneOf is an error naming flag name when v is not one of values.
func (e *cliEnv) oneOf(name, v string, values []string) error {
	if !slices.Contains(values, v) {
		return fmt.Errorf("%s %q: must be %s", e.shown(name), v, orList(values))
	}
	return nil
}
