package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/proxbus/proxbus/events"
)

// run executes the soak and returns the exit code.
func run(ctx context.Context, cfg config, out io.Writer) int {
	dir, err := os.MkdirTemp("", "proxbus-soak-")
	if err != nil {
		fmt.Fprintln(out, "soak:", err)
		return 2
	}
	keep := cfg.keep
	defer func() {
		if keep {
			fmt.Fprintln(out, "work directory kept:", dir)
			return
		}
		_ = os.RemoveAll(dir)
	}()
	logf := func(format string, a ...any) {
		fmt.Fprintf(out, "%s  %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, a...))
	}
	logf("building proxbus and nats-server into %s", dir)
	e, err := startEnv(ctx, cfg, dir)
	defer e.close()
	if err != nil {
		logf("soak: %v", err)
		keep = true
		return 2
	}
	logf("nats %s, redis %s, %d replicas", e.natsURL(), e.redisURL(), len(e.replicas))

	nc, err := nats.Connect(e.natsURL(), nats.Name("proxbus-soak"), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond))
	if err != nil {
		logf("soak: nats: %v", err)
		return 2
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		logf("soak: jetstream: %v", err)
		return 2
	}
	subjects := events.NewSubjects("proxbus")
	if err := waitStreams(ctx, js, subjects); err != nil {
		logf("soak: %v", err)
		keep = true
		return 2
	}
	rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", e.redisPort)})
	defer rdb.Close()

	canary := newCanary()
	run := fmt.Sprintf("%x", time.Now().Unix()%0xFFFFFF)
	plan := newGenerator(cfg.seed, run, canary, int(10*cfg.rate)).plan(cfg.commands)
	tracker, err := newTracker(nc, subjects)
	if err != nil {
		logf("soak: %v", err)
		return 2
	}
	defer tracker.stop()

	faultsOn := map[string]bool{}
	for _, f := range strings.Split(cfg.faultList, ",") {
		faultsOn[strings.TrimSpace(f)] = true
	}
	var leaks []leak
	var leaksMu sync.Mutex
	ch := &chaos{cfg: cfg, env: e, on: faultsOn, logf: logf, beforeRedisRestart: func() {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		n, found, err := scanRedis(sctx, rdb, canary)
		if err != nil {
			logf("redis scan before the restart: %v", err)
		}
		logf("redis scan before the restart: %d keys, %d with the canary", n, len(found))
		leaksMu.Lock()
		leaks = append(leaks, found...)
		leaksMu.Unlock()
	}}
	loadDur := time.Duration(float64(cfg.commands) / cfg.rate * float64(time.Second))
	chaosCtx, stopChaos := context.WithCancel(ctx)
	chaosDone := ch.start(chaosCtx, loadDur)

	pb := &publisher{js: js, subjects: subjects, published: map[string]time.Time{}}
	start := time.Now()
	logf("publishing %d commands at %.0f/s (about %s) with faults %s", cfg.commands, cfg.rate, loadDur.Round(time.Second), cfg.faultList)
	perr := pb.run(ctx, plan, cfg.rate, func(n int) {
		if n%200 == 0 {
			logf("published %d, outcomes seen %d", n, tracker.count())
		}
	})
	stopChaos()
	<-chaosDone
	ch.heal()
	if perr != nil {
		logf("soak: publishing stopped: %v", perr)
		keep = true
		return 2
	}
	logf("published everything in %s (%d publish retries); faults stopped; waiting for outcomes", time.Since(start).Round(time.Second), pb.retries)

	want := map[string]bool{}
	for _, p := range plan {
		want[p.cmd.ID] = true
	}
	deadline := time.Now().Add(cfg.settle)
	for stalled := 0; time.Now().Before(deadline) && tracker.missing(want) > 0 && ctx.Err() == nil; {
		before := tracker.missing(want)
		sleepCtx(ctx, 2*time.Second)
		after := tracker.missing(want)
		logf("outcomes seen %d of %d", len(want)-after, len(want))
		if after < before {
			stalled = 0
			continue
		}
		if stalled++; stalled%3 == 0 { // the live view may have missed events during the NATS restart: ask the streams
			if c, err := collect(ctx, js, subjects); err == nil {
				r := &report{}
				r.checkOutcomes(plan, pb.published, c)
				logf("the streams hold an outcome for all but %d", len(r.lost))
				if len(r.lost) == 0 {
					break
				}
			}
		}
	}
	logf("quiet period %s for the journal repairer", cfg.quiet)
	sleepCtx(ctx, cfg.quiet)

	// The repairer retries with capped backoff: give it up to --repair-wait more.
	for end := time.Now().Add(cfg.repairWait); ctx.Err() == nil; {
		r := &report{}
		r.checkJournal(e.netbox.JournalEntries(), "\x00", nil)
		if len(r.inProgress) == 0 || time.Now().After(end) {
			break
		}
		logf("%d journal entries in_progress; waiting for the repairer", len(r.inProgress))
		sleepCtx(ctx, 5*time.Second)
	}
	c, err := collect(ctx, js, subjects)
	if err != nil {
		logf("soak: collect: %v", err)
		keep = true
		return 2
	}
	rep := &report{dups: pb.dups, redisRestarts: ch.redisRestartTimes()}
	rep.checkOutcomes(plan, pb.published, c)
	journal, writes, tasks := e.netbox.JournalEntries(), e.faults.writes.all(), e.pve.Tasks()
	ends := map[string]time.Time{}
	for id, rs := range c.results {
		for _, r := range rs {
			if ends[id].IsZero() || r.at.Before(ends[id]) {
				ends[id] = r.at
			}
		}
	}
	entries := rep.checkJournal(journal, canary, ends)
	rep.checkWrites(writes, tasks, plan, c)
	if err := dumpAll(dir, plan, c, writes, tasks, journal); err != nil {
		logf("soak: %v", err)
	}
	rep.leaks = append(rep.leaks, leaks...)
	rep.leaks = append(rep.leaks, scanMsgs("event", c.events, canary)...)
	rep.leaks = append(rep.leaks, scanMsgs("dead letter", c.dlqMsgs, canary)...)
	keys, found, err := scanRedis(ctx, rdb, canary)
	if err != nil {
		logf("soak: redis scan: %v", err)
	}
	rep.leaks = append(rep.leaks, found...)
	logLines := 0
	for _, p := range e.replicas {
		n, found, err := scanFile(p.logPath, canary)
		if err != nil {
			logf("soak: %v", err)
		}
		logLines += n
		for i := range found {
			found[i].where = filepath.Base(found[i].where)
		}
		rep.leaks = append(rep.leaks, found...)
	}

	fmt.Fprintf(out, "\n== run ==\n")
	maxAckPending := cfg.maxAckPending
	if maxAckPending <= 0 {
		maxAckPending = cfg.concurrency
	}
	fmt.Fprintf(out, "  commands %d, rate %.0f/s, seed %d, replicas %d × concurrency %d, max-ack-pending %d, lease-ttl %s, ack-wait %s, max-deliver %d\n",
		cfg.commands, cfg.rate, cfg.seed, cfg.replicas, cfg.concurrency, maxAckPending, cfg.leaseTTL, cfg.ackWait, cfg.maxDeliver)
	ch.summary(out)
	fmt.Fprintf(out, "  scanned for the canary: %d events, %d dead letters, %d journal entries, %d Redis keys, %d replica log lines\n",
		len(c.events), len(c.dlqMsgs), entries, keys, logLines)
	fmt.Fprintf(out, "  journal repaired events: %d\n", c.repairs)
	rep.print(out)
	if rep.failed() {
		keep = true
		fmt.Fprintln(out, "\nFAIL: a zero is not zero")
		return 1
	}
	fmt.Fprintln(out, "\nPASS: lost 0, duplicate writes 0, in_progress 0, canary 0")
	return 0
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// waitStreams waits until a replica has provisioned the streams.
func waitStreams(ctx context.Context, js jetstream.JetStream, s events.Subjects) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err1 := js.Stream(ctx, s.CommandsStream())
		_, err2 := js.Stream(ctx, s.EventsStream())
		_, err3 := js.Stream(ctx, s.DLQStream())
		if err1 == nil && err2 == nil && err3 == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("streams not provisioned after 60s (see the replica logs)")
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

// tracker follows results and dead letters live (core NATS, best effort: the verdict is
// taken from the streams) to know when every command has an outcome.
type tracker struct {
	mu   sync.Mutex
	seen map[string]bool
	subs []*nats.Subscription
}

func newTracker(nc *nats.Conn, s events.Subjects) (*tracker, error) {
	t := &tracker{seen: map[string]bool{}}
	sub1, err := nc.Subscribe("proxbus.evt.*.result", func(m *nats.Msg) {
		ev, err := events.ParseEvent(m.Data)
		if err != nil {
			return
		}
		t.mark(strings.TrimSuffix(ev.ID, ".result"))
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	sub2, err := nc.Subscribe(s.DLQFilter(), func(m *nats.Msg) {
		t.mark(m.Header.Get("ce-id"))
	})
	if err != nil {
		_ = sub1.Unsubscribe()
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	t.subs = []*nats.Subscription{sub1, sub2}
	return t, nil
}

func (t *tracker) mark(id string) {
	t.mu.Lock()
	t.seen[id] = true
	t.mu.Unlock()
}

func (t *tracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.seen)
}

func (t *tracker) missing(want map[string]bool) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for id := range want {
		if !t.seen[id] {
			n++
		}
	}
	return n
}

func (t *tracker) stop() {
	for _, s := range t.subs {
		_ = s.Unsubscribe()
	}
}

// chaos injects the fault schedule.
type chaos struct {
	cfg                config
	env                *env
	on                 map[string]bool
	logf               func(string, ...any)
	beforeRedisRestart func()

	mu                                 sync.Mutex // serializes process restarts
	natsRestarts, redisRestarts, kills int
	spikes                             int
	redisDown                          []time.Time
}

// redisRestartTimes returns when Redis was killed.
func (ch *chaos) redisRestartTimes() []time.Time {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return append([]time.Time(nil), ch.redisDown...)
}

// start runs the schedule until ctx ends; the returned channel closes when every fault
// goroutine has returned.
func (ch *chaos) start(ctx context.Context, load time.Duration) <-chan struct{} {
	done := make(chan struct{})
	var wg sync.WaitGroup
	at := func(frac float64, f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(frac * float64(load))):
				f()
			}
		}()
	}
	f := ch.env.faults
	if ch.on["lost"] {
		f.setLostRate(0.10)
	}
	if ch.on["netbox"] {
		at(0.15, func() { ch.logf("fault: NetBox journal PATCHes fail at 30%%"); f.setPatchFailRate(0.30) })
		at(0.45, func() { ch.logf("fault: NetBox PATCH failures end"); f.setPatchFailRate(0) })
	}
	if ch.on["nats"] {
		at(0.30, func() { ch.restart(ch.env.nats, ch.env.natsPort, 2*time.Second, &ch.natsRestarts) })
	}
	if ch.on["redis"] {
		at(0.60, func() {
			ch.beforeRedisRestart()
			ch.mu.Lock()
			ch.redisDown = append(ch.redisDown, time.Now())
			ch.mu.Unlock()
			ch.restart(ch.env.redis, ch.env.redisPort, time.Second, &ch.redisRestarts)
		})
	}
	loop := func(every time.Duration, f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					f()
				}
			}
		}()
	}
	if ch.on["kill"] {
		loop(ch.cfg.killEvery, func() { ch.killReplica(ctx) })
	}
	if ch.on["latency"] {
		loop(12*time.Second, func() {
			ch.mu.Lock()
			ch.spikes++
			ch.mu.Unlock()
			f.setSpike(time.Second)
			sleepCtx(ctx, 2*time.Second)
			f.setSpike(0)
		})
	}
	loop(time.Second, ch.supervise)
	go func() { // owned by the caller, who waits on done
		wg.Wait()
		close(done)
	}()
	return done
}

// restart SIGKILLs p, waits, and starts it again on the same port (same store directory).
func (ch *chaos) restart(p *proc, port int, down time.Duration, counter *int) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.logf("fault: SIGKILL %s, back in %s", p.name, down)
	_ = p.kill()
	time.Sleep(down)
	if err := p.start(); err != nil {
		ch.logf("soak: restart %s: %v", p.name, err)
		return
	}
	if err := waitPort(context.Background(), port, 30*time.Second); err != nil {
		ch.logf("soak: %s: %v", p.name, err)
	}
	*counter++
}

// killReplica SIGKILLs a random running replica and restarts it after restartAfter.
func (ch *chaos) killReplica(ctx context.Context) {
	r := ch.env.replicas[rand.IntN(len(ch.env.replicas))]
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !r.running() {
		return
	}
	ch.logf("fault: SIGKILL %s", r.name)
	_ = r.kill()
	ch.kills++
	sleepCtx(ctx, ch.cfg.restartAfter)
	if err := r.start(); err != nil {
		ch.logf("soak: restart %s: %v", r.name, err)
	}
}

// supervise restarts whatever ended on its own (a replica that could not reach NATS at start).
func (ch *chaos) supervise() {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for _, r := range ch.env.replicas {
		if !r.running() {
			ch.logf("soak: %s is not running; starting it", r.name)
			if err := r.start(); err != nil {
				ch.logf("soak: start %s: %v", r.name, err)
			}
		}
	}
}

// heal ends every fault and makes sure every process runs.
func (ch *chaos) heal() {
	f := ch.env.faults
	f.setLostRate(0)
	f.setPatchFailRate(0)
	f.setSpike(0)
	for _, p := range []*proc{ch.env.nats, ch.env.redis} {
		if !p.running() {
			_ = p.start()
		}
	}
	ch.supervise()
}

func (ch *chaos) summary(w io.Writer) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	f := ch.env.faults
	starts := 0
	for _, r := range ch.env.replicas {
		s, _ := r.counts()
		starts += s
	}
	fmt.Fprintf(w, "  faults: %d replica SIGKILLs (%d replica starts), %d NATS restarts, %d Redis restarts, %d latency spikes (%d requests delayed 1s),\n"+
		"          %d of %d Proxmox write answers lost, %d of %d NetBox journal PATCHes failed\n",
		ch.kills, starts, ch.natsRestarts, ch.redisRestarts, ch.spikes, f.spiked.Load(),
		f.lostAnswers.Load(), f.pveWrites.Load(), f.patchFailed.Load(), f.netboxPatchs.Load())
}
