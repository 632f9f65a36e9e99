package main

import (
	"context"
	"fmt"
	"github.com/proxbus/proxbus/bench/internal/harness"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
	var view *clusterView
	if cfg.cluster {
		logf("nats cluster: %d servers (%s), streams R3; leader kills %s", len(e.natsNodes), nodeNames(e.natsNodes), killsString(cfg.kills))
		// The replicas provision R3 streams at start: only once the cluster has formed (a
		// meta leader, every peer current), as an operator would start them.
		view = &clusterView{nodes: e.natsNodes, client: &http.Client{Timeout: 2 * time.Second}}
		if ok, why := view.waitHealthy(ctx, 60*time.Second); !ok {
			logf("soak: the NATS cluster did not form in 60s: %s", why)
			keep = true
			return 2
		}
	}
	// A rolling start: the first replica provisions the streams alone, then the others start
	// (replicas that provision at once on a fresh cluster all time out and exit).
	if err := e.startReplicas(0, 1); err != nil {
		logf("soak: %v", err)
		keep = true
		return 2
	}
	sup := newSupervisor(e.replicas, logf)
	defer sup.stop() // before e.close (defers run last-in first-out)

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
	if err := e.startReplicas(1, len(e.replicas)); err != nil {
		logf("soak: %v", err)
		keep = true
		return 2
	}
	if cfg.cluster {
		if err := checkReplicas(ctx, js, subjects, 3); err != nil {
			logf("soak: %v", err)
			keep = true
			return 2
		}
		view.js = js
		view.streams = map[killRole]string{roleCommands: subjects.CommandsStream(), roleEvents: subjects.EventsStream()}
		if ok, why := view.waitHealthy(ctx, 60*time.Second); !ok {
			logf("soak: the NATS cluster is not healthy after 60s: %s", why)
			keep = true
			return 2
		}
	}
	rdb := e.redis.client()
	defer rdb.Close()

	canary := newCanary()
	run := fmt.Sprintf("%x", time.Now().Unix()%0xFFFFFF)
	plan := newGenerator(cfg.seed, run, canary, int(10*cfg.rate)).withLoad(cfg.hotShare, cfg.producers).plan(cfg.commands)
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
	ch := &chaos{cfg: cfg, env: e, view: view, sup: sup, on: faultsOn, logf: logf, beforeRedisRestart: func() {
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
	// Cluster mode: a schedule fires a command every second through the faults (contract §11).
	scheduled := cfg.cluster && !cfg.redisEphemeral
	if scheduled {
		if err := startSchedule(ctx, nc, js, subjects, run); err != nil {
			logf("soak: %v", err)
			keep = true
			return 2
		}
		logf("schedule %s fires vm.list every second", soakSchedule)
	} else if cfg.cluster {
		logf("no schedule: an ephemeral Redis loses what schedule.add recorded, so its firings would be refused 403")
	}
	// The publisher (and the SDK's senders, which look the stream up) before any fault.
	pb, err := newPublisher(ctx, nc, js, subjects, plan)
	if err != nil {
		logf("soak: %v", err)
		keep = true
		return 2
	}
	// The second person (contract §4b): decisions on every command of an approval verb, some
	// early, the others once the command waits for them, during every fault.
	dec, err := newDecider(nc, subjects, pb, planDecisions(plan, cfg.approval, cfg.seed, run), tracker.has)
	if err != nil {
		logf("soak: %v", err)
		return 2
	}
	pb.before = dec.before
	decCtx, stopDecider := context.WithCancel(ctx)
	decDone := make(chan struct{})
	var decErr error
	go func() {
		defer close(decDone)
		decErr = dec.run(decCtx)
	}()
	defer func() { stopDecider(); <-decDone }()
	// withDecisions is the plan and the decisions published so far.
	withDecisions := func() []*planned { return append(slices.Clone(plan), dec.published()...) }
	loadDur := time.Duration(float64(cfg.commands) / cfg.rate * float64(time.Second))
	chaosCtx, stopChaos := context.WithCancel(ctx)
	chaosDone := ch.start(chaosCtx, loadDur)
	killsDone := ch.startLeaderKills(ctx, loadDur)

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
	select {
	case <-killsDone:
	default:
		logf("faults stopped but the NATS leader kills, which go on while the backlog is processed")
		<-killsDone
	}
	ch.healNATS()
	faultsEnded := time.Now()
	if perr != nil {
		logf("soak: publishing stopped: %v", perr)
		keep = true
		return 2
	}
	logf("published everything in %s (%d publish retries); faults stopped; waiting for outcomes", time.Since(start).Round(time.Second), pb.retries)

	deadline := time.Now().Add(cfg.settle)
	settle := func() {
		for stalled := 0; time.Now().Before(deadline) && ctx.Err() == nil; {
			want := map[string]bool{}
			for _, p := range withDecisions() {
				want[p.cmd.ID] = true
			}
			before := tracker.missing(want)
			if before == 0 {
				return
			}
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
					pb.mu.Lock()
					r.checkOutcomes(withDecisions(), pb.published, c)
					pb.mu.Unlock()
					logf("the streams hold an outcome for all but %d", len(r.lost))
					if len(r.lost) == 0 {
						return
					}
				}
			}
		}
	}
	settle()
	stopDecider()
	<-decDone
	if err := decErr; err != nil {
		logf("soak: decider: %v", err)
		keep = true
		return 2
	}
	settle() // the outcomes of the decisions sent last
	plan = withDecisions()
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
	if scheduled {
		if err := stopSchedule(ctx, nc, js, subjects, run); err != nil {
			logf("soak: %v", err)
			keep = true
			return 2
		}
		sleepCtx(ctx, 5*time.Second) // a firing stored before the removal is answered too
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
	c.journaled = entryTimes(journal)
	rep.checkWrites(writes, tasks, plan, c)
	attr := attribute(writes, tasks, plan, c)
	rep.checkAnswers(plan, pb.published, c, attr, readFinalState(e.pve, plan))
	comments := make([]string, 0, len(journal))
	for _, en := range journal {
		comments = append(comments, en.Comments)
	}
	rep.checkApprovals(plan, c, attr, entryComments(comments))
	rep.approvals.skipped = dec.skipped
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
	fmt.Fprintf(out, "  commands %d, rate %.0f/s, seed %d, replicas %d × concurrency %d, max-ack-pending %d, lease-ttl %s, ack-wait %s, max attempts %d\n",
		cfg.commands, cfg.rate, cfg.seed, cfg.replicas, cfg.concurrency, maxAckPending, cfg.leaseTTL, cfg.ackWait, cfg.maxAttempts)
	mode := "single NATS server"
	if cfg.cluster {
		mode = fmt.Sprintf("NATS cluster of %d servers, streams R3", len(e.natsNodes))
	}
	onHot, load := 0, 0
	for _, p := range plan {
		if p.decision != nil {
			continue
		}
		load++
		if p.onHotGuest() {
			onHot++
		}
	}
	fmt.Fprintf(out, "  %s; %d commands (%.0f%%) act on the hot guests %v\n", mode, onHot, 100*float64(onHot)/float64(load), hotGuests)
	if len(cfg.approval) > 0 {
		fmt.Fprintf(out, "  approval needed for %s; the decider's decisions are counted below\n", strings.Join(cfg.approval, ", "))
	}
	fmt.Fprintf(out, "  producers:")
	for _, name := range producerNames {
		if n := pb.byProducer[name]; n > 0 {
			fmt.Fprintf(out, " %s %d", name, n)
		}
	}
	fmt.Fprintf(out, "; %d publish retries (%d of them SDK sends, which carry no Nats-Msg-Id)\n", pb.retries, pb.sdkRetries)
	ch.summary(out)
	fmt.Fprintf(out, "  scanned for the canary: %d events, %d dead letters, %d journal entries, %d Redis keys, %d replica log lines\n",
		len(c.events), len(c.dlqMsgs), entries, keys, logLines)
	fmt.Fprintf(out, "  journal repaired events: %d\n", c.repairs)
	rep.print(out)
	schedFailed := false
	if scheduled {
		sr := checkSchedule(c)
		sr.print(out, faultsEnded)
		schedFailed = sr.failed(faultsEnded)
	}
	if rep.failed() || schedFailed {
		keep = true
		fmt.Fprintln(out, "\nFAIL: a zero is not zero")
		return 1
	}
	fmt.Fprintln(out, "\nPASS: lost 0, first-hand results 1 each, not-executed writers 0, contradicted answers 0, duplicate writes 0, in_progress 0, finished dead letters 0, canary 0")
	return 0
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// durableName is the durable pull consumer proxbus provisions (contract §1).
const durableName = "proxbus"

// waitStreams waits until a replica has provisioned the streams and the durable consumer (a
// replica whose provisioning failed exits and is restarted by the supervisor).
func waitStreams(ctx context.Context, js jetstream.JetStream, s events.Subjects) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err1 := js.Stream(ctx, s.CommandsStream())
		_, err2 := js.Stream(ctx, s.EventsStream())
		_, err3 := js.Stream(ctx, s.DLQStream())
		_, err4 := js.Consumer(ctx, s.CommandsStream(), durableName)
		if err1 == nil && err2 == nil && err3 == nil && err4 == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("streams and the durable consumer not provisioned after 60s (see the replica logs)")
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

// has reports whether command id has an outcome.
func (t *tracker) has(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seen[id]
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
	view               *clusterView // cluster mode only
	sup                *supervisor
	on                 map[string]bool
	logf               func(string, ...any)
	beforeRedisRestart func()

	mu                                 sync.Mutex // serializes process restarts
	natsRestarts, redisRestarts, kills int
	redisFailovers                     int
	spikes                             int
	redisDown                          []time.Time
	leaderKills                        []string // one line per leader kill: server, roles, time
	skippedKills                       []string // planned kills the load ended before
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
	switch {
	case ch.on["nats"] && ch.view != nil: // startLeaderKills
	case ch.on["nats"]:
		n := ch.env.natsNodes[0]
		at(0.30, func() { ch.restart(n.proc, n.port, 2*time.Second, &ch.natsRestarts) })
	}
	switch {
	case ch.on["redis"] && ch.env.redis.mode != redisSingle:
		at(0.60, func() {
			ch.mu.Lock()
			defer ch.mu.Unlock()
			if err := ch.env.redis.failover(ctx, ch.logf); err != nil {
				ch.logf("soak: redis failover: %v", err)
				return
			}
			ch.redisFailovers++
		})
	case ch.on["redis"]:
		at(0.60, func() {
			ch.beforeRedisRestart()
			ch.mu.Lock()
			ch.redisDown = append(ch.redisDown, time.Now())
			ch.mu.Unlock()
			n := ch.env.redis.nodes[0]
			ch.restart(n.proc, n.port, time.Second, &ch.redisRestarts)
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
	if err := harness.WaitPort(context.Background(), port, 30*time.Second); err != nil {
		ch.logf("soak: %s: %v", p.name, err)
	}
	*counter++
}

// leaderKillGrace is how long after the publishing period a leader kill that fell behind
// (the cluster took long to heal) may still happen, while the backlog is processed.
const leaderKillGrace = 90 * time.Second

// startLeaderKills runs the cluster-mode leader kills (see killLeaders) in a goroutine of
// their own, not stopped with the other faults when publishing ends: the returned channel
// closes when the schedule is done, at the latest leaderKillGrace after the load period (plus
// one kill in progress). Without cluster mode or the nats fault it is closed at once.
func (ch *chaos) startLeaderKills(ctx context.Context, load time.Duration) <-chan struct{} {
	done := make(chan struct{})
	if ch.view == nil || !ch.on["nats"] {
		close(done)
		return done
	}
	kctx, cancel := context.WithTimeout(ctx, load+leaderKillGrace)
	go func() { // owned by the caller, who waits on done
		defer close(done)
		defer cancel()
		ch.killLeaders(kctx, load)
	}()
	return done
}

// killLeaders runs the cluster-mode schedule (--cluster-kills) from now: at each planned
// fraction of the load period (or at once, when the previous kill ran late) it waits (up to
// 30 s) for the cluster to be healthy, so that at most one server is ever down, finds the
// server holding the role through the JetStream API, moves the other roles off it where it
// can ([clusterView.isolate]), SIGKILLs it and restarts it after --server-down on the same
// ports and store directory. A kill that cannot start before ctx ends is skipped and reported.
func (ch *chaos) killLeaders(ctx context.Context, load time.Duration) {
	start := time.Now()
	for _, k := range ch.cfg.kills {
		sleepCtx(ctx, time.Until(start.Add(time.Duration(k.frac*float64(load)))))
		if ctx.Err() == nil {
			if ok, why := ch.view.waitHealthy(ctx, 30*time.Second); !ok && ctx.Err() == nil {
				ch.logf("soak: the NATS cluster is not healthy before the %s kill (%s); killing anyway", k.role, why)
			}
		}
		if ctx.Err() != nil {
			ch.mu.Lock()
			ch.skippedKills = append(ch.skippedKills, fmt.Sprintf("%s@%g", k.role, k.frac))
			ch.mu.Unlock()
			ch.logf("fault skipped: %s leader at %g (no time left)", k.role, k.frac)
			continue
		}
		var leader string
		var roles []string
		for try := 0; try < 20 && ctx.Err() == nil; try++ { // a leaderless moment right after an election
			lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if l := ch.view.isolate(lctx, k.role, ch.logf); ch.view.node(l) != nil {
				leader, roles = l, ch.view.rolesOf(lctx, l)
			}
			cancel()
			if leader != "" {
				break
			}
			sleepCtx(ctx, 500*time.Millisecond)
		}
		n := ch.view.node(leader)
		if n == nil {
			ch.logf("soak: no %s leader found; kill skipped", k.role)
			ch.mu.Lock()
			ch.skippedKills = append(ch.skippedKills, fmt.Sprintf("%s@%g (no leader found)", k.role, k.frac))
			ch.mu.Unlock()
			continue
		}
		if len(roles) == 0 {
			roles = []string{roleLabel(k.role, ch.view.streams)}
		}
		ch.mu.Lock()
		at := time.Since(start)
		ch.logf("fault: SIGKILL %s (%s) at %.1fs of %.0fs (planned %.1fs), back in %s", n.name, strings.Join(roles, ", "),
			at.Seconds(), load.Seconds(), k.frac*load.Seconds(), ch.cfg.serverDown)
		_ = n.proc.kill()
		ch.leaderKills = append(ch.leaderKills, fmt.Sprintf("%s %s (%s) at %.1fs, planned %.1fs", time.Now().Format("15:04:05.000"),
			n.name, strings.Join(roles, ", "), at.Seconds(), k.frac*load.Seconds()))
		ch.mu.Unlock()
		time.Sleep(ch.cfg.serverDown) // not cut short by ctx: the server always comes back
		ch.mu.Lock()
		err := n.proc.start()
		ch.mu.Unlock()
		if err != nil {
			ch.logf("soak: restart %s: %v", n.name, err)
			continue
		}
		if err := harness.WaitPort(context.Background(), n.port, 30*time.Second); err != nil {
			ch.logf("soak: %s: %v", n.name, err)
		}
	}
}

// killReplica SIGKILLs a random running replica and restarts it after restartAfter.
func (ch *chaos) killReplica(ctx context.Context) {
	r := ch.env.replicas[rand.IntN(len(ch.env.replicas))]
	ch.sup.mu.Lock()
	defer ch.sup.mu.Unlock()
	if !r.running() {
		return
	}
	ch.logf("fault: SIGKILL %s", r.name)
	_ = r.kill()
	ch.mu.Lock()
	ch.kills++
	ch.mu.Unlock()
	sleepCtx(ctx, ch.cfg.restartAfter)
	if err := r.start(); err != nil {
		ch.logf("soak: restart %s: %v", r.name, err)
	}
}

// supervisor restarts every replica that ends on its own (one whose start-up provisioning
// timed out, one that could not reach NATS), once a second, as systemd or Kubernetes would,
// from newSupervisor until stop, which waits for its goroutine. Deliberate kills and restarts
// of a replica hold mu, so the supervisor never races them.
type supervisor struct {
	mu       sync.Mutex
	replicas []*proc
	logf     func(string, ...any)
	restarts int // replicas it started again
	quit     chan struct{}
	done     chan struct{}
}

func newSupervisor(replicas []*proc, logf func(string, ...any)) *supervisor {
	s := &supervisor{replicas: replicas, logf: logf, quit: make(chan struct{}), done: make(chan struct{})}
	go func() { // owned by the supervisor: stop waits for done
		defer close(s.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-s.quit:
				return
			case <-t.C:
				s.check()
			}
		}
	}()
	return s
}

// check starts every replica that was started once and is not running.
func (s *supervisor) check() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.replicas {
		if starts, _ := r.counts(); starts > 0 && !r.running() {
			s.logf("soak: %s exited on its own (see its log); starting it", r.name)
			if err := r.start(); err != nil {
				s.logf("soak: start %s: %v", r.name, err)
				continue
			}
			s.restarts++
		}
	}
}

// exits returns how many times it restarted a replica that had ended on its own.
func (s *supervisor) exits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// stop ends the supervisor and waits for it; it may be called once.
func (s *supervisor) stop() {
	close(s.quit)
	<-s.done
}

// heal ends every fault and makes sure every process runs.
func (ch *chaos) heal() {
	f := ch.env.faults
	f.setLostRate(0)
	f.setPatchFailRate(0)
	f.setSpike(0)
	ch.env.redis.heal()
	for _, n := range ch.env.natsNodes {
		if ch.view != nil {
			break // the leader-kill goroutine restarts the server it killed
		}
		if !n.proc.running() {
			_ = n.proc.start()
		}
	}
	ch.sup.check()
}

// healNATS starts every NATS server that is not running (after the leader kills ended).
func (ch *chaos) healNATS() {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for _, n := range ch.env.natsNodes {
		if !n.proc.running() {
			ch.logf("soak: %s is not running; starting it", n.name)
			if err := n.proc.start(); err != nil {
				ch.logf("soak: start %s: %v", n.name, err)
			}
		}
	}
}

func (ch *chaos) summary(w io.Writer) {
	exited := ch.sup.exits() // sup.mu before ch.mu, as in killReplica
	ch.mu.Lock()
	defer ch.mu.Unlock()
	f := ch.env.faults
	starts := 0
	for _, r := range ch.env.replicas {
		s, _ := r.counts()
		starts += s
	}
	fmt.Fprintf(w, "  replicas that exited on their own and were restarted: %d\n", exited)
	if ch.env.redis.mode != redisSingle {
		fmt.Fprintf(w, "  Redis (%s): %d primary SIGKILLs with failover, the old primary back as a replica\n", ch.env.redis.mode, ch.redisFailovers)
	}
	fmt.Fprintf(w, "  faults: %d replica SIGKILLs (%d replica starts), %d NATS restarts, %d Redis restarts, %d latency spikes (%d requests delayed 1s),\n"+
		"          %d of %d Proxmox write answers lost, %d of %d NetBox journal PATCHes failed\n",
		ch.kills, starts, ch.natsRestarts, ch.redisRestarts, ch.spikes, f.spiked.Load(),
		f.lostAnswers.Load(), f.pveWrites.Load(), f.patchFailed.Load(), f.netboxPatchs.Load())
	if ch.view != nil {
		fmt.Fprintf(w, "  NATS leader SIGKILLs: %d of %d planned (%s), each server back after %s\n",
			len(ch.leaderKills), len(ch.cfg.kills), killsString(ch.cfg.kills), ch.cfg.serverDown)
		for _, k := range ch.leaderKills {
			fmt.Fprintf(w, "    %s\n", k)
		}
		for _, k := range ch.skippedKills {
			fmt.Fprintf(w, "    skipped: %s\n", k)
		}
	}
}

// checkReplicas checks that every stream of proxbus has want replicas (--stream-replicas).
func checkReplicas(ctx context.Context, js jetstream.JetStream, s events.Subjects, want int) error {
	for _, name := range []string{s.CommandsStream(), s.EventsStream(), s.DLQStream()} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			return fmt.Errorf("stream %s: %w", name, err)
		}
		if got := st.CachedInfo().Config.Replicas; got != want {
			return fmt.Errorf("stream %s has %d replicas, want %d", name, got, want)
		}
	}
	return nil
}

// nodeNames lists the servers' names.
func nodeNames(nodes []*natsNode) string {
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.name
	}
	return strings.Join(names, ", ")
}

// killsString writes a kill schedule as --cluster-kills takes it.
func killsString(kills []plannedKill) string {
	parts := make([]string, len(kills))
	for i, k := range kills {
		parts[i] = fmt.Sprintf("%s@%g", k.role, k.frac)
	}
	return strings.Join(parts, ",")
}
