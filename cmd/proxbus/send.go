package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
)

// cmdSend publishes one command in binary mode, follows it and prints the result JSON on
// stdout (contract §10). With --output text (the default) it also reports progress on stderr:
// a line per step when the step ends, with its status and the time since its start, a spinner
// naming the running step when stderr is a terminal (plain lines otherwise), and a summary.
// vm.list's guests also appear there as a table (stdout keeps the result JSON).
// With --output json, stdout gets only the result document and stderr only errors (and, as
// in text mode, the line saying that the NATS of `proxbus dev` is used, from its run file,
// when no --nats-url was given).
// Exit code: 0 for a status below 400, 1 otherwise (2 for usage errors).
func cmdSend(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("send", stderr)
	natsURL := addNATSURLFlag(fs)
	natsSec := addNATSSecurityFlags(fs)
	prefix := addSubjectPrefixFlag(fs, "subject prefix")
	endpoint := fs.Int64("endpoint", 0, "NetBox ProxmoxEndpoint id (endpointid)")
	data := fs.String("data", "{}", "command data: JSON, or @file")
	key := fs.String("idempotency-key", "", "Idempotency-Key")
	id := fs.String("id", "", "command id (default random)")
	source := fs.String("source", "urn:proxbus:cli", "command source")
	actor := fs.String("actor", "", "actor recorded in the journal")
	noWait := fs.Bool("no-wait", false, "publish and exit without waiting for the result")
	timeout := fs.Duration("timeout", 5*time.Minute, "how long to wait for the result")
	output := outputFlag(fs)
	verb, rest := "", args
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		verb, rest = args[0], args[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return 2
	}
	if verb == "" && fs.NArg() > 0 {
		verb = fs.Arg(0)
	}
	format, err := outputOf(output)
	if err != nil {
		fmt.Fprintln(stderr, "proxbus send:", err)
		return 2
	}
	if verb == "" {
		fmt.Fprintln(stderr, "proxbus send: a verb is required, e.g. proxbus send storage.pbs.create --endpoint 1 --data @pbs.json")
		return 2
	}
	body := []byte(*data)
	if strings.HasPrefix(*data, "@") {
		b, err := os.ReadFile(strings.TrimPrefix(*data, "@"))
		if err != nil {
			fmt.Fprintln(stderr, "proxbus send:", err)
			return 2
		}
		body = b
	}
	if !json.Valid(body) {
		fmt.Fprintln(stderr, "proxbus send: --data is not valid JSON")
		return 2
	}
	if *id == "" {
		b := make([]byte, 12)
		_, _ = rand.Read(b)
		*id = "cli-" + hex.EncodeToString(b)
	}
	fs.natsFromDev(stderr, natsURL, prefix)
	cmd := events.Command{ID: *id, Source: *source, Type: "proxbus." + verb, Verb: verb, Time: time.Now().UTC(),
		EndpointID: *endpoint, HasEndpointID: *endpoint != 0, IdempotencyKey: *key, Actor: *actor, Data: body}
	nc, js, err := app.ConnectClient(*natsURL, natsSec.security())
	if err != nil {
		fmt.Fprintln(stderr, "proxbus send:", err)
		return 1
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	subjects := events.NewSubjects(*prefix)
	follow := subjects.Follow(cmd.Ref())
	var prog *progress
	onStep := func(events.Step) {}
	if format == outputText {
		prog = newProgress(stderr, !*noWait && isTerminal(stderr))
		defer prog.Close()
		prog.Println(fmt.Sprintf("sent %s id=%s (follow: %s)", verb, cmd.ID, follow))
		onStep = prog.Step
	}
	began := time.Now()
	res, err := app.Send(ctx, js, subjects, cmd, *noWait, onStep)
	if prog != nil {
		prog.Close()
	}
	if err != nil {
		fmt.Fprintln(stderr, "proxbus send:", err)
		return 1
	}
	if *noWait {
		if format == outputJSON {
			_ = writeJSONLine(stdout, map[string]string{"command_id": cmd.ID, "command_source": cmd.Source, "follow": follow})
		}
		return 0
	}
	if prog != nil {
		summary := fmt.Sprintf("result %d %s", res.Status, res.Result)
		if res.Reason != "" {
			summary += " (" + res.Reason + ")"
		}
		if res.Replayed {
			summary += " replayed"
		}
		prog.Println(summary + " in " + formatDuration(time.Since(began)))
		var table strings.Builder
		_ = writeResultTable(&table, res)
		for l := range strings.Lines(table.String()) {
			prog.Println(strings.TrimSuffix(l, "\n"))
		}
	}
	out, _ := json.MarshalIndent(res, "", "  ")
	fmt.Fprintln(stdout, string(out))
	if res.Status >= 400 {
		return 1
	}
	return 0
}
