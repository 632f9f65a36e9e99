// Command taskpoll measures how proxbus waits for Proxmox tasks: for simulated tasks of 0.3 s,
// 3 s and 60 s it runs vm.start commands through proxbus (one stopped guest each, dispatched
// one after another within milliseconds), once with a fixed 500 ms status poll
// (TaskPollInterval 500 ms) and once with the adaptive curve of proxmox.Client.WaitTask (the
// default), and reports per task the delay from the task's end (the simulator's end time) to
// the command's result event arriving at a subscriber, and the status polls (and log reads)
// the simulator answered for it. A poll schedule sees a task's end at the first poll after
// it, so the delay depends on where the end falls between two polls: the tasks of a row last
// from 85 % to 115 % of the nominal duration (see startSpread), and the row gives the median and
// the maximum.
//
// Run it on an otherwise idle machine.
//
//	go -C bench run ./taskpoll              # 0.3 s, 3 s, 60 s; 10 commands each (about 2.5 minutes)
//	go -C bench run ./taskpoll -short       # CI: 0.3 s and 3 s, 4 commands each
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
	"time"

	"github.com/proxbus/proxbus/bench/internal/harness"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

func main() {
	n := flag.Int("n", 10, "vm.start commands per task duration and polling")
	short := flag.Bool("short", false, "CI smoke run: the 0.3 s and 3 s tasks, 4 commands each")
	flag.Parse()
	durations := []time.Duration{300 * time.Millisecond, 3 * time.Second, time.Minute}
	if *short {
		*n, durations = 4, durations[:2]
	}
	fmt.Printf("# task polling: %d vm.start per row, tasks of 85–115 %% of the nominal duration, %s\n", *n, runtime.Version())
	fmt.Println("| task | polling | delay task end → result, p50 / max | status polls per task, mean (min–max) | log reads per task |")
	fmt.Println("|---:|---|---:|---:|---:|")
	for _, d := range durations {
		for _, m := range modes {
			r, err := measure(context.Background(), d, m.poll, *n)
			if err != nil {
				log.Fatalf("%s, %s: %v", d, m.name, err)
			}
			fmt.Printf("| %s | %s | %s / %s | %.1f (%d–%d) | %.1f |\n", d, m.name, ms(r.p50), ms(r.max), r.polls, r.minPolls, r.maxPolls, r.logReads)
		}
	}
}

// modes are the two ways of polling compared: proxbus's TaskPollInterval.
var modes = []struct {
	name string
	poll time.Duration
}{{"fixed 500 ms", 500 * time.Millisecond}, {"adaptive (the default)", 0}}

// result is one row: the delays' median and maximum, the polls per task.
type result struct {
	p50, max           time.Duration
	polls, logReads    float64
	minPolls, maxPolls int
}

func measure(ctx context.Context, task, poll time.Duration, n int) (result, error) {
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
	cfg.TaskPollInterval = poll
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
