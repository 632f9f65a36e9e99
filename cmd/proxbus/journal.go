package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/proxbus/proxbus/internal/app"
)

// cmdJournal lists the terminal journal updates still waiting to be applied (contract §6):
// a table and a count with --output text (the default), one JSON line per pending repair (the
// stored record, whose comments are already redacted) with --output json. Without
// --redis-url it reads the store of a running `proxbus dev`, with its key prefix (see
// [flagSet.redisFromDev]).
func cmdJournal(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "pending" {
		return fmt.Errorf("%w: proxbus journal pending", errUsage)
	}
	fs := newFlagSet("journal pending", stderr)
	redisURL := fs.str("redis-url", app.DefaultRedisURL, "Redis URL")
	prefix := addRedisKeyPrefixFlag(fs)
	output := outputFlag(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	format, err := outputOf(output)
	if err != nil {
		return err
	}

	fs.redisFromDev(stderr, redisURL, prefix)
	st, closeStore, err := openStore(*redisURL, *prefix)
	if err != nil {
		return err
	}
	defer closeStore()
	repairs, err := st.PendingRepairs(ctx)
	if err != nil {
		return err
	}
	if format == outputJSON {
		for _, r := range repairs {
			if err := writeJSONLine(stdout, r); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COMMAND\tVERB\tJOURNAL ENTRY\tATTEMPTS\tNEXT\tLAST ERROR")
	for _, r := range repairs {
		fmt.Fprintf(tw, "%s %s\t%s\t%s\t%d\t%s\t%s\n", r.Command.Source, r.Command.ID, r.Verb, r.JournalURL, r.Attempts,
			r.NextAt.UTC().Format(time.RFC3339), r.LastError)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d pending\n", len(repairs))
	return nil
}
