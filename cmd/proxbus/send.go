package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/client"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
)

// defaultSource is the CloudEvents source of the commands `send` publishes by default.
const defaultSource = "urn:proxbus:cli"

// exitInterrupted is send's exit code when interrupted (SIGINT) while following: 128+2.
const exitInterrupted = 130

// sendCmd is `proxbus send`: it publishes one command in binary mode, follows it and prints the result JSON on
// stdout (contract §10). Before publishing it checks the command with the pipeline's own
// validation (see [checkSend]): an unknown verb, a missing --endpoint, data that does not fit
// the verb or a bad --expires is a usage error and nothing is sent. --data @- reads the data
// from stdin. With --output text (the default) it also reports on stderr: "sent …" once
// JetStream acknowledged the publish, a line per step when the step ends, with its status and
// the time since its start, a spinner naming the running step when stderr is a terminal
// (plain lines otherwise), and a summary. Only steps stored after the publish are shown (a
// re-sent id does not show its old steps). vm.list's guests also appear there as a table
// (stdout keeps the result JSON). With --output json, stdout gets only the result document and
// stderr only errors (and, as in text mode, the line saying that the NATS of `proxbus dev` is
// used, from its run file, when no --nats-url was given).
// Interrupted while following, it says on stderr that the command is still queued (or
// running) and how to cancel or follow it.
// Exit code: 0 for a status below 400, 1 otherwise, 2 for usage errors, 130 when interrupted.
type sendCmd struct {
	Verb           string        `arg:"" optional:"" help:"The verb, e.g. storage.pbs.create (proxbus completion offers them)."`
	Endpoint       int64         `name:"endpoint" help:"NetBox ProxmoxEndpoint id (endpointid)."`
	Data           string        `name:"data" noenv:"" default:"{}" help:"Command data: JSON, @file, or @- to read it from stdin."`
	IdempotencyKey string        `name:"idempotency-key" noenv:"" help:"Idempotency-Key."`
	ID             string        `name:"id" noenv:"" help:"Command id (default random)."`
	Source         string        `name:"source" default:"${default_source}" help:"Command source."`
	Actor          string        `name:"actor" help:"Actor recorded in the journal."`
	Expires        string        `name:"expires" noenv:"" help:"The command must not start after this: a duration from now (10m) or an RFC 3339 time."`
	DryRun         bool          `name:"dry-run" noenv:"" help:"Plan the command: its checks and reads run, nothing is written; the answer is 200 planned with output.plan."`
	NoWait         bool          `name:"no-wait" help:"Publish and exit without waiting for the result."`
	Timeout        time.Duration `name:"timeout" default:"5m" help:"How long to wait for the result."`
	natsFlags
	outputFlags
	sendTrustFlags
}

// cmdSend runs `proxbus send args` and returns its exit code.
func cmdSend(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var ee exitError
	switch err := runSub(ctx, []string{"send"}, args, stdin, stdout, stderr); {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	default:
		fmt.Fprintln(stderr, "proxbus:", err)
		return 1
	}
}

// Run publishes the command and follows it; its exit code is returned as an [exitError].
func (c *sendCmd) Run(e *cliEnv) error {
	if code := c.run(e); code != 0 {
		return exitError{code: code}
	}
	return nil
}

func (c *sendCmd) run(e *cliEnv) int {
	ctx, stdin, stdout, stderr := e.ctx, e.stdin, e.stdout, e.stderr
	verb := c.Verb
	format, err := outputOf(&c.Output)
	if err != nil {
		fmt.Fprintln(stderr, "proxbus send:", err)
		return 2
	}
	if verb == "" {
		fmt.Fprintln(stderr, "proxbus send: a verb is required, e.g. proxbus send storage.pbs.create --endpoint 1 --data @pbs.json")
		return 2
	}
	body, err := readData(c.Data, stdin)
	if err != nil {
		fmt.Fprintln(stderr, "proxbus send:", err)
		return 2
	}
	now := time.Now().UTC()
	expiresAt, expiresErr := parseExpires(c.Expires, now)
	if problems := checkSend(verb, body, c.Endpoint, expiresErr); len(problems) > 0 {
		for _, p := range problems {
			for i, l := range strings.Split(p, "\n") {
				if i == 0 {
					l = "proxbus send: " + l
				}
				fmt.Fprintln(stderr, sanitizeLine(l))
			}
		}
		fmt.Fprintln(stderr, "proxbus send: nothing was sent")
		return 2
	}
	if c.ID == "" {
		c.ID = newCLICommandID()
	}
	prefix := &c.SubjectPrefix
	cmd := client.Command{Input: client.Raw{Verb: verb, Data: body}, ID: c.ID, Source: c.Source, Time: now, Expires: expiresAt,
		EndpointID: c.Endpoint, IdempotencyKey: c.IdempotencyKey, Actor: c.Actor, DryRun: c.DryRun}
	conn, err := e.connectNATS(&c.natsFlags, app.InboxCLI)
	if err != nil {
		fmt.Fprintln(stderr, "proxbus send:", err)
		return 1
	}
	defer conn.Close()
	var prepErr error // sealing or signing refused: nothing was sent
	pc, err := client.New(conn.js, client.WithSubjectPrefix(*prefix), client.WithPrepare(func(ec events.Command) (events.Command, error) {
		out, err := c.finish(conn.ctx, conn.js, events.NewSubjects(*prefix), ec, stderr)
		prepErr = err
		return out, err
	}))
	if err != nil {
		fmt.Fprintln(stderr, "proxbus send:", err)
		return 1
	}
	sendCtx, cancel := context.WithTimeout(conn.ctx, c.Timeout)
	defer cancel()
	follow := pc.Subjects().Follow(events.Ref(cmd.Source, cmd.ID))
	st := &sendState{}
	var prog *progress
	if format == outputText {
		prog = newProgress(stderr, !c.NoWait && isTerminal(stderr))
		defer prog.Close()
	}
	began := time.Now()
	onSent := client.OnSent(func(s client.Sent) {
		st.acked = true
		if prog != nil {
			for _, l := range sentLines(verb, cmd.ID, follow, s) {
				prog.Println(l)
			}
		}
	})
	var res client.Result
	if c.NoWait {
		_, err = pc.Publish(sendCtx, cmd, onSent)
	} else {
		res, err = pc.Send(sendCtx, cmd, onSent, client.OnStep(func(s client.Step) {
			st.stepSeen, st.last = true, s
			if prog != nil {
				prog.Step(s)
			}
		}))
	}
	if prog != nil {
		prog.Close()
	}
	if prepErr != nil {
		fmt.Fprintln(stderr, "proxbus send:", prepErr, "(nothing was sent)")
		return 2
	}
	if err != nil {
		switch {
		case conn.violation() != nil:
			fmt.Fprintln(stderr, sanitizeLine("proxbus send: "+conn.violation().Error()))
			if !st.acked {
				fmt.Fprintln(stderr, "proxbus send: nothing was sent")
			}
			return 1
		case ctx.Err() != nil: // interrupted (SIGINT, SIGTERM)
			printPending(stderr, cmd, *prefix, st, "interrupted")
			return exitInterrupted
		case st.acked && errors.Is(err, client.ErrNoResult) && sendCtx.Err() != nil:
			printPending(stderr, cmd, *prefix, st, fmt.Sprintf("no result within --timeout %s", c.Timeout))
			return 1
		}
		fmt.Fprintln(stderr, sanitizeLine("proxbus send: "+explainSendError(err, *prefix, c.NATSURL)))
		return 1
	}
	if c.NoWait {
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

// sendState is what `send` learnt while the command was published and followed.
type sendState struct {
	acked    bool // JetStream acknowledged the publish
	stepSeen bool // a step event of the command arrived
	// last is the newest step event of the command: whether it waits (for an approval, a
	// busy guest) or runs.
	last events.Step
}

// sentLines are the text lines printed once JetStream acknowledged the publish: "sent …",
// and what a duplicate means for what follows.
func sentLines(verb, id, follow string, s client.Sent) []string {
	lines := []string{fmt.Sprintf("sent %s id=%s (follow: %s)", verb, id, follow)}
	switch {
	case s.Duplicate:
		lines = append(lines, "  not queued again: a command with this id was published within the commands stream's duplicate window; showing its events from the first")
	}
	return lines
}

// printPending says, once send stops following a command it published (why: interrupted, or
// its --timeout), that the command is still queued or running, and how to cancel or follow
// it. Before JetStream acknowledged the publish, it says the command may or may not be queued.
func printPending(w io.Writer, cmd client.Command, prefix string, st *sendState, why string) {
	state := "is still queued: it runs when a replica takes it"
	undo := "  cancel it:  proxbus cancel " + shellQuote(cmd.ID)
	switch {
	case !st.acked:
		state = "may or may not be queued: JetStream had not acknowledged the publish"
	case st.last.Status == events.StepWaiting && st.last.Step == "approval":
		state = "is awaiting approval: it runs once another person approves it, and is answered 403 if rejected"
		undo = "  reject it:  proxbus reject " + shellQuote(cmd.ID) + " --actor NAME"
	case st.last.Status == events.StepWaiting:
		state = "is waiting on a replica"
		if st.last.Detail != "" {
			state += " (" + st.last.Detail + ")"
		}
		state += " and runs when it can, without this command"
	case st.stepSeen:
		state = "is running on a replica and goes on without this command"
	}
	var extra []string
	if cmd.Source != defaultSource {
		extra = append(extra, "--source", shellQuote(cmd.Source))
	}
	if prefix != events.NewSubjects("").Prefix {
		extra = append(extra, "--subject-prefix", shellQuote(prefix))
	}
	tail := ""
	if len(extra) > 0 {
		tail = " " + strings.Join(extra, " ")
	}
	fmt.Fprintln(w, sanitizeLine(fmt.Sprintf("proxbus send: %s; command %s %s", why, cmd.ID, state)))
	fmt.Fprintln(w, sanitizeLine(undo+tail))
	fmt.Fprintln(w, sanitizeLine("  follow it:  proxbus events --id "+shellQuote(cmd.ID)+tail))
}

// explainSendError is the message of a failed publish or follow: what happened and what to do.
func explainSendError(err error, prefix, natsURL string) string {
	apply := "proxbus streams apply --nats-url " + shellQuote(app.RedactURL(natsURL))
	if prefix != events.NewSubjects("").Prefix {
		apply += " --subject-prefix " + shellQuote(prefix)
	}
	var tl *client.TooLargeError
	switch {
	case errors.Is(err, client.ErrStreamsMissing):
		return fmt.Sprintf("%v on NATS at %s; nothing was sent. If that is the NATS your replicas use, create the streams with `%s` (`proxbus serve` also creates them when it starts); otherwise pass its URL with --nats-url", err, app.RedactURL(natsURL), apply)
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		return fmt.Sprintf("%v: no stream answered the publish, so nothing was stored. The streams may be missing (create them with `%s`; `proxbus serve` also creates them when it starts), or a JetStream leader election is still under way", err, apply)
	case errors.As(err, &tl):
		return fmt.Sprintf("%v; nothing was sent. Make --data smaller, or raise the limit", err)
	}
	return err.Error()
}

// shellQuote returns s as one shell word: unchanged when it holds only safe characters, else
// single-quoted.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:/@%+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
