package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// runSpec is one run: a backlog of n commands, hotShare of them on the hot guests.
type runSpec struct {
	n        int
	hotShare float64
	// poll: the replicas run with --no-task-watch (each command polls its own task), else
	// with the watch of each endpoint.
	poll bool
}

func (s runSpec) String() string {
	wait := "watch"
	if s.poll {
		wait = "per-task poll"
	}
	if s.hotShare == 0 {
		return fmt.Sprintf("n=%d uniform %s", s.n, wait)
	}
	return fmt.Sprintf("n=%d hot %.0f%% %s", s.n, s.hotShare*100, wait)
}

// sample is the state of a run at one moment.
type sample struct {
	at         time.Duration // since the first publish
	results    int
	running    int // tasks between their started and done steps
	ackPending int
	pending    uint64 // not yet delivered
	delivered  uint64 // deliveries so far (the durable's consumer sequence)
	redeliv    int    // messages delivered more than once and not yet acked
}

// runResult is what one run measured.
type runResult struct {
	spec     runSpec
	load     float64 // 1-minute load average at the start
	complete bool
	results  int
	statuses map[int]int
	// failures is the reason and detail of one result of each status but 201.
	failures map[int]string

	drain, ideal time.Duration
	// deliveries is every delivery of the durable (redeliveries included).
	deliveries uint64
	// redis is the commands Redis executed (INFO commandstats, the commands inside Lua
	// scripts included); redisSent the commands the replicas sent (round trips).
	redis     map[string]int64
	redisSent map[string]int
	pve       map[string]int
	netbox    map[string]int

	replicaHWM []int64
	replicaCPU []time.Duration
	natsHWM    int64

	// coldQueue and hotQueue are publish → task started of the commands on cold and on hot
	// guests (sorted); coldEndToEnd publish → result of the cold ones.
	coldQueue, hotQueue, coldEndToEnd []time.Duration
	// task is the task step's started → done, hold the first step → result (sorted).
	task, hold []time.Duration
	// endSeen is the simulator's end of each task → its command's done step (sorted): how
	// long after its end a task's end was seen.
	endSeen []time.Duration
	// handling is how long the answering delivery of each command took in the pipeline, its
	// waiting in the process for a guard included (from the replicas' "command finished" log
	// lines), sorted; handlingSum their sum.
	handling    []time.Duration
	handlingSum time.Duration
	// coldDeliveries and hotDeliveries are the answering deliveries' numbers, from the logs.
	coldDeliveries, hotDeliveries deliveryCount
	// coldDrain is first publish → the last result of a command on a cold guest.
	coldDrain time.Duration
	// endpointBusy is Σ task time per endpoint: ÷ drain, its mean running tasks.
	endpointBusy []time.Duration
	// busy is Σ over commands of (first step → result): slot-seconds the commands held.
	busy time.Duration
	// waited counts commands with at least one waiting step.
	waited, waitSteps int
	replays           int

	utilization   float64 // mean running tasks ÷ total max_parallel over the drain
	ackPendingMax int
	ackPendingAvg float64
	samples       []sample
}

// deliveryCount sums the deliveries of a group of commands.
type deliveryCount struct{ commands, deliveries int }

// mean is the deliveries per command of the group.
func (d deliveryCount) mean() float64 { return float64(d.deliveries) / float64(max(d.commands, 1)) }

// runOne runs spec in a fresh deployment under workDir and returns what it measured.
func runOne(ctx context.Context, cfg config, bins binaries, workDir string, spec runSpec, logf func(string, ...any)) (_ runResult, err error) {
	res := runResult{spec: spec, statuses: map[int]int{}}
	dir, err := os.MkdirTemp(workDir, "run-")
	if err != nil {
		return res, fmt.Errorf("run dir: %w", err)
	}
	defer func() { // after the deployment is closed (deferred below)
		if err != nil || cfg.keep {
			logf("%s: work directory kept: %s", spec, dir)
			return
		}
		_ = os.RemoveAll(dir)
	}()
	guests := fleetGuests(cfg.guests, cfg.endpoints)
	runID := fmt.Sprintf("f%x", time.Now().UnixNano()%0xFFFFFFF)
	cmds := plan(runID, spec.n, guests, cfg.endpoints, cfg.hotGuests, spec.hotShare)
	slots := cfg.endpoints * cfg.maxParallel
	res.ideal = time.Duration(float64(spec.n) * float64(cfg.task) / float64(slots))

	e, err := startEnv(ctx, cfg, bins, dir, guests, spec.poll)
	if err != nil {
		return res, err
	}
	defer e.close()
	rdb := redis.NewClient(&redis.Options{Addr: e.redisAddr()})
	defer rdb.Close()
	col, err := newCollector(e.nc, e.subjects.EventsFilter(), spec.n)
	if err != nil {
		return res, err
	}
	defer col.close()
	before, err := commandStats(ctx, rdb)
	if err != nil {
		return res, err
	}
	for _, c := range e.pveCounts {
		c.Reset()
	}
	e.netboxCount.Reset()
	e.redisCount.Reset()
	logf("%s: %d replicas serving (nats %s, redis %s); publishing %d commands, ideal drain %s",
		spec, len(e.replicas), e.natsURL(), e.redisAddr(), spec.n, res.ideal.Round(100*time.Millisecond))

	start := time.Now()
	var (
		samples []sample
		smu     sync.Mutex
	)
	sctx, stopSampling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(cfg.sampleEvery)
		defer t.Stop()
		for {
			results, running := col.progress()
			s := sample{at: time.Since(start), results: results, running: running}
			if info, err := e.consumerInfo(sctx); err == nil {
				s.ackPending, s.pending, s.delivered, s.redeliv = info.NumAckPending, info.NumPending, info.Delivered.Consumer, info.NumRedelivered
			}
			smu.Lock()
			samples = append(samples, s)
			smu.Unlock()
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
		}
	})
	wg.Go(func() { // progress lines for whoever watches the log
		t := time.NewTicker(cfg.progressEvery)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
			smu.Lock()
			var s sample
			if len(samples) > 0 {
				s = samples[len(samples)-1]
			}
			smu.Unlock()
			alive := 0
			for _, r := range e.replicas {
				if r.alive() {
					alive++
				}
			}
			logf("%s: %s: %d/%d results, %d tasks running, ack pending %d, delivered %d, %d of %d replicas running",
				spec, s.at.Round(time.Second), s.results, spec.n, s.running, s.ackPending, s.delivered, alive, len(e.replicas))
		}
	})
	published, err := publishAll(ctx, e, cmds)
	if err != nil {
		stopSampling()
		wg.Wait()
		return res, err
	}
	logf("%s: published in %s", spec, time.Since(start).Round(time.Millisecond))
	limit := time.Duration(float64(res.ideal)*cfg.timeoutFactor) + 2*time.Minute
	res.complete = col.wait(ctx, limit-time.Since(start))
	stopSampling()
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if !res.complete {
		logf("%s: not every result after %s", spec, limit)
	}

	// Everything is read before the replicas stop: their peak RSS, Redis's counters, the
	// durable's deliveries.
	for _, r := range e.replicas {
		res.replicaHWM = append(res.replicaHWM, r.status("VmHWM"))
		res.replicaCPU = append(res.replicaCPU, r.cpuTime())
	}
	res.natsHWM = e.nats.status("VmHWM")
	after, err := commandStats(ctx, rdb)
	if err != nil {
		return res, err
	}
	res.redis = statsDelta(before, after)
	res.redisSent = e.redisCount.Snapshot()
	info, err := e.consumerInfo(ctx)
	if err != nil {
		return res, err
	}
	res.deliveries = info.Delivered.Consumer
	res.pve = map[string]int{}
	for _, c := range e.pveCounts {
		for k, v := range c.Snapshot() {
			res.pve[k] += v
		}
	}
	res.netbox = e.netboxCount.Snapshot()
	fin := map[string]finished{}
	for _, r := range e.replicas {
		if err := finishedLines(r.logPath, fin); err != nil {
			return res, err
		}
	}
	res.samples = samples
	var ends []simpve.TaskStat
	for _, pve := range e.pves {
		ends = append(ends, pve.TaskStats()...)
	}
	analyse(&res, cmds, published, col, fin, start, slots)
	res.endSeen = endSeen(cmds, col, ends)
	if cfg.traceDir != "" {
		if err := writeTrace(cfg.traceDir, spec, res, cmds, published, col); err != nil {
			logf("trace: %v", err)
		}
	}
	return res, nil
}

// analyse fills res's figures from what the collector saw.
func analyse(res *runResult, cmds []planned, published []time.Time, col *collector, fin map[string]finished, start time.Time, slots int) {
	col.mu.Lock()
	defer col.mu.Unlock()
	res.results = col.results
	var coldLast time.Time
	defer func() { res.coldDrain = coldLast.Sub(start) }()
	res.failures = maps.Clone(col.failures)
	res.drain = col.last.Sub(start)
	if !res.complete {
		res.drain = time.Since(start)
	}
	for i, p := range cmds {
		if f, ok := fin[p.id]; ok {
			res.handling = append(res.handling, f.duration)
			g := &res.coldDeliveries
			if p.hot {
				g = &res.hotDeliveries
			}
			g.commands++
			g.deliveries += f.delivery
		}
		t := col.tracks[p.id]
		if t == nil {
			continue
		}
		if !p.hot && t.resultAt.After(coldLast) {
			coldLast = t.resultAt
		}
		res.replays += t.replays
		if t.waits > 0 {
			res.waited++
			res.waitSteps += t.waits
		}
		if !t.resultAt.IsZero() {
			res.statuses[t.status]++
			if !t.firstStep.IsZero() {
				h := t.resultAt.Sub(t.firstStep)
				if t.waits == 0 {
					res.hold = append(res.hold, h)
				}
			}
		}
		if !t.started.IsZero() {
			q := t.started.Sub(published[i])
			if p.hot {
				res.hotQueue = append(res.hotQueue, q)
			} else {
				res.coldQueue = append(res.coldQueue, q)
				if !t.resultAt.IsZero() {
					res.coldEndToEnd = append(res.coldEndToEnd, t.resultAt.Sub(published[i]))
				}
			}
		}
		if !t.started.IsZero() && !t.done.IsZero() {
			res.task = append(res.task, t.done.Sub(t.started))
			res.busy += t.done.Sub(t.started)
			for len(res.endpointBusy) <= p.guest.endpoint {
				res.endpointBusy = append(res.endpointBusy, 0)
			}
			res.endpointBusy[p.guest.endpoint] += t.done.Sub(t.started)
		}
	}
	for _, h := range res.handling {
		res.handlingSum += h
	}
	for _, s := range []*[]time.Duration{&res.coldQueue, &res.hotQueue, &res.coldEndToEnd, &res.task, &res.hold, &res.handling} {
		slices.Sort(*s)
	}
	if res.drain > 0 {
		res.utilization = res.busy.Seconds() / (res.drain.Seconds() * float64(slots))
	}
	var sum float64
	var k int
	for _, s := range res.samples {
		if s.at > res.drain {
			break
		}
		res.ackPendingMax = max(res.ackPendingMax, s.ackPending)
		sum += float64(s.ackPending)
		k++
	}
	if k > 0 {
		res.ackPendingAvg = sum / float64(k)
	}
}

// writeTrace writes the run's samples and its commands' times as CSV files into dir.
func writeTrace(dir string, spec runSpec, res runResult, cmds []planned, published []time.Time, col *collector) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("trace dir: %w", err)
	}
	base := fmt.Sprintf("fleet-n%d-hot%02.0f", spec.n, spec.hotShare*100)
	write := func(name string, fill func(w io.Writer)) error {
		f, err := os.Create(filepath.Join(dir, base+"-"+name+".csv"))
		if err != nil {
			return fmt.Errorf("trace: %w", err)
		}
		fill(f)
		return f.Close()
	}
	if err := write("samples", func(w io.Writer) {
		fmt.Fprintln(w, "t_s,results,running_tasks,ack_pending,undelivered,delivered,redelivered_pending")
		for _, s := range res.samples {
			fmt.Fprintf(w, "%.2f,%d,%d,%d,%d,%d,%d\n", s.at.Seconds(), s.results, s.running, s.ackPending, s.pending, s.delivered, s.redeliv)
		}
	}); err != nil {
		return err
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	t0 := published[0]
	secs := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return fmt.Sprintf("%.3f", t.Sub(t0).Seconds())
	}
	return write("commands", func(w io.Writer) {
		fmt.Fprintln(w, "id,vmid,endpoint,hot,published_s,first_step_s,task_started_s,task_done_s,result_s,status,waits")
		for i, p := range cmds {
			t := col.tracks[p.id]
			if t == nil {
				t = &track{}
			}
			fmt.Fprintf(w, "%s,%d,%d,%t,%s,%s,%s,%s,%s,%d,%d\n", p.id, p.guest.vmid, p.guest.endpoint+1, p.hot,
				secs(published[i]), secs(t.firstStep), secs(t.started), secs(t.done), secs(t.resultAt), t.status, t.waits)
		}
	})
}

// sumCounts adds up a count map.
func sumCounts[V int | int64](m map[string]V) V {
	var n V
	for _, v := range m {
		n += v
	}
	return n
}

// endSeen pairs each guest's tasks (the simulators' stats, in start order) with its commands'
// task steps (in start order: a guest runs one snapshot at a time) and returns each task's
// end → its done step, sorted. A guest whose counts differ (a command failed) is left out.
func endSeen(cmds []planned, col *collector, stats []simpve.TaskStat) []time.Duration {
	col.mu.Lock()
	defer col.mu.Unlock()
	done := map[string][]*track{} // by vmid: every guest's vmid is its own across the endpoints
	for _, p := range cmds {
		if t := col.tracks[p.id]; t != nil && !t.started.IsZero() && !t.done.IsZero() {
			k := strconv.FormatInt(p.guest.vmid, 10)
			done[k] = append(done[k], t)
		}
	}
	ends := map[string][]simpve.TaskStat{}
	for _, st := range stats {
		if st.Type != "qmsnapshot" || st.Running {
			continue
		}
		if u, err := proxmox.ParseUPID(st.UPID); err == nil {
			ends[u.ID] = append(ends[u.ID], st)
		}
	}
	var out []time.Duration
	for k, ts := range done {
		es := ends[k]
		if len(es) != len(ts) {
			continue
		}
		slices.SortFunc(ts, func(a, b *track) int { return a.started.Compare(b.started) })
		slices.SortFunc(es, func(a, b simpve.TaskStat) int { return a.Begun.Compare(b.Begun) })
		for i, t := range ts {
			out = append(out, t.done.Sub(es[i].End))
		}
	}
	slices.Sort(out)
	return out
}
