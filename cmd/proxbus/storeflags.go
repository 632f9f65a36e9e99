package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/presence"
	"github.com/proxbus/proxbus/store"
)

// errNotServed: the subcommand works on a store (a Redis key prefix) that no replica serves;
// whatever it wrote there no replica would read.
var errNotServed = errors.New("no replica serves this store")

// openServedStore opens the store of f (--redis-url, --redis-key-prefix) for a client
// subcommand that reads or writes it directly, after checking that a replica announced that
// prefix in that Redis: otherwise it fails naming the prefixes that are served, since a
// cancellation stored there would cancel nothing, and a listing would be empty for no reason.
// close releases the connection.
func openServedStore(ctx context.Context, e *cliEnv, f *storeFlags) (st *store.Store, close func() error, err error) {
	rdb, err := app.RedisClient(f.RedisURL, app.Security{})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", errUsage, e.shown("redis-url"), err)
	}
	running, err := presence.Check(ctx, rdb, f.RedisKeyPrefix, time.Now())
	switch {
	case errors.Is(err, presence.ErrNotServed):
		rdb.Close()
		return nil, nil, fmt.Errorf("%w: %s %q at %s: %v; pass serve's --redis-key-prefix (and --redis-url); nothing was done",
			errNotServed, e.shown("redis-key-prefix"), f.RedisKeyPrefix, app.RedactURL(f.RedisURL), err)
	case err != nil:
		rdb.Close()
		return nil, nil, fmt.Errorf("%s %s: %w", e.shown("redis-url"), app.RedactURL(f.RedisURL), err)
	case !running:
		fmt.Fprintf(e.stderr, "note: no replica serving key prefix %q has been seen in the last %s; the store is read and written all the same\n",
			f.RedisKeyPrefix, presence.Live)
	}
	st, err = store.New(rdb, store.Options{Prefix: f.RedisKeyPrefix})
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	return st, rdb.Close, nil
}

// storeListFlags are the flags of a listing subcommand that reads the store.
type storeListFlags struct {
	storeFlags
	outputFlags
}

// storeList is a listing subcommand that reads the store (journal pending, pending): its
// flags --redis-url, --redis-key-prefix (dev's when not given) and --output.
type storeList[T any] struct {
	list   func(ctx context.Context, st *store.Store) ([]T, error) // what it lists
	header string                                                  // the table's tab-separated header
	row    func(T) string                                          // one tab-separated row
	footer func(n int) string                                      // the line after the table
}

// run prints the list: a table and the footer with --output text, one JSON line per item with
// --output json.
func (l storeList[T]) run(e *cliEnv, f *storeListFlags) error {
	format, err := outputOf(&f.Output)
	if err != nil {
		return err
	}
	e.redisFromDev(&f.RedisURL, &f.RedisKeyPrefix)
	st, closeStore, err := openServedStore(e.ctx, e, &f.storeFlags)
	if err != nil {
		return err
	}
	defer closeStore()
	items, err := l.list(e.ctx, st)
	if err != nil {
		return err
	}
	stdout := e.stdout
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

// connectServed opens NATS and the store the replicas serve, for the subcommands that read
// both (status, schedule list): without --redis-url, a running `proxbus dev`'s. closeBoth
// closes the store, then NATS.
func (e *cliEnv) connectServed(nf *natsFlags, sf *storeFlags) (client *natsClient, st *store.Store, closeBoth func(), err error) {
	e.redisFromDev(&sf.RedisURL, &sf.RedisKeyPrefix)
	if client, err = e.connectNATS(nf, app.InboxCLI); err != nil {
		return nil, nil, nil, err
	}
	st, closeStore, err := openServedStore(client.ctx, e, sf)
	if err != nil {
		client.Close()
		return nil, nil, nil, err
	}
	return client, st, func() { _ = closeStore(); client.Close() }, nil
}
