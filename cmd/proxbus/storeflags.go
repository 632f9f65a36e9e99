package main

import (
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/proxbus/proxbus/internal/store"
)

// openStore opens the store at redisURL (the --redis-url value) with key prefix, for the
// client subcommands that read or write it directly; close releases the connection.
func openStore(redisURL, prefix string) (st *store.Store, close func() error, err error) {
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: --redis-url: %v", errUsage, err)
	}
	rdb := redis.NewClient(opts)
	st, err = store.New(rdb, store.Options{Prefix: prefix})
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	return st, rdb.Close, nil
}
