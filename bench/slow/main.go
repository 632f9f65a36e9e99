// Command slow drives proxbus against a slow Proxmox (issue #6, part 4): 1,000 vm.start
// commands on 1,000 stopped guests while every Proxmox task takes 2 s, with concurrency 200
// and an AckWait (1.5 s) shorter than a task, so that only the consumer's InProgress
// heartbeats keep the messages alive. It reports the wall time against the ideal
// 1000/200 × 2 s, the process's RSS and Go heap (before, peak during, after), the
// redeliveries the durable consumer counted (an ack timeout is a redelivery) and the results.
//
//	go -C bench run ./slow                      # 1000 commands, -c 200, 2 s tasks
//	go -C bench run ./slow -short               # CI: 40 commands, -c 20, 300 ms tasks
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/proxbus/proxbus/bench/internal/harness"
	"github.com/proxbus/proxbus/events"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

func main() {
	n := flag.Int("n", 1000, "vm.start commands (one guest each)")
	c := flag.Int("c", 200, "concurrency")
	task := flag.Duration("task", 2*time.Second, "duration of every Proxmox task")
	ackWait := flag.Duration("ack-wait", 1500*time.Millisecond, "AckWait (below the task time: only InProgress keeps messages alive)")
	poll := flag.Duration("poll", 250*time.Millisecond, "proxbus's task poll interval")
	short := flag.Bool("short", false, "CI smoke run")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the run")
	goroutines := flag.String("goroutines", "", "write a goroutine dump here half-way through the ideal time")
	flag.Parse()
	dumpPath = *goroutines
	if *short {
		*n, *c, *task, *ackWait, *poll = 40, 20, 300*time.Millisecond, 250*time.Millisecond, 50*time.Millisecond
	}
	stopProfiling, err := harness.StartProfiling(*cpuprofile, "")
	if err != nil {
		log.Fatal(err)
	}
	err = run(*n, *c, *task, *ackWait, *poll)
	if perr := stopProfiling(); perr != nil {
		log.Print(perr)
	}
	if err != nil {
		log.Fatal(err)
	}
}

func run(n, c int, task, ackWait, poll time.Duration) error {
	ctx := context.Background()
	e, err := harness.Start(harness.Options{PVETaskDuration: task})
	if err != nil {
		return err
	}
	defer e.Close()
	const firstVMID = 10000
	nodes := []string{"pve1", "pve2", "pve3"}
	for i := range n {
		e.PVE.AddGuest(simpve.GuestSpec{VMID: int64(firstVMID + i), Node: nodes[i%len(nodes)], Name: fmt.Sprintf("slow-%d", i)})
	}
	if err := e.Provision(ctx, c); err != nil {
		return err
	}
	cmds := make([]events.Command, n)
	for i := range cmds {
		cmds[i] = harness.VMStartCommand("s", i, int64(firstVMID+i))
	}
	col, err := e.NewCollector(n, nil)
	if err != nil {
		return err
	}
	defer col.Close()
	if err := e.PublishAll(ctx, cmds); err != nil {
		return err
	}

	runtime.GC()
	before := harness.RSS()
	heapBefore := heapBytes()
	var peakRSS, peakHeap int64
	var peakG int
	sctx, stopSampling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			peakRSS, peakHeap, peakG = max(peakRSS, harness.RSS()), max(peakHeap, heapBytes()), max(peakG, runtime.NumGoroutine())
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
		}
	}()

	cfg := e.ProxbusConfig(c)
	cfg.Consumer.AckWait, cfg.TaskPollInterval = ackWait, poll
	start := time.Now()
	if dumpPath != "" {
		time.AfterFunc(task*time.Duration(n/c)/2, dumpGoroutines)
	}
	stop, err := harness.RunProxbus(ctx, cfg)
	if err != nil {
		stopSampling()
		wg.Wait()
		return err
	}
	waitErr := col.Wait(time.Duration(n/c+1)*task*3 + time.Minute)
	wall := time.Since(start)
	if waitErr == nil {
		s := col.Summary()
		wall = s.Last.Sub(start)
	}
	stopErr := stop()
	stopSampling()
	wg.Wait()
	if waitErr != nil {
		return waitErr
	}
	if stopErr != nil {
		return fmt.Errorf("stop: %w", stopErr)
	}
	runtime.GC()
	after := harness.RSS()
	info, err := consumerInfo(ctx, e)
	if err != nil {
		return err
	}
	s := col.Summary()
	ideal := time.Duration(float64(n) / float64(c) * float64(task))
	fmt.Printf("# slow backends: %d vm.start, concurrency %d, task %s, AckWait %s (InProgress every %s), task poll %s, %s\n",
		n, c, task, ackWait, ackWait/3, poll, runtime.Version())
	fmt.Println("| wall | ideal n/c × task | wall ÷ ideal | RSS before / peak / after | Go heap before / peak | peak goroutines | redelivered | ack pending after | results | replayed |")
	fmt.Println("|---:|---:|---:|---|---|---:|---:|---:|---|---:|")
	fmt.Printf("| %.2f s | %.2f s | %.3f | %s / %s / %s | %s / %s | %d | %d | %d | %v | %d |\n",
		wall.Seconds(), ideal.Seconds(), wall.Seconds()/ideal.Seconds(), harness.MiB(before), harness.MiB(peakRSS), harness.MiB(after),
		harness.MiB(heapBefore), harness.MiB(peakHeap), peakG, info.redelivered, info.ackPending, s.Statuses, s.Replayed)
	fmt.Printf("process peak RSS (VmHWM, whole run incl. NATS server and simulators in-process): %s\n", harness.MiB(harness.PeakRSS()))
	return nil
}

type cinfo struct {
	redelivered, ackPending int
}

func consumerInfo(ctx context.Context, e *harness.Env) (cinfo, error) {
	cons, err := e.JS.Consumer(ctx, e.Subjects.CommandsStream(), "proxbus")
	if err != nil {
		return cinfo{}, fmt.Errorf("consumer: %w", err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return cinfo{}, fmt.Errorf("consumer info: %w", err)
	}
	return cinfo{redelivered: info.NumRedelivered, ackPending: info.NumAckPending}, nil
}

var dumpPath string

func dumpGoroutines() {
	f, err := os.Create(dumpPath)
	if err != nil {
		return
	}
	defer f.Close()
	_ = pprof.Lookup("goroutine").WriteTo(f, 1)
}

func heapBytes() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}
