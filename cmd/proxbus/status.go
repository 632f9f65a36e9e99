package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/store"
)

// errNoSuchCommand: proxbus status found nothing of the command.
var errNoSuchCommand = errors.New("no such command")

// statusCmd is `proxbus status ID`: a command's state (contract §4: received, waiting,
// awaiting_approval, running, confirming, done, expired, cancelled, rejected, failed), since
// when and why, its approval, its history (every step) and its result, from the events stream
// and the store the replicas use. Without --nats-url and --redis-url it reads a running
// `proxbus dev`'s.
type statusCmd struct {
	ID     string `arg:"" optional:"" help:"The command's id (proxbus send prints it)."`
	Source string `name:"source" default:"${default_source}" help:"The command's source (proxbus send's default)."`
	natsFlags
	storeFlags
	outputFlags
}

// Run prints the command's status.
func (c *statusCmd) Run(e *cliEnv) error {
	if c.ID == "" {
		return fmt.Errorf("%w: proxbus status ID [--source S]: the command id is required (proxbus send prints it)", errUsage)
	}
	format, err := outputOf(&c.Output)
	if err != nil {
		return err
	}
	client, st, closeBoth, err := e.connectServed(&c.natsFlags, &c.storeFlags)
	if err != nil {
		return err
	}
	defer closeBoth()
	status, err := app.CommandStatus(client.ctx, client.js, events.NewSubjects(c.SubjectPrefix), st, store.CommandKey{Source: c.Source, ID: c.ID})
	switch {
	case errors.Is(err, app.ErrCommandUnknown):
		return fmt.Errorf("%w: %s (source %s) is in neither the events stream nor the store: check the id, --source when another producer sent it, and --subject-prefix/--redis-key-prefix",
			errNoSuchCommand, c.ID, c.Source)
	case err != nil:
		return client.explain(err)
	}
	if format == outputJSON {
		return writeJSONLine(e.stdout, status)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s id=%s (source %s): %s", verbOf(status.Steps, status.Result), c.ID, c.Source, status.State)
	if !status.Since.IsZero() {
		fmt.Fprintf(&b, " since %s", status.Since.UTC().Format(time.RFC3339))
	}
	b.WriteString("\n")
	if status.Why != "" {
		fmt.Fprintf(&b, "  %s\n", terminalText(status.Why, true))
	}
	if status.Owner != "" {
		fmt.Fprintf(&b, "  held by %s\n", terminalText(status.Owner, true))
	}
	if a := status.Approval; a != nil && !a.Early {
		line := "approval: " + string(a.Decision)
		if a.Decider != "" {
			line += " by " + a.Decider + " at " + a.DecidedAt.UTC().Format(time.RFC3339)
		}
		if a.Reason != "" {
			line += " (" + a.Reason + ")"
		}
		fmt.Fprintf(&b, "  %s\n", terminalText(line, true))
	}
	if len(status.History) > 0 {
		phases := make([]string, len(status.History))
		for i, v := range status.History {
			phases[i] = v.Phase + " " + v.At.UTC().Format("15:04:05.000")
		}
		fmt.Fprintf(&b, "  record: %s\n", strings.Join(phases, " → "))
	}
	if len(status.Steps) > 0 {
		b.WriteString("history:\n")
	}
	for _, s := range status.Steps {
		line := fmt.Sprintf("  %s  #%d %s %s", s.At.UTC().Format("15:04:05.000"), s.Seq, s.Step, s.Status)
		if s.UPID != "" {
			line += " " + s.UPID
		}
		if s.Detail != "" {
			line += ": " + s.Detail
		}
		b.WriteString(terminalText(line, true) + "\n")
	}
	if r := status.Result; r != nil {
		line := fmt.Sprintf("result: %d %s", r.Status, r.Result)
		if r.Reason != "" {
			line += " " + r.Reason
		}
		if r.Detail != "" {
			line += ": " + r.Detail
		}
		b.WriteString(terminalText(line, true) + "\n")
	}
	_, err = fmt.Fprint(e.stdout, b.String())
	return err
}

// verbOf is the verb the command's events name ("command" when they name none).
func verbOf(steps []events.Step, result *events.Result) string {
	if result != nil && result.Verb != "" {
		return result.Verb
	}
	for _, s := range steps {
		if s.Verb != "" {
			return s.Verb
		}
	}
	return "command"
}
