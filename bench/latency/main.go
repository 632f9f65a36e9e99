// Command latency measures publish → result latency of storage.pbs.create through proxbus and
// through the framework-free baseline (issue #6, part 2). It first measures proxbus's maximum
// drain rate at the given concurrency, then offers both the same steady load, 20% and 80% of
// that rate (open loop), and prints p50/p99/p99.9 and what proxbus adds over the baseline.
// Runs alternate proxbus and baseline, each on a fresh deployment.
//
//	go run ./bench/latency                 # -c 8 -d 20s
//	go run ./bench/latency -short          # CI: a second per point
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
	short := flag.Bool("short", false, "CI smoke run")
	flag.Parse()
	if *short {
		*d, *n = time.Second, 100
	}
	if err := run(*c, *n, *d); err != nil {
		log.Fatal(err)
	}
}

// runners are the two measured, in the order each point runs them.
var runners = []struct {
	name string
	r    harness.Runner
}{{"proxbus", harness.Proxbus}, {"baseline", harness.Baseline}}

func run(c, n int, d time.Duration) error {
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
	fmt.Printf("# latency: publish → result, concurrency %d, %s per point, GOMAXPROCS %d, %s\n", c, d, runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Printf("# maximum drain rate: proxbus %.0f cmds/s, baseline %.0f cmds/s; loads are fractions of proxbus's\n\n", maxRate["proxbus"], maxRate["baseline"])
	fmt.Println("| load | offered cmds/s | mode | samples | p50 | p99 | p99.9 |")
	fmt.Println("|---|---:|---|---:|---:|---:|---:|")
	for _, frac := range []float64{0.2, 0.8} {
		rate := frac * maxRate["proxbus"]
		got := map[string]harness.Latency{}
		for _, m := range runners {
			e, err := harness.Start(harness.Options{})
			if err != nil {
				return err
			}
			l, err := e.MeasureLatency(ctx, "l", rate, d, c, m.r)
			e.Close()
			if err != nil {
				return fmt.Errorf("%s at %.0f/s: %w", m.name, rate, err)
			}
			got[m.name] = l
			fmt.Printf("| %.0f%% | %.0f | %s | %d | %s | %s | %s |\n", frac*100, l.Achieved, m.name, len(l.Sorted), ms(l.P50), ms(l.P99), ms(l.P999))
		}
		p, b := got["proxbus"], got["baseline"]
		fmt.Printf("| %.0f%% | | added by proxbus | | %s | %s | %s |\n", frac*100, ms(p.P50-b.P50), ms(p.P99-b.P99), ms(p.P999-b.P999))
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
