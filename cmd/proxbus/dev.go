package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/console"
	"github.com/proxbus/proxbus/store"
)

// devCmd is `proxbus dev` (contract §10): the embedded infrastructure and a processor until
// interrupted. Once ready it writes its run file (see [devRun]; removed when it returns, unless
// another dev replaced it), prints the nats, redis, pve and netbox lines and ready, then a
// note when the NATS port asked for was taken and the run file's path. --demo plays the tour
// and returns. It refuses to start while another live dev owns the run file.
type devCmd struct {
	Demo         bool          `name:"demo" help:"Play a scripted tour of every verb, then exit (0 only when every outcome matched)."`
	RedisURL     string        `name:"redis-url" help:"Use this Redis instead of the embedded, non-durable one."`
	NATSPort     int           `name:"nats-port" default:"${dev_nats_port}" help:"Embedded NATS port to try first (a free one when taken; -1: any free port)."`
	HTTPAddr     string        `name:"http-addr" default:"${dev_http_addr}" help:"Listen address of the web console /ui, /metrics, /healthz and /readyz (a free loopback port when the default is taken)."`
	TaskDuration time.Duration `name:"task-duration" default:"0s" help:"How long each simulated Proxmox task runs (0: 50ms), e.g. 30s to watch a progress bar."`
	consoleFlags
	logFlags
}

// cmdDev runs `proxbus dev args` until ctx ends.
func cmdDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runSub(ctx, []string{"dev"}, args, nil, stdout, stderr)
}

// Run runs dev until e's context ends.
func (c *devCmd) Run(e *cliEnv) error {
	ctx, stdout := e.ctx, e.stdout
	ui, errUI := c.consoleFlags.config(e, true) // without token files: anonymous on loopback only
	errs := append(c.logFlags.check(e), errUI, e.intIn("nats-port", c.NATSPort, -1, 65535), e.intIn("ui-history", c.UIHistory, 100, maxConsoleHistory),
		e.durationIn("task-duration", c.TaskDuration, 0, maxTaskDuration))
	if err := e.problems(errs...); err != nil {
		return err
	}
	runPath := devRunPath(e.getenv)
	pid := os.Getpid()
	if err := claimDevRun(runPath, pid); err != nil {
		return err
	}
	ln, httpTaken, err := devListen(c.HTTPAddr, e.explicit("http-addr"))
	if err != nil {
		return err
	}
	defer ln.Close()
	h, err := c.logFlags.handler(e)
	if err != nil {
		return err
	}
	log := slog.New(h)
	env, err := app.StartDev(app.DevOptions{RedisURL: c.RedisURL, NATSPort: c.NATSPort, TaskDuration: c.TaskDuration, Logger: log.With("component", "sim")})
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
	cfg.HTTPListener, cfg.Console = ln, ui
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
	if err := claimDevRun(runPath, pid); err != nil { // another dev became ready meanwhile
		return err
	}
	runErr := writeDevRun(runPath, devRun{
		PID: pid, NATSURL: env.NATSURL, RedisURL: env.RedisURL, PVEURL: env.PVEURL, NetBoxURL: env.NetBoxURL,
		SubjectPrefix: events.NewSubjects(cfg.Consumer.Subjects.Prefix).Prefix, RedisKeyPrefix: cmp.Or(cfg.Store.Prefix, store.DefaultPrefix),
	})
	if runErr == nil {
		defer removeDevRun(runPath, pid)
	}
	fmt.Fprintf(stdout, "nats: %s\nredis: %s\npve: %s\nnetbox: %s\nui: %s\nready\n", env.NATSURL, env.RedisURL, env.PVEURL, env.NetBoxURL, consoleURL(ln))
	if env.NATSPortTaken != 0 {
		fmt.Fprintf(stdout, "note: NATS port %d is taken (another NATS server?), so dev's NATS listens on port %s\n", env.NATSPortTaken, urlPort(env.NATSURL))
	}
	if httpTaken != "" {
		fmt.Fprintf(stdout, "note: %s is taken, so dev's web console listens on %s\n", httpTaken, ln.Addr())
	}
	if !ui.Access.AnonymousLoopback {
		fmt.Fprintln(stdout, "note: the web console asks for the token of --ui-token-file or --ui-operator-token-file")
	}
	if runErr == nil {
		fmt.Fprintf(stdout, "run file: %s (send, events, dlq, journal pending and streams apply use these URLs when given none)\n", runPath)
	} else {
		log.Warn("the other subcommands will not find dev: pass them --nats-url and --redis-url", "err", runErr)
	}

	if c.Demo {
		demoErr := playDemo(ctx, env, stdout)
		stopServe()
		if err := <-serveErr; err != nil && demoErr == nil {
			demoErr = err
		}
		return demoErr
	}
	return <-serveErr
}

// maxTaskDuration bounds --task-duration: a simulated task longer than this only stalls.
const maxTaskDuration = time.Hour

// defaultDevHTTPAddr is where dev serves the web console unless told otherwise.
const defaultDevHTTPAddr = "127.0.0.1:8090"

// devListen binds addr for dev's HTTP server. When addr is the default (not explicit) and
// taken, it binds a free loopback port instead and returns the address that was taken.
func devListen(addr string, explicit bool) (net.Listener, string, error) {
	ln, err := app.ListenHTTP(addr, nil)
	if err == nil || explicit {
		return ln, "", err
	}
	ln, err = app.ListenHTTP("127.0.0.1:0", nil)
	return ln, addr, err
}

// consoleURL is the web console's address on ln, as a browser opens it.
func consoleURL(ln net.Listener) string {
	return "http://" + ln.Addr().String() + console.Path
}

// urlPort is the port of URL u, or u itself when it has none.
func urlPort(u string) string {
	if p, err := url.Parse(u); err == nil && p.Port() != "" {
		return p.Port()
	}
	return u
}

func playDemo(ctx context.Context, env *app.DevEnv, stdout io.Writer) error {
	nc, js, err := app.Connect(env.NATSURL)
	if err != nil {
		return err
	}
	defer nc.Close()
	return app.RunDemo(ctx, js, events.NewSubjects(""), env.Images, stdout)
}
