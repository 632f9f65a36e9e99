package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
)

func cmdDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("dev", stderr)
	demo := fs.Bool("demo", false, "play a scripted tour of every verb, then exit (0 only when every outcome matched)")
	redisURL := fs.String("redis-url", "", "use this Redis instead of the embedded, non-durable one")
	natsPort := fs.Int("nats-port", app.DefaultDevNATSPort, "embedded NATS port to try first (a free one when taken; -1: any free port)")
	fs.checkInt("nats-port", natsPort, -1, 65535) // -1: any free port
	logFormat, logLevel := addLogFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: dev takes no arguments (got %v)", errUsage, fs.Args())
	}
	if err := fs.problems(); err != nil {
		return err
	}
	h, err := logHandler(stderr, *logFormat, *logLevel)
	if err != nil {
		return err
	}
	log := slog.New(h)
	env, err := app.StartDev(app.DevOptions{RedisURL: *redisURL, NATSPort: *natsPort, Logger: log.With("component", "sim")})
	if err != nil {
		return err
	}
	defer env.Close()
	if env.RedisEmbedded {
		log.Warn("using the embedded Redis-protocol server: NOTHING IS DURABLE; pass --redis-url for a real Redis")
	}

	cfg := env.ServeConfig()
	cfg.LogHandler = h
	cfg.Instance = "dev"
	ready := make(chan struct{})
	var once sync.Once
	cfg.OnReady = func() { once.Do(func() { close(ready) }) }

	serveCtx, stopServe := context.WithCancel(ctx)
	defer stopServe()
	serveErr := make(chan error, 1)
	go func() { serveErr <- app.Serve(serveCtx, cfg) }()

	select {
	case err := <-serveErr:
		return fmt.Errorf("proxbus did not start: %w", err)
	case <-ready:
	}
	fmt.Fprintf(stdout, "nats: %s\nredis: %s\npve: %s\nnetbox: %s\nready\n", env.NATSURL, env.RedisURL, env.PVEURL, env.NetBoxURL)

	if *demo {
		demoErr := playDemo(ctx, env, stdout)
		stopServe()
		if err := <-serveErr; err != nil && demoErr == nil {
			demoErr = err
		}
		return demoErr
	}
	return <-serveErr
}

func playDemo(ctx context.Context, env *app.DevEnv, stdout io.Writer) error {
	nc, js, err := app.Connect(env.NATSURL)
	if err != nil {
		return err
	}
	defer nc.Close()
	return app.RunDemo(ctx, js, events.NewSubjects(""), env.Images, stdout)
}
