package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/store"
)

// openStore opens the store at redisURL (the --redis-url value) with key prefix, for the
// client subcommands that read or write it directly; close releases the connection.
func openStore(redisURL, prefix string) (st *store.Store, close func() error, err error) {
	rdb, err := app.RedisClient(redisURL, app.Security{})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: --redis-url: %v", errUsage, err)
	}
	st, err = store.New(rdb, store.Options{Prefix: prefix})
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	return st, rdb.Close, nil
}

// storeList is a listing subcommand that reads the store (journal pending, pending): its
// flags --redis-url, --redis-key-prefix (dev's when not given) and --output.
type storeList[T any] struct {
	name   string                                                  // as the usage names it
	list   func(ctx context.Context, st *store.Store) ([]T, error) // what it lists
	header string                                                  // the table's tab-separated header
	row    func(T) string                                          // one tab-separated row
	footer func(n int) string                                      // the line after the table
}

// run parses args and prints the list: a table and the footer with --output text, one JSON
// line per item with --output json.
func (l storeList[T]) run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(l.name, stderr)
	redisURL := fs.str("redis-url", app.DefaultRedisURL, "Redis URL of the store the replicas use")
	prefix := addRedisKeyPrefixFlag(fs)
	output := outputFlag(fs)
	if err := fs.Parse(args); err != nil {
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
	items, err := l.list(ctx, st)
	if err != nil {
		return err
	}
	if format == outputJSON {
		for _, it := range items {
			if err := writeJSONLine(stdout, it); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, l.header)
	for _, it := range items {
		fmt.Fprintln(tw, l.row(it))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stdout, l.footer(len(items)))
	return nil
}
