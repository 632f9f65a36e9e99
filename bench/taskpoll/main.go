// Command taskpoll measures how proxbus waits for Proxmox tasks: for simulated tasks of 0.3 s,
// 3 s and 60 s it runs vm.start commands through proxbus (one stopped guest each, dispatched
// one after another within milliseconds), with the watch of the endpoint (the default: one
// GET /cluster/tasks per round wakes every waiting command), and with each command polling its
// own task's status (NoTaskWatch) at a fixed 500 ms (TaskPollInterval 500 ms) and on the
// adaptive curve of proxmox.Client.WaitTask, and reports per task the delay from the task's
// end (the simulator's end time) to the command's result event arriving at a subscriber, the
// status polls (and log reads) the simulator answered for it, and every request the endpoint
// answered while the row's tasks ran, per task. A second table gives the endpoint's request
// rate while 8, 24 and 96 tasks are in flight at once (-inflight), watch against adaptive poll. A poll schedule sees a task's end at the first poll after
// it, so the delay depends on where the end falls between two polls: the tasks of a row last
// from 85 % to 115 % of the nominal duration (see startSpread), and the row gives the median and
// the maximum.
//
// Run it on an otherwise idle machine.
//
//	go -C bench run ./taskpoll              # 0.3 s, 3 s, 60 s; 10 commands each; 8, 24, 96 in flight (about 5 minutes)
//	go -C bench run ./taskpoll -short       # CI: 0.3 s and 3 s, 4 commands each; 8 and 24 in flight
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/proxbus/proxbus/bench/internal/harness"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

func main() {
	n := flag.Int("n", 10, "vm.start commands per task duration and polling")
	short := flag.Bool("short", false, "CI smoke run: the 0.3 s and 3 s tasks, 4 commands each; 8 and 24 in flight with 3 s tasks")
	inflight := flag.String("inflight", "8,24,96", "tasks in flight at once for the request rate table, comma-separated (empty: no table)")
	flag.Parse()
	durations := []time.Duration{300 * time.Millisecond, 3 * time.Second, time.Minute}
	if *short {
		*n, durations, *inflight = 4, durations[:2], "8,24"
	}
	fmt.Printf("# task polling: %d vm.start per row, tasks of 85–115 %% of the nominal duration, %s\n", *n, runtime.Version())
	fmt.Println("| task | waiting | delay task end → result, p50 / max | status polls per task, mean (min–max) | log reads per task | endpoint requests per task while the tasks ran |")
	fmt.Println("|---:|---|---:|---:|---:|---:|")
	for _, d := range durations {
		for _, m := range modes {
			r, err := measure(context.Background(), d, m, *n)
			if err != nil {
				log.Fatalf("%s, %s: %v", d, m.name, err)
			}
			fmt.Printf("| %s | %s | %s / %s | %.1f (%d–%d) | %.1f | %.1f |\n", d, m.name, ms(r.p50), ms(r.max), r.polls, r.minPolls, r.maxPolls, r.logReads, r.perTask)
		}
	}
	sizes, err := parseSizes(*inflight)
	if err != nil {
		log.Fatalf("-inflight: %v", err)
	}
	if len(sizes) == 0 {
		return
	}
	long := 10 * time.Second
	if *short {
		long = 3 * time.Second
	}
	fmt.Printf("\n# request rate to the endpoint while all tasks are in flight (tasks of %s)\n", long)
	fmt.Println("| tasks in flight | waiting | requests / s to the endpoint | delay task end → result, p50 / max |")
	fmt.Println("|---:|---|---:|---:|")
	for _, k := range sizes {
		for _, m := range modes[1:] {
			r, err := measure(context.Background(), long, m, k)
			if err != nil {
				log.Fatalf("%d in flight, %s: %v", k, m.name, err)
			}
			fmt.Printf("| %d | %s | %.1f | %s / %s |\n", k, m.name, r.rate, ms(r.p50), ms(r.max))
		}
	}
}

// parseSizes reads a comma-separated list of positive integers.
func parseSizes(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// mode is one way of waiting for tasks: a status poll per task (NoTaskWatch) at
// TaskPollInterval poll (0: the adaptive curve), or the endpoint's watch.
type mode struct {
	name  string
	watch bool
	poll  time.Duration
}

// modes are the ways of waiting compared; the first is left out of the rate table.
var modes = []mode{
	{name: "per-task poll, fixed 500 ms", poll: 500 * time.Millisecond},
	{name: "per-task poll, adaptive", poll: 0},
	{name: "watch (the default)", watch: true},
}

// result is one row: the delays' median and maximum, the polls per task.
type result struct {
	p50, max           time.Duration
	polls, logReads    float64
	minPolls, maxPolls int
	// perTask is the endpoint's requests from the first task's start to the last one's end,
	// per task; rate its requests per second while all tasks were in flight (from the last
	// start to the first end).
	perTask, rate float64
}

func measure(ctx context.Context, task time.Duration, m mode, n int) (result, error) {
	e, err := harness.Start(harness.Options{PVETaskDuration: task})
	if err != nil {
		return result{}, err
	}
	defer e.Close()
	const firstVMID = 20000
	nodes := []string{"pve1", "pve2", "pve3"}
	cmds := make([]events.Command, n)
	for i := range cmds {
		vmid := int64(firstVMID + i)
		e.PVE.AddGuest(simpve.GuestSpec{VMID: vmid, Node: nodes[i%len(nodes)], Name: fmt.Sprintf("poll-%d", i)})
		cmds[i] = harness.VMStartCommand("p", i, vmid)
	}
	if err := e.Provision(ctx, n); err != nil {
		return result{}, err
	}
	col, err := e.NewCollector(n, nil)
	if err != nil {
		return result{}, err
	}
	defer col.Close()
	cfg := e.ProxbusConfig(n)
	cfg.TaskPollInterval, cfg.NoTaskWatch = m.poll, !m.watch
	stop, err := harness.RunProxbus(ctx, cfg)
	if err != nil {
		return result{}, err
	}
	if err := startSpread(ctx, e, cmds, task); err != nil {
		_ = stop()
		return result{}, err
	}
	waitErr := col.Wait(3*task + time.Minute)
	if err := stop(); err != nil && waitErr == nil {
		waitErr = fmt.Errorf("stop: %w", err)
	}
	if waitErr != nil {
		return result{}, waitErr
	}

	tasks := map[int64]simpve.TaskStat{}
	for _, st := range e.PVE.TaskStats() {
		if u, err := proxmox.ParseUPID(st.UPID); err == nil && st.Type == "qmstart" {
			if vmid, err := strconv.ParseInt(u.ID, 10, 64); err == nil {
				tasks[vmid] = st
			}
		}
	}
	var r result
	r.minPolls = int(^uint(0) >> 1)
	delays := make([]time.Duration, 0, n)
	for i, c := range cmds {
		st, ok := tasks[int64(firstVMID+i)]
		if !ok {
			return result{}, fmt.Errorf("no start task for guest %d", firstVMID+i)
		}
		arrived, ok := col.Arrival(events.Ref(c.Source, c.ID))
		if !ok {
			return result{}, fmt.Errorf("no result for %s", c.ID)
		}
		delays = append(delays, arrived.Sub(st.End))
		r.polls += float64(st.StatusPolls) / float64(n)
		r.logReads += float64(st.LogReads) / float64(n)
		r.minPolls, r.maxPolls = min(r.minPolls, st.StatusPolls), max(r.maxPolls, st.StatusPolls)
	}
	slices.Sort(delays)
	r.p50, r.max = harness.MedianDuration(delays), delays[len(delays)-1]
	r.perTask, r.rate = requestRates(e.PVE.RequestLog(), tasks)
	return r, nil
}

// startSpread publishes cmds one at a time, each once the simulator has started the task of
// the one before, so that command i's task lasts nominal × (0.85 + 0.3 × frac(i × 0.618…)):
// spread over 85–115 % by the golden ratio, so that no two ends fall at the same place
// between two polls (evenly spaced durations can all be a multiple of the 2 s cap apart).
func startSpread(ctx context.Context, e *harness.Env, cmds []events.Command, nominal time.Duration) error {
	for i, c := range cmds {
		_, frac := math.Modf(float64(i) * 0.6180339887498949)
		e.PVE.SetTaskDuration(time.Duration((0.85 + 0.3*frac) * float64(nominal)))
		if err := e.Publish(ctx, c); err != nil {
			return err
		}
		for deadline := time.Now().Add(10 * time.Second); startTasks(e) <= i; {
			if time.Now().After(deadline) {
				return fmt.Errorf("the task of %s did not start", c.ID)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// startTasks counts the simulator's qmstart tasks.
func startTasks(e *harness.Env) int {
	n := 0
	for _, st := range e.PVE.TaskStats() {
		if st.Type == "qmstart" {
			n++
		}
	}
	return n
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

// requestRates are the endpoint's requests from the first task's start to the last one's end
// per task, and its requests per second from the last start to the first end (all in flight;
// 0 when that window is empty).
func requestRates(reqs []simpve.RequestRecord, tasks map[int64]simpve.TaskStat) (perTask, rate float64) {
	var firstStart, lastStart, firstEnd, lastEnd time.Time
	for _, st := range tasks {
		if firstStart.IsZero() || st.Begun.Before(firstStart) {
			firstStart = st.Begun
		}
		if st.Begun.After(lastStart) {
			lastStart = st.Begun
		}
		if firstEnd.IsZero() || st.End.Before(firstEnd) {
			firstEnd = st.End
		}
		if st.End.After(lastEnd) {
			lastEnd = st.End
		}
	}
	var all, inFlight int
	for _, q := range reqs {
		if !q.At.Before(firstStart) && !q.At.After(lastEnd) {
			all++
		}
		if q.At.After(lastStart) && q.At.Before(firstEnd) {
			inFlight++
		}
	}
	perTask = float64(all) / float64(max(len(tasks), 1))
	if w := firstEnd.Sub(lastStart); w > 0 {
		rate = float64(inFlight) / w.Seconds()
	}
	return perTask, rate
}
