package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/proxbus/proxbus/store"
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
	return storeList[store.Repair]{
		name:   "journal pending",
		list:   func(ctx context.Context, st *store.Store) ([]store.Repair, error) { return st.PendingRepairs(ctx) },
		header: "COMMAND\tVERB\tJOURNAL ENTRY\tATTEMPTS\tNEXT\tLAST ERROR",
		row: func(r store.Repair) string {
			return fmt.Sprintf("%s %s\t%s\t%s\t%d\t%s\t%s", r.Command.Source, r.Command.ID, r.Verb, r.JournalURL, r.Attempts,
				r.NextAt.UTC().Format(time.RFC3339), r.LastError)
		},
		footer: func(n int) string { return fmt.Sprintf("%d pending", n) },
	}.run(ctx, args[1:], stdout, stderr)
}
