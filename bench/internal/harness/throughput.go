package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
)

// Runner starts a command processor on e with the given concurrency and returns its stop,
// which drains it and waits for it. It reports each finished command either by publishing a
// result event (the collector sees it) or with c.Mark.
type Runner func(ctx context.Context, e *Env, concurrency int, c *Collector) (stop func() error, err error)

// Proxbus is the Runner of proxbus itself: app.Serve with [Env.ProxbusConfig].
func Proxbus(ctx context.Context, e *Env, concurrency int, _ *Collector) (func() error, error) {
	return RunProxbus(ctx, e.ProxbusConfig(concurrency))
}

// Provision creates the streams and the durable consumer exactly as proxbus does for the
// given concurrency (MaxAckPending = concurrency).
func (e *Env) Provision(ctx context.Context, concurrency int) error {
	cfg := consumer.Config{Subjects: e.Subjects, Concurrency: concurrency}.WithDefaults()
	if err := consumer.Provision(ctx, e.JS, cfg); err != nil {
		return fmt.Errorf("provision: %w", err)
	}
	return nil
}

// Throughput is one drain measurement.
type Throughput struct {
	N           int
	Concurrency int
	// Elapsed runs from the runner's start to the last result.
	Elapsed time.Duration
	// Rate is commands per second between the first and the last result ((N-1)/span), which
	// leaves the runner's start-up out; for N < 100 it is N/Elapsed.
	Rate    float64
	Summary Summary
	// Redelivered is the durable consumer's NumRedelivered after the drain (-1: unknown).
	Redelivered int
}

// MeasureThroughput publishes n storage.pbs.create commands of run, then starts r and times
// the drain until all n results arrived. Each created storage is removed from the simulator
// as soon as its result arrives, so GET /storage (which returns every storage) stays small.
func (e *Env) MeasureThroughput(ctx context.Context, run string, n, concurrency int, r Runner) (Throughput, error) {
	if err := e.Provision(ctx, concurrency); err != nil {
		return Throughput{}, err
	}
	cmds := make([]events.Command, n)
	for i := range cmds {
		cmds[i] = PBSCommand(run, i)
	}
	c, err := e.NewCollector(n, func(ref string) { e.PVE.RemoveStorage("b" + ref) })
	if err != nil {
		return Throughput{}, err
	}
	defer c.Close()
	if err := e.PublishAll(ctx, cmds); err != nil {
		return Throughput{}, err
	}
	start := time.Now()
	stop, err := r(ctx, e, concurrency, c)
	if err != nil {
		return Throughput{}, err
	}
	waitErr := c.Wait(time.Duration(n)*50*time.Millisecond + 30*time.Second)
	stopErr := stop()
	if waitErr != nil || stopErr != nil {
		return Throughput{}, errors.Join(waitErr, stopErr)
	}
	s := c.Summary()
	t := Throughput{N: n, Concurrency: concurrency, Elapsed: s.Last.Sub(start), Summary: s, Redelivered: -1}
	if cons, err := e.JS.Consumer(ctx, e.Subjects.CommandsStream(), "proxbus"); err == nil {
		if info, err := cons.Info(ctx); err == nil {
			t.Redelivered = info.NumRedelivered
		}
	}
	if span := s.Last.Sub(s.First); n >= 100 && span > 0 {
		t.Rate = float64(n-1) / span.Seconds()
	} else {
		t.Rate = float64(n) / t.Elapsed.Seconds()
	}
	return t, nil
}
