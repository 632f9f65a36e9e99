package main

import (
	"context"
	"fmt"
	"time"

	"github.com/proxbus/proxbus/store"
)

// journalCmd is `proxbus journal pending`: it lists the terminal journal updates still waiting to be applied (contract §6):
// a table and a count with --output text (the default), one JSON line per pending repair (the
// stored record, whose comments are already redacted) with --output json. Without
// --redis-url it reads the store of a running `proxbus dev`, with its key prefix (see
// [cliEnv.redisFromDev]).
type journalCmd struct {
	Pending journalPendingCmd `cmd:"" help:"List the journal updates waiting for NetBox."`
}

// journalPendingCmd is `proxbus journal pending`.
type journalPendingCmd struct{ storeListFlags }

// Run prints the list.
func (c *journalPendingCmd) Run(e *cliEnv) error {
	return storeList[store.Repair]{
		list:   func(ctx context.Context, st *store.Store) ([]store.Repair, error) { return st.PendingRepairs(ctx) },
		header: "COMMAND\tVERB\tJOURNAL ENTRY\tATTEMPTS\tNEXT\tLAST ERROR",
		row: func(r store.Repair) string {
			return fmt.Sprintf("%s %s\t%s\t%s\t%d\t%s\t%s", r.Command.Source, r.Command.ID, r.Verb, r.JournalURL, r.Attempts,
				r.NextAt.UTC().Format(time.RFC3339), r.LastError)
		},
		footer: func(n int) string { return fmt.Sprintf("%d pending", n) },
	}.run(e, &c.storeListFlags)
}
