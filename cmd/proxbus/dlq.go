package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"github.com/proxbus/proxbus/internal/app"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/term"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/deadletter"
)

// Purge's confirmation reads these; tests replace them.
var (
	dlqStdin         io.Reader = os.Stdin
	dlqStdinTerminal           = func() bool { return term.IsTerminal(int(os.Stdin.Fd())) }
)

// dlqCmd is `proxbus dlq`: it lists, shows, replays and purges dead letters (contract §7). With --output json,
// list prints one JSON line per dead letter, show one document (with data as JSON when it is
// JSON), replay one document {dead_letter_seq, command_id, command_source, command_seq, time}
// and purge {purged}; text (the default) prints a table (a replayed letter's REPLAYED column
// names its last new command id) and labelled lines. Replay prints the new command's id to
// follow. Purge removes every letter, or those stored before --before (RFC 3339, or a
// duration back from now such as 24h); it needs --yes without --before or when stdin is not a
// terminal, and otherwise asks on the terminal. Without --nats-url it works on a running
// `proxbus dev` (see [cliEnv.natsFromDev]).
type dlqCmd struct {
	List   dlqListCmd  `cmd:"" help:"List the dead letters."`
	Show   dlqSeqCmd   `cmd:"" help:"Show one dead letter: its headers and its (redacted) body."`
	Replay dlqSeqCmd   `cmd:"" help:"Re-inject one dead letter as a new command."`
	Purge  dlqPurgeCmd `cmd:"" help:"Remove dead letters for good."`
}

// dlqListCmd is `proxbus dlq list`.
type dlqListCmd struct {
	Limit int `name:"limit" default:"100" help:"List at most this many."`
	natsFlags
	outputFlags
}

// dlqSeqCmd is `proxbus dlq show|replay SEQ`.
type dlqSeqCmd struct {
	Seq uint64 `arg:"" name:"seq" help:"The dead letter's sequence number in the dead-letter stream (dlq list shows it)."`
	natsFlags
	outputFlags
}

// dlqPurgeCmd is `proxbus dlq purge`.
type dlqPurgeCmd struct {
	Before string `name:"before" noenv:"" help:"Only letters stored before this time (RFC 3339, or a duration back from now like 24h)."`
	Yes    bool   `name:"yes" noenv:"" help:"Do not ask (required without --before or when stdin is not a terminal)."`
	natsFlags
	outputFlags
}

// Run lists the dead letters.
func (c *dlqListCmd) Run(e *cliEnv) error {
	return dlqRun(e, "list", &c.natsFlags, &c.outputFlags, func(d dlqArgs) error { d.limit = c.Limit; return d.do() })
}

// Run shows or replays one dead letter.
func (c *dlqSeqCmd) Run(e *cliEnv) error {
	sub := strings.Fields(e.command)[1]
	return dlqRun(e, sub, &c.natsFlags, &c.outputFlags, func(d dlqArgs) error { d.seq = c.Seq; return d.do() })
}

// Run purges dead letters.
func (c *dlqPurgeCmd) Run(e *cliEnv) error {
	cutoff, err := purgeCutoff(c.Before, time.Now())
	if err != nil {
		return err
	}
	if !c.Yes && (cutoff.IsZero() || !dlqStdinTerminal()) {
		return fmt.Errorf("%w: dlq purge removes dead letters for good: add --yes (required without --before or when stdin is not a terminal)", errUsage)
	}
	return dlqRun(e, "purge", &c.natsFlags, &c.outputFlags, func(d dlqArgs) error { d.cutoff, d.yes = cutoff, c.Yes; return d.do() })
}

// dlqArgs is one dlq subcommand, connected.
type dlqArgs struct {
	e        *cliEnv
	ctx      context.Context
	sub      string
	js       jetstream.JetStream
	subjects events.Subjects
	format   outputFormat
	limit    int
	seq      uint64
	cutoff   time.Time
	yes      bool
}

// dlqRun connects as the flags say and runs do.
func dlqRun(e *cliEnv, sub string, nf *natsFlags, of *outputFlags, do func(dlqArgs) error) error {
	format, err := outputOf(&of.Output)
	if err != nil {
		return err
	}
	client, err := e.connectNATS(nf, app.InboxAdmin)
	if err != nil {
		return err
	}
	defer client.Close()
	return do(dlqArgs{e: e, ctx: client.ctx, sub: sub, js: client.js, subjects: events.NewSubjects(nf.SubjectPrefix), format: format})
}

// do runs the subcommand.
func (d dlqArgs) do() error {
	ctx, stdout, stderr, js, subjects, format := d.ctx, d.e.stdout, d.e.stderr, d.js, d.subjects, d.format
	sub, seq, cutoff := d.sub, d.seq, d.cutoff
	yes, limit := &d.yes, &d.limit
	switch sub {
	case "list":
		dls, err := deadletter.List(ctx, js, subjects, *limit)
		if err != nil {
			return err
		}
		if format == outputJSON {
			for _, d := range dls {
				if err := writeJSONLine(stdout, deadLetterSummary(d)); err != nil {
					return err
				}
			}
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SEQ\tTIME\tREASON\tORIGINAL SUBJECT\tREPLAYED")
		for _, d := range dls {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", d.Seq, d.Time.UTC().Format(time.RFC3339), terminalText(d.Reason, true),
				terminalText(d.OriginalSubject, true), terminalText(replayedCell(d.Replays), true))
		}
		return tw.Flush()
	case "show":
		d, err := deadletter.Get(ctx, js, subjects, seq)
		if err != nil {
			return err
		}
		if format == outputJSON {
			doc := deadLetterDoc{dlqSummary: deadLetterSummary(d), Header: map[string][]string(d.Header), Data: rawOrString(d.Data)}
			return writeJSONLine(stdout, doc)
		}
		// Everything a message put here is escaped (terminalText): a dead letter may carry
		// terminal escape sequences meant for the operator's screen.
		fmt.Fprintf(stdout, "seq: %d\nsubject: %s\nreason: %s\noriginal subject: %s\ntime: %s\n", d.Seq, terminalText(d.Subject, true),
			terminalText(d.Reason, true), terminalText(d.OriginalSubject, true), d.Time.UTC().Format(time.RFC3339))
		for _, r := range d.Replays {
			fmt.Fprintf(stdout, "replayed: %s as command %s (commands stream seq %d)\n", r.Time.UTC().Format(time.RFC3339), terminalText(cmp.Or(r.CommandID, "(no id)"), true), r.CommandSeq)
		}
		for _, k := range slices.Sorted(maps.Keys(d.Header)) {
			for _, v := range d.Header[k] {
				fmt.Fprintf(stdout, "header %s: %s\n", terminalText(k, true), terminalText(v, true))
			}
		}
		fmt.Fprintf(stdout, "\n%s\n", terminalText(string(d.Data), false))
		return nil
	case "replay":
		rep, err := deadletter.Replay(ctx, js, subjects, seq)
		if err != nil && rep.CommandSeq == 0 {
			return err
		}
		if format == outputJSON {
			if werr := writeJSONLine(stdout, rep); werr != nil {
				return werr
			}
		} else if rep.CommandID != "" {
			fmt.Fprintf(stdout, "replayed dead letter %d as command %s (commands stream seq %d); follow it: proxbus events --id %s\n", seq, rep.CommandID, rep.CommandSeq, rep.CommandID)
		} else {
			fmt.Fprintf(stdout, "replayed dead letter %d as command stream seq %d (it has no readable command id)\n", seq, rep.CommandSeq)
		}
		return err // a marker not stored: the replay happened, the error says so
	case "purge":
		if !*yes {
			fmt.Fprintf(stderr, "purge the dead letters stored before %s? [y/N] ", cutoff.UTC().Format(time.RFC3339))
			answer, _ := bufio.NewReader(dlqStdin).ReadString('\n')
			if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
				return fmt.Errorf("dlq purge: not confirmed; nothing removed")
			}
		}
		n, err := deadletter.Purge(ctx, js, subjects, cutoff)
		if err != nil {
			return err
		}
		if format == outputJSON {
			return writeJSONLine(stdout, map[string]int{"purged": n})
		}
		if cutoff.IsZero() {
			fmt.Fprintf(stdout, "purged %d dead letters\n", n)
		} else {
			fmt.Fprintf(stdout, "purged %d dead letters stored before %s\n", n, cutoff.UTC().Format(time.RFC3339))
		}
		return nil
	default:
		return fmt.Errorf("%w: unknown dlq subcommand %q", errUsage, sub)
	}
}

// purgeCutoff reads --before: empty (every letter: zero time), an RFC 3339 time, or a
// positive duration back from now.
func purgeCutoff(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%w: --before must be an RFC 3339 time (2026-01-02T15:04:05Z) or a positive duration such as 24h (got %q)", errUsage, v)
}

// dlqSummary is one dead letter in `dlq list --output json`.
type dlqSummary struct {
	Seq             uint64    `json:"seq"`
	Subject         string    `json:"subject"`
	Reason          string    `json:"reason"`
	OriginalSubject string    `json:"original_subject"`
	Time            time.Time `json:"time"`
	// Replays are the letter's replays, oldest first; absent when never replayed.
	Replays []deadletter.ReplayRecord `json:"replays,omitempty"`
}

// deadLetterDoc is `dlq show --output json`: the summary, the stored headers and the
// (redacted) body, as JSON when it is JSON.
type deadLetterDoc struct {
	dlqSummary
	Header map[string][]string `json:"header,omitempty"`
	Data   any                 `json:"data"`
}

func deadLetterSummary(d deadletter.DeadLetter) dlqSummary {
	return dlqSummary{Seq: d.Seq, Subject: d.Subject, Reason: d.Reason, OriginalSubject: d.OriginalSubject, Time: d.Time.UTC(), Replays: d.Replays}
}

// replayedCell is list's REPLAYED column: "-", or the last replay's command id (and how many
// replays when several).
func replayedCell(rs []deadletter.ReplayRecord) string {
	if len(rs) == 0 {
		return "-"
	}
	last := cmp.Or(rs[len(rs)-1].CommandID, "seq "+strconv.FormatUint(rs[len(rs)-1].CommandSeq, 10))
	if len(rs) > 1 {
		return fmt.Sprintf("%s (%d times)", last, len(rs))
	}
	return last
}
