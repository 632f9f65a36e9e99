package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
)

// cmdDLQ lists, shows and replays dead letters (contract §7). With --output json, list prints
// one JSON line per dead letter, show one document (with data as JSON when it is JSON) and
// replay one document; text (the default) prints a table and labelled lines.
func cmdDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: proxbus dlq list|show SEQ|replay SEQ", errUsage)
	}
	sub := args[0]
	fs := newFlagSet("dlq "+sub, stderr)
	natsURL := fs.str("nats-url", "nats://127.0.0.1:4222", "NATS server URL")
	natsSec := addNATSSecurityFlags(fs)
	prefix := fs.str("subject-prefix", "proxbus", "subject prefix")
	limit := fs.Int("limit", 100, "list at most this many")
	output := outputFlag(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	format, err := outputOf(output)
	if err != nil {
		return err
	}
	nc, js, err := app.ConnectClient(*natsURL, natsSec.security())
	if err != nil {
		return err
	}
	defer nc.Close()
	subjects := events.NewSubjects(*prefix)
	seqArg := func() (uint64, error) {
		if fs.NArg() != 1 {
			return 0, fmt.Errorf("%w: proxbus dlq %s SEQ", errUsage, sub)
		}
		n, err := strconv.ParseUint(fs.Arg(0), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: SEQ must be a stream sequence number", errUsage)
		}
		return n, nil
	}
	switch sub {
	case "list":
		dls, err := consumer.ListDeadLetters(ctx, js, subjects, *limit)
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
		fmt.Fprintln(tw, "SEQ\tTIME\tREASON\tORIGINAL SUBJECT")
		for _, d := range dls {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", d.Seq, d.Time.UTC().Format(time.RFC3339), d.Reason, d.OriginalSubject)
		}
		return tw.Flush()
	case "show":
		seq, err := seqArg()
		if err != nil {
			return err
		}
		d, err := consumer.GetDeadLetter(ctx, js, subjects, seq)
		if err != nil {
			return err
		}
		if format == outputJSON {
			doc := deadLetterDoc{dlqSummary: deadLetterSummary(d), Header: map[string][]string(d.Header), Data: rawOrString(d.Data)}
			return writeJSONLine(stdout, doc)
		}
		fmt.Fprintf(stdout, "seq: %d\nsubject: %s\nreason: %s\noriginal subject: %s\ntime: %s\n", d.Seq, d.Subject, d.Reason, d.OriginalSubject, d.Time.UTC().Format(time.RFC3339))
		for _, k := range slices.Sorted(maps.Keys(d.Header)) {
			for _, v := range d.Header[k] {
				fmt.Fprintf(stdout, "header %s: %s\n", k, v)
			}
		}
		fmt.Fprintf(stdout, "\n%s\n", d.Data)
		return nil
	case "replay":
		seq, err := seqArg()
		if err != nil {
			return err
		}
		newSeq, err := consumer.ReplayDeadLetter(ctx, js, subjects, seq)
		if err != nil {
			return err
		}
		if format == outputJSON {
			return writeJSONLine(stdout, map[string]uint64{"dead_letter_seq": seq, "command_seq": newSeq})
		}
		fmt.Fprintf(stdout, "replayed dead letter %d as command stream seq %d\n", seq, newSeq)
		return nil
	default:
		return fmt.Errorf("%w: proxbus dlq list|show SEQ|replay SEQ", errUsage)
	}
}

// dlqSummary is one dead letter in `dlq list --output json`.
type dlqSummary struct {
	Seq             uint64    `json:"seq"`
	Subject         string    `json:"subject"`
	Reason          string    `json:"reason"`
	OriginalSubject string    `json:"original_subject"`
	Time            time.Time `json:"time"`
}

// deadLetterDoc is `dlq show --output json`: the summary, the stored headers and the
// (redacted) body, as JSON when it is JSON.
type deadLetterDoc struct {
	dlqSummary
	Header map[string][]string `json:"header,omitempty"`
	Data   any                 `json:"data"`
}

func deadLetterSummary(d consumer.DeadLetter) dlqSummary {
	return dlqSummary{Seq: d.Seq, Subject: d.Subject, Reason: d.Reason, OriginalSubject: d.OriginalSubject, Time: d.Time.UTC()}
}
