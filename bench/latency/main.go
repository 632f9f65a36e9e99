// Command latency measures publish → result latency of storage.pbs.create through proxbus and
// through the framework-free baseline (issue #6, part 2). It first measures proxbus's maximum
// drain rate at the given concurrency, then offers both the same steady load, 20% and 80% of
// that rate (open loop), and prints p50/p99/p99.9 and what proxbus adds over the baseline.
//
// Each load point runs in rounds (-rounds, d/rounds each), every round running proxbus and the
// baseline once, each on a fresh deployment, in alternating order; the percentiles are taken
// over the samples of all rounds. On a shared two-core VM a stall of a second or two moves a
// p99 by milliseconds: in one long window per mode it lands on one of them, in interleaved
// rounds on both alike. The p99 each round added is printed too.
//
//	go -C bench run ./latency                 # -c 8 -d 20s -rounds 4
//	go -C bench run ./latency -short          # CI: a second per point
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"runtime"
	"time"

	"github.com/proxbus/proxbus/bench/internal/harness"
)

func main() {
	c := flag.Int("c", 8, "concurrency (proxbus --concurrency)")
	d := flag.Duration("d", 20*time.Second, "duration of each load point")
	n := flag.Int("n", 2000, "commands of the maximum-rate drain")
	rounds := flag.Int("rounds", 4, "rounds per load point, each running both for d/rounds")
	short := flag.Bool("short", false, "CI smoke run")
	flag.Parse()
	if *short {
		*d, *n, *rounds = time.Second, 100, 1
	}
	if *rounds < 1 {
		log.Fatal("-rounds must be at least 1")
	}
	if err := run(*c, *n, *d, *rounds); err != nil {
		log.Fatal(err)
	}
}

// runners are the two measured, in the order each point runs them.
var runners = []struct {
	name string
	r    harness.Runner
}{{"proxbus", harness.Proxbus}, {"baseline", harness.Baseline}}

func run(c, n int, d time.Duration, rounds int) error {
	ctx := context.Background()
	maxRate := map[string]float64{}
	for _, m := range runners {
		e, err := harness.Start(harness.Options{})
		if err != nil {
			return err
		}
		t, err := e.MeasureThroughput(ctx, "m", n, c, m.r)
		e.Close()
		if err != nil {
			return err
		}
		maxRate[m.name] = t.Rate
	}
	fmt.Printf("# latency: publish → result, concurrency %d, %s per point in %d interleaved rounds, GOMAXPROCS %d, %s\n", c, d, rounds, runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Printf("# maximum drain rate: proxbus %.0f cmds/s, baseline %.0f cmds/s; loads are fractions of proxbus's\n\n", maxRate["proxbus"], maxRate["baseline"])
	fmt.Println("| load | offered cmds/s | mode | samples | p50 | p99 | p99.9 | p99 of each round |")
	fmt.Println("|---|---:|---|---:|---:|---:|---:|---|")
	for _, frac := range []float64{0.2, 0.8} {
		rate := frac * maxRate["proxbus"]
		pooled := map[string][]time.Duration{}
		achieved := map[string]float64{}
		perRound := map[string][]time.Duration{}
		for round := range rounds {
			for i := range runners {
				m := runners[(i+round)%len(runners)] // alternate which runs first
				e, err := harness.Start(harness.Options{})
				if err != nil {
					return err
				}
				l, err := e.MeasureLatency(ctx, fmt.Sprintf("l%d", round), rate, d/time.Duration(rounds), c, m.r)
				e.Close()
				if err != nil {
					return fmt.Errorf("%s at %.0f/s: %w", m.name, rate, err)
				}
				pooled[m.name] = append(pooled[m.name], l.Sorted...)
				achieved[m.name] += l.Achieved / float64(rounds)
				perRound[m.name] = append(perRound[m.name], l.P99)
			}
		}
		got := map[string]harness.Latency{}
		for _, m := range runners {
			l := harness.LatencyOf(pooled[m.name])
			got[m.name] = l
			fmt.Printf("| %.0f%% | %.0f | %s | %d | %s | %s | %s | %s |\n", frac*100, achieved[m.name], m.name, len(l.Sorted), ms(l.P50), ms(l.P99), ms(l.P999), list(perRound[m.name]))
		}
		p, b := got["proxbus"], got["baseline"]
		added := make([]time.Duration, rounds)
		for i := range added {
			added[i] = perRound["proxbus"][i] - perRound["baseline"][i]
		}
		fmt.Printf("| %.0f%% | | added by proxbus | | %s | %s | %s | %s |\n", frac*100, ms(p.P50-b.P50), ms(p.P99-b.P99), ms(p.P999-b.P999), list(added))
	}
	return nil
}

// list formats durations as milliseconds, separated by slashes.
func list(ds []time.Duration) string {
	out := ""
	for i, d := range ds {
		if i > 0 {
			out += " / "
		}
		out += fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond))
	}
	return out
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
