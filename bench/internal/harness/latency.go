package harness

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
)

// Latency is the publish → result latency of one open-loop run.
type Latency struct {
	// Offered is the publish rate asked for, Achieved the rate the publisher kept.
	Offered, Achieved float64
	// Sorted holds every measured latency (warm-up excluded), ascending.
	Sorted         []time.Duration
	P50, P99, P999 time.Duration
	Statuses       map[int]int
}

// MeasureLatency runs r with the given concurrency and publishes storage.pbs.create commands
// of run at a steady rate (open loop: a command is sent on schedule whether or not earlier
// ones finished, with asynchronous publishes) for d, then waits for every result. Each
// latency runs from just before a command's publish to its result's arrival at the collector.
// The first 5% of commands are a warm-up and not reported.
func (e *Env) MeasureLatency(ctx context.Context, run string, rate float64, d time.Duration, concurrency int, r Runner) (Latency, error) {
	n := max(int(rate*d.Seconds()), 1)
	if err := e.Provision(ctx, concurrency); err != nil {
		return Latency{}, err
	}
	c, err := e.NewCollector(n, func(ref string) { e.PVE.RemoveStorage("b" + ref) })
	if err != nil {
		return Latency{}, err
	}
	defer c.Close()
	stop, err := r(ctx, e, concurrency, c)
	if err != nil {
		return Latency{}, err
	}
	js, err := jetstream.New(e.NC, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		_ = stop()
		return Latency{}, fmt.Errorf("jetstream: %w", err)
	}
	msgs := make([]events.Command, n)
	for i := range msgs {
		msgs[i] = PBSCommand(run, i)
	}
	sent := make([]time.Time, n)
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	for i := range n {
		m, err := events.EncodeBinary(e.Subjects, msgs[i])
		if err != nil {
			_ = stop()
			return Latency{}, err
		}
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		sent[i] = time.Now()
		if _, err := js.PublishMsgAsync(m); err != nil {
			_ = stop()
			return Latency{}, fmt.Errorf("publish: %w", err)
		}
	}
	achieved := float64(n) / time.Since(start).Seconds()
	waitErr := c.Wait(30*time.Second + d)
	stopErr := stop()
	if waitErr != nil {
		return Latency{}, waitErr
	}
	if stopErr != nil {
		return Latency{}, fmt.Errorf("stop: %w", stopErr)
	}
	l := Latency{Offered: rate, Achieved: achieved, Statuses: c.Summary().Statuses}
	for i := n / 20; i < n; i++ {
		at, ok := c.Arrival(msgs[i].Ref())
		if !ok {
			return Latency{}, fmt.Errorf("no result for %s", msgs[i].ID)
		}
		l.Sorted = append(l.Sorted, at.Sub(sent[i]))
	}
	lat := LatencyOf(l.Sorted)
	lat.Offered, lat.Achieved, lat.Statuses = l.Offered, l.Achieved, l.Statuses
	return lat, nil
}

// LatencyOf returns the percentiles of samples (sorted in place); the rates and statuses are
// left zero. Samples pooled from several runs give the percentiles of all of them.
func LatencyOf(samples []time.Duration) Latency {
	slices.Sort(samples)
	return Latency{Sorted: samples, P50: Percentile(samples, 50), P99: Percentile(samples, 99), P999: Percentile(samples, 99.9)}
}
