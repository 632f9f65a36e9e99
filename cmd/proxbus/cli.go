package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"reflect"
	"strings"
	"syscall"

	"github.com/alecthomas/kong"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/handlers"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/console"
	"github.com/proxbus/proxbus/internal/endpointset"
	"github.com/proxbus/proxbus/internal/ingress"
	"github.com/proxbus/proxbus/store"
)

// cli is the command line of proxbus, one field per subcommand (alecthomas/kong builds the
// parser, the help, the did-you-mean suggestions and the completion model from it).
type cli struct {
	Serve      serveCmd      `cmd:"" help:"Run the processor."`
	Dev        devCmd        `cmd:"" help:"Everything on embedded defaults (NATS, store, simulators)."`
	Send       sendCmd       `cmd:"" help:"Publish a command, show each step with its duration, print the result."`
	Events     eventsCmd     `cmd:"" help:"Tail events; with --id, until the command's result."`
	Cancel     cancelCmd     `cmd:"" help:"Cancel a command: before it starts, or by stopping its Proxmox task (410 command_cancelled)."`
	Status     statusCmd     `cmd:"" help:"A command's state (contract §4) and its history."`
	Approve    decideCmd     `cmd:"" help:"Approve a command awaiting approval (a second person)."`
	Reject     decideCmd     `cmd:"" help:"Reject a command awaiting approval (a second person)."`
	Pending    pendingCmd    `cmd:"" help:"Commands awaiting approval."`
	Schedule   scheduleCmd   `cmd:"" help:"Scheduled commands: add, list, remove (JetStream message schedules)."`
	DLQ        dlqCmd        `cmd:"" name:"dlq" help:"Inspect, re-inject and purge dead letters."`
	Journal    journalCmd    `cmd:"" help:"Journal updates waiting for NetBox."`
	Streams    streamsCmd    `cmd:"" help:"Create or update the streams and the consumer."`
	Keys       keysCmd       `cmd:"" help:"Create and publish the keys of sealed secrets and signed commands."`
	Sim        simCmd        `cmd:"" help:"Run a simulator on its own."`
	Completion completionCmd `cmd:"" help:"Print a shell completion script (bash, zsh or fish)."`
	Version    versionCmd    `cmd:"" help:"Print the version."`
}

// description is the text under the usage line of `proxbus -h`.
const description = `Drive Proxmox VE through NATS JetStream.

Every flag but those naming one command (--id, --data, --yes, …) has a PROXBUS_* environment
variable (e.g. --nats-url ↔ PROXBUS_NATS_URL).
While 'proxbus dev' runs, the client subcommands use its NATS and Redis unless given
--nats-url or --redis-url, and say so: dev writes them to $PROXBUS_RUN_DIR/dev.json (default
$XDG_RUNTIME_DIR/proxbus, else proxbus-<uid> in the temporary directory).
Run 'proxbus <command> -h' for a command's flags.`

// kongVars are the defaults the flag tags interpolate (${name}): the documented defaults of
// the configuration each flag sets.
func kongVars() kong.Vars {
	return kong.Vars{
		"nats_url":              app.DefaultNATSURL,
		"redis_url":             app.DefaultRedisURL,
		"subject_prefix":        events.NewSubjects("").Prefix,
		"redis_key_prefix":      store.DefaultPrefix,
		"concurrency":           fmt.Sprint(consumer.DefaultConcurrency),
		"stream_replicas":       fmt.Sprint(consumer.DefaultReplicas),
		"ack_wait":              consumer.DefaultAckWait.String(),
		"max_attempts":          fmt.Sprint(handlers.DefaultMaxAttempts),
		"command_max_age":       handlers.DefaultCommandMaxAge.String(),
		"dedupe_ttl":            store.DefaultDedupeTTL.String(),
		"idempotency_window":    store.DefaultWindow.String(),
		"lease_ttl":             store.DefaultLeaseTTL.String(),
		"redis_replica_timeout": store.DefaultReplicaTimeout.String(),
		"result_timeout":        ingress.DefaultResultTimeout.String(),
		"endpoints_reload":      endpointset.DefaultInterval.String(),
		"ui_history":            fmt.Sprint(console.DefaultHistory),
		"ui_actor":              console.DefaultActor,
		"dev_nats_port":         fmt.Sprint(app.DefaultDevNATSPort),
		"dev_http_addr":         defaultDevHTTPAddr,
		"default_source":        defaultSource,
		"seal_key_file":         sealKeyFile,
		"seal_public_file":      sealPublicFile,
		"producer_key_file":     producerKeyFile,
		"producer_public_file":  producerPubFile,
	}
}

// cliEnv is what one command line runs with: its context and streams, the environment, and
// where each flag's value came from (command line or PROXBUS_* variable), which the messages
// name.
type cliEnv struct {
	ctx            context.Context
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	environ        func() []string

	set     map[string]bool // flags given on the command line
	fromEnv map[string]bool // flags whose value came from their variable
	envErrs []error         // variables whose value the flag's type refused
	exit    *int            // set when kong asked to exit (after -h)
	known   map[string]bool // every PROXBUS_* variable proxbus reads
	nats    *natsClient     // the subcommand's NATS connection, once made
	// command is the selected subcommand ("dlq show"), for the hint after a usage error.
	command string
}

// newCLIEnv is a cliEnv on the process's environment.
func newCLIEnv(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) *cliEnv {
	return &cliEnv{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv, environ: os.Environ}
}

// envName is the PROXBUS_* variable of a flag: --nats-url ↔ PROXBUS_NATS_URL.
func envName(flagName string) string {
	return "PROXBUS_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Validate is part of [kong.Resolver].
func (e *cliEnv) Validate(*kong.Application) error { return nil }

// Resolve is the [kong.Resolver] of the PROXBUS_* variables: the variable of a flag not given
// on the command line is its value. A value the flag's type refuses is not returned but kept
// for [cliEnv.problems], so that every bad variable is reported at once with the other
// problems.
func (e *cliEnv) Resolve(_ *kong.Context, _ *kong.Path, flag *kong.Flag) (any, error) {
	if !hasEnv(flag) {
		return nil, nil
	}
	name := envName(flag.Name)
	raw := e.getenv(name)
	if raw == "" {
		return nil, nil
	}
	scratch := reflect.New(flag.Target.Type()).Elem()
	scan := kong.ScanFromTokens(kong.Token{Type: kong.FlagValueToken, Value: raw})
	if err := flag.Mapper.Decode(&kong.DecodeContext{Value: flag.Value, Scan: scan}, scratch); err != nil {
		e.envErrs = append(e.envErrs, fmt.Errorf("$%s %q: %s", name, raw, typeWanted(flag.Target.Type(), err)))
		return nil, nil
	}
	e.fromEnv[flag.Name] = true
	return raw, nil
}

// hasEnv reports whether flag has a PROXBUS_* variable: every flag but -h and those tagged
// noenv, which name one command (--id, --data, …) or confirm one (--yes): a variable left in
// the environment would repeat them for every command.
func hasEnv(flag *kong.Flag) bool {
	return flag.Name != "help" && !flag.Tag.Has("noenv")
}

// typeWanted says what a value of type t looks like, for a value that did not parse as one.
func typeWanted(t reflect.Type, err error) string {
	switch {
	case t == reflect.TypeOf(durationZero):
		return "not a duration (e.g. 30s, 5m)"
	case t.Kind() == reflect.Bool:
		return "not true or false"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		return "not an integer"
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		return "not a non-negative integer"
	}
	return err.Error()
}

// explicit reports whether flag name was given on the command line or by its variable, as
// opposed to left at its default.
func (e *cliEnv) explicit(name string) bool { return e.set[name] || e.fromEnv[name] }

// shown is "--name", plus where the value came from when that was its variable.
func (e *cliEnv) shown(name string) string {
	if !e.set[name] && e.fromEnv[name] {
		return "--" + name + " (from $" + envName(name) + ")"
	}
	return "--" + name
}

// problems returns the unusable variables, then extra, as one [*flagErrors] (exit 2), or nil
// when there is none.
func (e *cliEnv) problems(extra ...error) error {
	errs := append([]error(nil), e.envErrs...)
	for _, err := range extra {
		if err == nil {
			continue
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok && !errors.Is(err, errUsage) {
			errs = append(errs, j.Unwrap()...)
			continue
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil
	}
	return &flagErrors{errs: errs}
}

// newParser builds the kong parser of c for one command line run in e.
func newParser(c *cli, e *cliEnv) (*kong.Kong, error) {
	return kong.New(c,
		kong.Name("proxbus"),
		kong.Description(description),
		kong.Writers(e.stdout, e.stderr),
		kong.Exit(func(code int) { e.exit = &code }),
		kong.Vars(kongVars()),
		kong.Resolvers(e),
		kong.WithHyphenPrefixedParameters(true), // --max-ack-pending -1, --expires -5m: refused with their range
		kong.PostBuild(addEnvHelp),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true, NoExpandSubcommands: true}),
		kong.Bind(e),
	)
}

// addEnvHelp appends its variable to every flag's help, as the one place that says which
// variable sets it.
func addEnvHelp(k *kong.Kong) error {
	return kong.Visit(k.Model, func(node kong.Visitable, next kong.Next) error {
		if f, ok := node.(*kong.Flag); ok && hasEnv(f) && !strings.Contains(f.Help, "($PROXBUS_") {
			f.Help += " ($" + envName(f.Name) + ")"
		}
		return next(nil)
	})
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() { // a second signal kills the process the default way
		<-ctx.Done()
		stop()
	}()
	code := runEnv(newCLIEnv(ctx, os.Stdin, os.Stdout, os.Stderr), os.Args[1:])
	stop()
	os.Exit(code)
}

// run executes one command line on the process's environment and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	return runEnv(newCLIEnv(context.Background(), os.Stdin, stdout, stderr), args)
}

// exitError ends a command with a given exit code, after its message (if any) was printed.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// runEnv parses args and runs the subcommand they select. Exit codes: 0 success (and -h),
// 1 failure, 2 a usage error (an unknown subcommand or flag, a value of the wrong type, an
// argument too many, a configuration that cannot work: each says what was expected), or what
// the subcommand returns.
func runEnv(e *cliEnv, args []string) int {
	err := execute(e, args)
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, errUsage) || errors.Is(err, config.ErrInvalid):
		for l := range strings.Lines("proxbus: " + err.Error()) {
			fmt.Fprintln(e.stderr, sanitizeLine(strings.TrimSuffix(l, "\n")))
		}
		return 2
	default:
		fmt.Fprintln(e.stderr, "proxbus:", err)
		return 1
	}
}

// execute parses args and runs the subcommand they select, returning its error; a command
// line kong refused is reported here and returned as an [exitError] of 2, -h as one of 0.
func execute(e *cliEnv, args []string) error {
	e.set, e.fromEnv = map[string]bool{}, map[string]bool{}
	var c cli
	parser, err := newParser(&c, e)
	if err != nil { // a grammar error: a bug of this package, caught by every test
		return err
	}
	e.known = knownEnv(parser)
	switch {
	case len(args) == 0: // a usage error: the usage goes to stderr
		parser.Stdout = e.stderr
		ctx, _ := kong.Trace(parser, nil)
		_ = ctx.PrintUsage(false)
		return exitError{code: 2}
	case args[0] == "help":
		args = append(args[1:], "--help")
	case args[0] == "--version" || args[0] == "-v":
		args = append([]string{"version"}, args[1:]...)
	}
	kctx, err := parseArgs(e, parser, args)
	if e.exit != nil {
		return exitError{code: *e.exit}
	}
	if err != nil {
		return exitError{code: usageFailure(e, args, err)}
	}
	if e.command != "serve" { // serve warns once it has read the endpoints file
		warnUnknownEnv(e)
	}
	err = kctx.Run(e)
	if e.nats != nil { // a NATS refusal is the reason whatever the subcommand saw after it
		err = e.nats.explain(err)
	}
	return err
}

// parseArgs parses args with parser and records in e the selected subcommand and the flags
// given on the command line.
func parseArgs(e *cliEnv, parser *kong.Kong, args []string) (*kong.Context, error) {
	kctx, err := parser.Parse(args)
	if err != nil {
		return nil, err
	}
	e.command = kctx.Command()
	for _, p := range kctx.Path {
		if p.Flag != nil && !p.Resolved {
			e.set[p.Flag.Name] = true
		}
	}
	return kctx, nil
}

// usageFailure reports a command line kong refused (naming what was expected and, for a
// mistyped subcommand or flag, the closest ones) and where to read the usage; exit 2.
func usageFailure(e *cliEnv, args []string, err error) int {
	msg := err.Error()
	var pe *kong.ParseError
	cmd := ""
	if errors.As(err, &pe) && pe.Context != nil {
		if sel := pe.Context.Selected(); sel != nil {
			cmd = sel.Path()
		}
	}
	if cmd == "" && strings.HasPrefix(msg, "unexpected argument "+args[0]) {
		msg = "unknown command " + strings.TrimPrefix(msg, "unexpected argument ")
	}
	fmt.Fprintln(e.stderr, sanitizeLine("proxbus: "+msg))
	if cmd != "" {
		fmt.Fprintf(e.stderr, "Run 'proxbus %s -h' for its flags.\n", cmd)
	} else {
		fmt.Fprintln(e.stderr, "Run 'proxbus -h' for the commands.")
	}
	return 2
}

// runSub runs the subcommand words (e.g. "send") with args, for the tests and the wrappers
// that name one subcommand; it returns the error the subcommand returned (unprinted), or an
// [exitError] carrying the exit code of what was reported already.
func runSub(ctx context.Context, words []string, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	e := newCLIEnv(ctx, stdin, stdout, stderr)
	err := execute(e, append(append([]string(nil), words...), args...))
	if ee, ok := err.(exitError); ok && ee.code == 0 {
		return nil
	}
	return err
}
