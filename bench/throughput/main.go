// Command throughput measures proxbus's command throughput side by side with the machine's
// limit in one run (issue #6, part 1). For each concurrency it runs, in rounds, proxbus
// (app.Serve in-process), the framework-free baseline (the same broker, Redis and HTTP
// operations per command) and the raw JetStream fetch+ack loop, each on a fresh deployment
// draining -n pre-published storage.pbs.create commands. Interleaving the three in every round
// (proxbus and the baseline swap places every round; every drain starts after a GC) keeps a
// busy machine from favouring one of them; the table reports medians and the median of the
// per-round proxbus ÷ baseline ratios. Before each drain it waits (up to 70 s) until
// fewer than 5,000 sockets are in TIME_WAIT, so that one run's closed connections cannot
// exhaust the ephemeral ports of the next. It then counts one pass of proxbus and of the
// baseline through a counting Redis proxy and prints both request counts.
//
//	go -C bench run ./throughput                 # -n 2000 -rounds 5 -c 1,8,64
//	go -C bench run ./throughput -short          # CI: a few commands, one round
//	go -C bench run ./throughput -cpuprofile cpu.out -memprofile mem.out -only proxbus -c 8
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/proxbus/proxbus/bench/internal/harness"
)

func main() {
	n := flag.Int("n", 2000, "commands per drain")
	rounds := flag.Int("rounds", 5, "rounds (each runs every mode once)")
	cs := flag.String("c", "1,8,64", "concurrencies")
	only := flag.String("only", "", "run only this mode (proxbus, baseline, raw)")
	short := flag.Bool("short", false, "CI smoke run: 20 commands, one round, c=8")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run")
	memprofile := flag.String("memprofile", "", "write an allocation profile at the end")
	traceFile := flag.String("trace", "", "write an execution trace of the whole run (go tool trace)")
	flag.Parse()
	if *short {
		*n, *rounds, *cs = 20, 1, "8"
	}
	stopProfiling, err := harness.StartProfiling(*cpuprofile, *traceFile)
	if err != nil {
		log.Fatal(err)
	}
	err = run(*n, *rounds, *cs, *only)
	if perr := stopProfiling(); perr != nil {
		log.Print(perr)
	}
	if err != nil {
		log.Fatal(err)
	}
	if *memprofile != "" {
		f, err := os.Create(*memprofile)
		if err != nil {
			log.Fatal(err)
		}
		runtime.GC()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			log.Fatal(err)
		}
		_ = f.Close()
	}
}

var modes = []struct {
	name string
	run  harness.Runner
}{
	{"proxbus", harness.Proxbus},
	{"baseline", harness.Baseline},
	{"raw", harness.Raw},
}

// roundOrder is the order of the modes in round r: proxbus and the baseline swap places every
// round, so neither always runs right after the other (or after the raw loop).
func roundOrder(r int) []struct {
	name string
	run  harness.Runner
} {
	if r%2 == 0 {
		return modes
	}
	return []struct {
		name string
		run  harness.Runner
	}{modes[1], modes[0], modes[2]}
}

func run(n, rounds int, cs, only string) error {
	ctx := context.Background()
	fmt.Printf("# throughput: %d commands per drain, %d rounds, GOMAXPROCS %d, %s\n", n, rounds, runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Println("| concurrency | proxbus cmds/s | baseline cmds/s | raw fetch+ack msgs/s | proxbus ÷ baseline (median of rounds) | rounds (proxbus/baseline) |")
	fmt.Println("|---:|---:|---:|---:|---:|---|")
	for _, cstr := range strings.Split(cs, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(cstr))
		if err != nil {
			return fmt.Errorf("-c: %w", err)
		}
		rates := map[string][]float64{}
		var ratios []float64
		var per []string
		for r := range rounds {
			got := map[string]float64{}
			for _, m := range roundOrder(r) {
				if only != "" && m.name != only {
					continue
				}
				rate, err := drain(ctx, fmt.Sprintf("%s%d", m.name[:1], r), n, c, m.run)
				if err != nil {
					return fmt.Errorf("%s c=%d: %w", m.name, c, err)
				}
				rates[m.name] = append(rates[m.name], rate)
				got[m.name] = rate
			}
			if got["baseline"] > 0 && got["proxbus"] > 0 {
				ratios = append(ratios, got["proxbus"]/got["baseline"])
				per = append(per, fmt.Sprintf("%.0f/%.0f", got["proxbus"], got["baseline"]))
			}
		}
		fmt.Printf("| %d | %.0f | %.0f | %.0f | %.2f | %s |\n", c, harness.Median(rates["proxbus"]), harness.Median(rates["baseline"]),
			harness.Median(rates["raw"]), harness.Median(ratios), strings.Join(per, ", "))
	}
	if only == "" {
		return counts(ctx, min(n, 200))
	}
	return nil
}

func drain(ctx context.Context, run string, n, c int, r harness.Runner) (float64, error) {
	if waited := harness.CoolDown(5000, 70*time.Second); waited > time.Second {
		fmt.Fprintf(os.Stderr, "waited %s for TIME_WAIT sockets to expire\n", waited.Round(time.Second))
	}
	runtime.GC() // each drain starts from a collected heap, not the garbage of the one before
	e, err := harness.Start(harness.Options{})
	if err != nil {
		return 0, err
	}
	defer e.Close()
	t, err := e.MeasureThroughput(ctx, run, n, c, r)
	if err != nil {
		return 0, err
	}
	if t.Redelivered > 0 || t.Summary.Replayed > 0 {
		fmt.Fprintf(os.Stderr, "%s c=%d: %d redelivered, %d replayed results, first→last result %s\n",
			run, c, t.Redelivered, t.Summary.Replayed, t.Summary.Last.Sub(t.Summary.First).Round(time.Millisecond))
	}
	return t.Rate, nil
}

// counts runs n commands through proxbus and through the baseline behind the counters and
// prints what each did per command.
func counts(ctx context.Context, n int) error {
	fmt.Printf("\n# requests per command (%d commands, c=8, counted)\n", n)
	for _, m := range modes[:2] {
		e, err := harness.Start(harness.Options{CountRedis: true})
		if err != nil {
			return err
		}
		t, err := e.MeasureThroughput(ctx, "n", n, 8, m.run)
		if err != nil {
			e.Close()
			return err
		}
		fmt.Printf("%-8s redis: %s\n", m.name, harness.FormatCounts(e.RedisCount.Snapshot(), n))
		fmt.Printf("%-8s proxmox: %s\n", m.name, harness.FormatCounts(e.PVECount.Snapshot(), n))
		fmt.Printf("%-8s netbox: %s\n", m.name, harness.FormatCounts(e.NetBoxCount.Snapshot(), n))
		fmt.Printf("%-8s events: %.2f steps, %.2f results per command; statuses %v\n", m.name,
			float64(t.Summary.Steps)/float64(n), float64(t.Summary.Results)/float64(n), t.Summary.Statuses)
		e.Close()
	}
	return nil
}
