// Command timeline shows where a command's time goes at concurrency 1, step by step, for
// proxbus and for the framework-free baseline side by side (issue #6: what proxbus adds). Each
// runner drains -n storage.pbs.create commands at concurrency 1 on a fresh deployment whose
// simulators, Redis proxy and broker subscriber mark when each request arrives (see
// harness.Timeline), in -rounds rounds with the order alternating; the table gives, for each
// pair of consecutive marks on a command's path, the median time between them. The marks are
// seen from outside the runner, so both are measured alike (the Redis proxy adds a hop to
// every Redis command of both).
//
//	go -C bench run ./timeline                  # -n 1000 -rounds 2
//	go -C bench run ./timeline -short           # CI: a few commands, one round
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
	n := flag.Int("n", 1000, "commands per drain")
	rounds := flag.Int("rounds", 2, "rounds (each runs proxbus and the baseline once)")
	short := flag.Bool("short", false, "CI smoke run: 20 commands, one round")
	flag.Parse()
	if *short {
		*n, *rounds = 20, 1
	}
	if err := run(*n, *rounds); err != nil {
		log.Fatal(err)
	}
}

// start is the mark a command's path begins with: the previous command's acknowledgement.
const start = "ack +ACK"

type runner struct {
	name string
	run  harness.Runner
}

var runners = []runner{{"proxbus", harness.Proxbus}, {"baseline", harness.Baseline}}

// drainResult is what one runner's drains gave, pooled over the rounds.
type drainResult struct {
	transitions map[[2]string][]time.Duration
	path        []harness.Transition // the first round's, in path order
	perCommand  []time.Duration      // first to last mark ÷ commands, per round
}

func run(n, rounds int) error {
	ctx := context.Background()
	fmt.Printf("# timeline: storage.pbs.create at concurrency 1, %d commands × %d rounds per runner, GOMAXPROCS %d, %s\n",
		n, rounds, runtime.GOMAXPROCS(0), runtime.Version())
	results := map[string]*drainResult{}
	for r := range rounds {
		order := runners
		if r%2 == 1 {
			order = []runner{runners[1], runners[0]}
		}
		for _, rn := range order {
			marks, err := drain(ctx, fmt.Sprintf("%s%d", rn.name[:1], r), n, rn.run)
			if err != nil {
				return fmt.Errorf("%s: %w", rn.name, err)
			}
			res := results[rn.name]
			if res == nil {
				res = &drainResult{transitions: map[[2]string][]time.Duration{}}
				results[rn.name] = res
			}
			trs := harness.Transitions(marks, start)
			if res.path == nil {
				res.path = trs
			}
			for _, tr := range trs {
				key := [2]string{tr.From, tr.To}
				res.transitions[key] = append(res.transitions[key], tr.Gaps...)
			}
			if len(marks) > 1 {
				res.perCommand = append(res.perCommand, marks[len(marks)-1].At.Sub(marks[0].At)/time.Duration(n))
			}
		}
	}
	printTable(results, n*rounds)
	return nil
}

// drain runs n commands through r at concurrency 1 on a fresh Env with a timeline and returns
// its marks.
func drain(ctx context.Context, run string, n int, r harness.Runner) ([]harness.TimelineMark, error) {
	runtime.GC()
	e, err := harness.Start(harness.Options{Timeline: true})
	if err != nil {
		return nil, err
	}
	defer e.Close()
	if _, err := e.MeasureThroughput(ctx, run, n, 1, r); err != nil {
		return nil, err
	}
	return e.Timeline.Marks(), nil
}

// printTable prints every pair of marks seen at least once per ten commands by either runner,
// in the order of proxbus's path, then the baseline's pairs proxbus did not have.
func printTable(results map[string]*drainResult, commands int) {
	var keys [][2]string
	seen := map[[2]string]bool{}
	for _, name := range []string{"proxbus", "baseline"} {
		for _, tr := range results[name].path {
			key := [2]string{tr.From, tr.To}
			if !seen[key] {
				seen[key] = true
				keys = append(keys, key)
			}
		}
	}
	fmt.Println("| from | to | proxbus median | times | baseline median | times |")
	fmt.Println("|---|---|---:|---:|---:|---:|")
	for _, key := range keys {
		p, b := results["proxbus"].transitions[key], results["baseline"].transitions[key]
		if 10*max(len(p), len(b)) < commands {
			continue
		}
		fmt.Printf("| %s | %s | %s | %d | %s | %d |\n", key[0], key[1], median(p), len(p), median(b), len(b))
	}
	fmt.Printf("| **per command** | first to last mark ÷ commands (median of rounds) | **%s** | | **%s** | |\n",
		median(results["proxbus"].perCommand), median(results["baseline"].perCommand))
}

// median formats the median of ds in µs ("–" without any).
func median(ds []time.Duration) string {
	if len(ds) == 0 {
		return "–"
	}
	return fmt.Sprintf("%d µs", harness.MedianDuration(ds).Microseconds())
}
