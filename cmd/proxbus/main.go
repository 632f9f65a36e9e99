// Command proxbus drives Proxmox VE from NATS JetStream: `proxbus serve` runs the processor,
// `proxbus dev` runs everything on embedded defaults, and the other subcommands publish
// commands, tail events and manage dead letters and streams (contract §10).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/lmittmann/tint"
)

// version is set with -ldflags "-X main.version=…"; otherwise the module version is used.
var version = ""

const usage = `proxbus — drive Proxmox VE through NATS JetStream

Usage:
  proxbus serve [flags]                 run the processor
  proxbus dev [--demo] [--redis-url U]  everything on embedded defaults (NATS, store, simulators)
  proxbus send <verb> [--endpoint N] [--data JSON|@file|@-] [--idempotency-key K] [--id ID]
               [--expires D|T] [--no-wait]
                                        publish a command, show each step with its duration, print the result
  proxbus events [--id ID [--follow]] [--all]
                                        tail events; with --id, until the command's result
  proxbus cancel ID [--source S]        cancel a command that has not started (410 command_cancelled)
  proxbus approve|reject ID --actor NAME [--source S]
                                        decide on a command awaiting approval (a second person)
  proxbus pending                       commands awaiting approval
  proxbus dlq list|show SEQ|replay SEQ|purge [--before T] [--yes]
                                        inspect, re-inject and purge dead letters
  proxbus journal pending               list journal updates waiting for NetBox
  proxbus streams apply [--stream-replicas N]
                                        create or update the streams and the consumer
  proxbus sim pve|netbox [--addr A] [--scenario demo]
  proxbus completion bash|zsh|fish      print a shell completion script
  proxbus version

send, events, approve, reject, pending, dlq list|show|replay|purge, journal pending and version
take --output text|json
($PROXBUS_OUTPUT, default text): human lines, or the raw documents as JSON (one per line).
Every flag has a PROXBUS_* environment variable (e.g. --nats-url ↔ PROXBUS_NATS_URL).
While 'proxbus dev' runs, the others use its NATS and Redis unless given --nats-url or
--redis-url, and say so: dev writes them to $PROXBUS_RUN_DIR/dev.json (default
$XDG_RUNTIME_DIR/proxbus, else proxbus-<uid> in the temporary directory).
Run 'proxbus <command> -h' for a command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command line and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { // a second signal kills the process the default way
		<-ctx.Done()
		stop()
	}()
	var err error
	switch args[0] {
	case "serve":
		err = cmdServe(ctx, args[1:], stderr)
	case "dev":
		err = cmdDev(ctx, args[1:], stdout, stderr)
	case "send":
		return cmdSend(ctx, args[1:], os.Stdin, stdout, stderr)
	case "events":
		err = cmdEvents(ctx, args[1:], stdout, stderr)
	case "cancel":
		err = cmdCancel(ctx, args[1:], stdout, stderr)
	case "approve":
		err = cmdDecide(ctx, "command.approve", args[1:], stdout, stderr)
	case "reject":
		err = cmdDecide(ctx, "command.reject", args[1:], stdout, stderr)
	case "pending":
		err = cmdPending(ctx, args[1:], stdout, stderr)
	case "dlq":
		err = cmdDLQ(ctx, args[1:], stdout, stderr)
	case "journal":
		err = cmdJournal(ctx, args[1:], stdout, stderr)
	case "streams":
		err = cmdStreams(ctx, args[1:], stdout, stderr)
	case "sim":
		err = cmdSim(ctx, args[1:], stdout, stderr)
	case "completion":
		err = cmdCompletion(args[1:], stdout, stderr)
	case "version", "--version", "-v":
		err = cmdVersion(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "proxbus: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "proxbus:", err)
		return 2
	default:
		fmt.Fprintln(stderr, "proxbus:", err)
		return 1
	}
}

var errUsage = errors.New("usage")

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// logHandler is tint on a terminal and JSON otherwise, unless format says which.
func logHandler(w io.Writer, format, level string) (slog.Handler, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("%w: --log-level %q", errUsage, level)
	}
	switch format {
	case "", "auto":
		if isTerminal(w) {
			return tint.NewTextHandler(w, &tint.Options{Level: lvl, TimeFormat: time.TimeOnly}), nil
		}
		return slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl}), nil
	case "json":
		return slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl}), nil
	case "text":
		return tint.NewTextHandler(w, &tint.Options{Level: lvl, TimeFormat: time.TimeOnly, NoColor: true}), nil
	default:
		return nil, fmt.Errorf("%w: --log-format must be auto, json or text", errUsage)
	}
}
