package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/netbox"
	"github.com/proxbus/proxbus/internal/proxmox"
	simnetbox "github.com/proxbus/proxbus/internal/sim/netbox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
	"github.com/proxbus/proxbus/internal/testenv"
	"github.com/proxbus/proxbus/store"
	"github.com/redis/go-redis/v9"
)

// crashEnv is one simulated world a command runs in and is resumed in: real Redis (the
// store on a test clock, so that a dead owner's lease can be let expire), sim/pve with tasks
// that end at once, sim/netbox, and an events stream; every pipeline made by pipeline shares
// them, as replicas share a deployment.
type crashEnv struct {
	t       *testing.T
	store   *store.Store
	clock   *testenv.Clock
	pve     *simpve.Server
	nb      *simnetbox.Server
	clients *proxmox.Clients
	nbc     *netbox.Client
	stream  *stream
	outage  *storeOutage
}

func newCrashEnv(t *testing.T) *crashEnv {
	t.Helper()
	r := testenv.StartRedis(t)
	e := &crashEnv{t: t, clock: testenv.NewClock(time.Now()), stream: newStream(), outage: &storeOutage{}}
	rdb := redis.NewClient(r.Client.Options())
	t.Cleanup(func() { _ = rdb.Close() })
	rdb.AddHook(e.outage)
	var err error
	if e.store, err = store.New(rdb, store.Options{Prefix: r.Prefix, LeaseTTL: 30 * time.Second, Now: e.clock.Now}); err != nil {
		t.Fatal(err)
	}
	e.pve = simpve.New(simpve.Options{Scenario: "demo", TaskDuration: -1, NodeRebootDuration: -1})
	pveSrv := httptest.NewServer(e.pve.Handler())
	t.Cleanup(pveSrv.Close)
	e.nb = simnetbox.New(simnetbox.Options{Scenario: simnetbox.ScenarioDemo})
	nbSrv := httptest.NewServer(e.nb.Handler())
	t.Cleanup(nbSrv.Close)
	if e.clients, err = proxmox.NewClients([]proxmox.EndpointConfig{{ID: 1, Name: "lab", URLs: []string{pveSrv.URL},
		TokenID: simpve.DemoTokenID, TokenSecretEnv: "PVE_SECRET", Timeout: 5 * time.Second}},
		func(string) string { return simpve.DemoSecret }, proxmox.WithTaskPollInterval(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if e.nbc, err = netbox.New(netbox.Config{URL: nbSrv.URL, Token: simnetbox.TokenV1, Timeout: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	return e
}

// pipeline is a fresh pipeline (a replica named instance) on the env, calling crashAt at every
// crash point when it is not nil.
func (e *crashEnv) pipeline(instance string, crashAt func(string)) *Pipeline {
	e.t.Helper()
	p, err := New(Config{
		Registry: NewRegistry(Builtin()...), Store: e.store, Endpoints: netbox.NewEndpointCache(e.nbc, 30*time.Second, nil),
		Journal: e.nbc, Proxmox: e.clients, Publisher: e.stream, History: e.stream, Instance: instance, Now: e.clock.Now,
		Settings: Settings{GuardWait: 10 * time.Millisecond, ConfirmFor: 2 * time.Second, JournalRetryDelay: time.Millisecond},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	p.crashAt = crashAt
	followTable(e.t, p)
	return p
}

// command is the write command id of case tc on endpoint 1, arrived in the stream now.
func crashCommand(id string, tc apiCallCase) events.Command {
	return events.Command{ID: id, Source: "/test/crash", Type: events.TypePrefix + tc.verb, Verb: tc.verb,
		EndpointID: 1, HasEndpointID: true, Data: json.RawMessage(tc.data)}
}

// untilDone delivers cmd to p as delivery n, n+1, … (the store's clock moved past each
// answer's pause, the command's arrival stored at arrived) until it is answered Ack or
// DeadLetter, and returns that disposition.
func (e *crashEnv) untilDone(p *Pipeline, cmd events.Command, arrived time.Time, n uint64) events.Disposition {
	e.t.Helper()
	for last := n + 40; n < last; n++ {
		d := p.Handle(context.Background(), cmd, events.Delivery{Number: n, Stored: arrived, StreamSeq: 7})
		if d.Action == events.Ack || d.Action == events.DeadLetter {
			return d
		}
		e.clock.Advance(max(d.Delay, time.Second))
	}
	e.t.Fatalf("%s: not done after 40 deliveries", cmd.ID)
	return events.Disposition{}
}

// requests is how many requests the simulator has had so far.
func (e *crashEnv) requests() int { return len(e.pve.RequestLog()) }

// writesSince is the simulator's Proxmox writes after its first since requests, as "METHOD
// path", in the order sent, but for those on guest 201 (the other replica's command's).
func (e *crashEnv) writesSince(since int) []string {
	var out []string
	for _, r := range e.pve.RequestLog()[since:] {
		if r.Method != "GET" && !strings.Contains(r.Path, "/lxc/201/") {
			out = append(out, r.Method+" "+r.Path)
		}
	}
	return out
}

// crashRun is what one run of a command left: its results, the Proxmox writes and the
// journal entries of the command.
type crashRun struct {
	results []events.Result
	writes  []string // sorted
	ordered []string // as sent
	entries []simnetbox.Entry
	last    events.Disposition
	// unconfirmed, in an expectation, allows a 502 *_unconfirmed answer instead of results'.
	unconfirmed bool
}

func (e *crashEnv) observe(cmd events.Command, since int, last events.Disposition) crashRun {
	run := crashRun{results: e.stream.resultsOf(cmd.Ref()), ordered: e.writesSince(since), last: last}
	run.writes = slices.Sorted(slices.Values(run.ordered))
	for _, en := range e.nb.JournalEntries() {
		if strings.Contains(en.Comments, "- command_id: "+cmd.ID+"\n") {
			run.entries = append(run.entries, en)
		}
	}
	return run
}

// prepare runs the cases before tc's (its preconditions: the PBS storage a backup goes to,
// the VM a delete removes) on a plain pipeline.
func (e *crashEnv) prepare(cases []apiCallCase, upTo int) {
	e.t.Helper()
	p := e.pipeline("setup", nil)
	for i, tc := range cases[:upTo] {
		if v, _ := p.cfg.Registry.Lookup(tc.verb); v.VerbAccess() != Write {
			continue
		}
		cmd := crashCommand(fmt.Sprintf("setup-%02d", i), tc)
		if d := e.untilDone(p, cmd, time.Now(), 1); d.Action != events.Ack {
			e.t.Fatalf("setup %s: %+v", tc.name, d)
		}
	}
}

// unconfirmable are the verbs whose write cannot be confirmed by reading (no Confirm): a
// command stopped after sending it is answered 502 proxmox_write_unconfirmed, truthfully. A
// node or guest reboot leaves nothing to read; a rollback leaves the guest as a snapshot was, which
// reads the same as before it; a PBS storage's token secret is never shown by PVE.
var unconfirmable = map[string]bool{"node.reboot": true, "vm.reboot": true, "vm.snapshot.rollback": true, "storage.pbs.update": true}

// TestEveryCrashPoint is the proof of contract §4's "a command that may have written is
// resumed and confirmed": for every write verb's happy path (the demo tour's, on the demo
// cluster), the command is run once to list the crash points it passes (every persisted
// change, before and after every Proxmox write, before and after every event published;
// crashpoint.go), then, for each point in turn, in a fresh world, it is stopped there (its
// process dies: no cleanup, its lease left to expire), another replica runs a command of its
// own, and the command is delivered again to a fresh pipeline until it is answered. Each time:
// it is never dead-lettered; exactly one first-hand result, equal to the uncrashed run's (or,
// for a write that cannot be confirmed by reading, or stopped between its mark and its
// request, 502 *_unconfirmed); the same Proxmox writes as the uncrashed run, none twice;
// exactly one journal entry, finalized (never left in_progress). The number of points is
// logged.
func TestEveryCrashPoint(t *testing.T) {
	t.Parallel()
	cases := apiCallCases(serveCloudImage(t, "crash-cloudimg-amd64.img"))

	var mu sync.Mutex
	total := 0
	t.Cleanup(func() { t.Logf("%d crash points over every write verb", total) })
	for i, tc := range cases {
		if v, _ := NewRegistry(Builtin()...).Lookup(tc.verb); v.VerbAccess() != Write {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := newCrashEnv(t)
			base.prepare(cases, i)
			var points []string
			cmd := crashCommand("crash-subject", tc)
			before := base.requests()
			d := base.untilDone(base.pipeline("first", func(p string) { points = append(points, p) }), cmd, time.Now(), 1)
			want := base.observe(cmd, before, d)
			if len(want.results) != 1 || want.results[0].Status != tc.status {
				t.Fatalf("uncrashed run: results %+v, want one %d", want.results, tc.status)
			}
			t.Logf("%d crash points: %s", len(points), strings.Join(points, ", "))
			mu.Lock()
			total += len(points)
			mu.Unlock()

			for k, point := range points {
				e := newCrashEnv(t)
				e.prepare(cases, i)
				before := e.requests()
				arrived := time.Now()
				seen := 0
				crashing := e.pipeline("dies", func(p string) {
					if seen == k {
						panic(crashSignal{point: p})
					}
					seen++
				})
				if d := crashing.Handle(context.Background(), cmd, events.Delivery{Number: 1, Stored: arrived, StreamSeq: 7}); d.Action == events.Ack && seen < k {
					t.Fatalf("point %d (%s): the run ended before it", k, point)
				}
				// another replica's command runs meanwhile (its writes are not the subject's)
				other := crashCommand(fmt.Sprintf("other-%d", k), apiCallCase{verb: "vm.snapshot.create", data: fmt.Sprintf(`{"vm":201,"snapshot":"other%d"}`, k)})
				if d := e.untilDone(e.pipeline("other", nil), other, time.Now(), 1); d.Action != events.Ack {
					t.Fatalf("point %d: the other replica's command: %+v", k, d)
				}
				e.clock.Advance(31 * time.Second) // the dead owner's lease expires
				got := e.observe(cmd, before, e.untilDone(e.pipeline("resumes", nil), cmd, arrived, 2))
				at := fmt.Sprintf("point %d (%s)", k, point)
				if point == "stored dispatch mark" || (k > 0 && points[k-1] == "stored dispatch mark") {
					// Marked but not sent: the one window a resume cannot tell from a lost
					// answer. The write is confirmed by reading, never sent again: absent, it
					// is answered unconfirmed, truthfully, unless the verb can tell by reading
					// that nothing happened and runs as new (vm.provision without its VM).
					sent := 0
					for _, p := range points[:k] {
						if strings.HasPrefix(p, crashAfterSend+" ") {
							sent++
						}
					}
					window := crashRun{results: want.results, writes: slices.Sorted(slices.Values(want.ordered[:sent])), unconfirmed: true}
					if !slices.Equal(got.writes, want.writes) {
						checkResumed(t, at, tc.verb, window, got)
						continue
					}
				}
				checkResumed(t, at, tc.verb, want, got)
			}
		})
	}
}

// checkResumed compares a crashed and resumed run with the uncrashed one.
func checkResumed(t *testing.T, at, verb string, want, got crashRun) {
	t.Helper()
	if got.last.Action != events.Ack {
		t.Errorf("%s: ended %+v, want acked (never dead-lettered)", at, got.last)
	}
	var firstHand []events.Result
	for _, r := range got.results {
		if !r.Replayed {
			firstHand = append(firstHand, r)
		}
	}
	switch {
	case len(firstHand) != 1:
		t.Errorf("%s: %d first-hand results %+v, want exactly one", at, len(firstHand), firstHand)
	case (unconfirmable[verb] || want.unconfirmed) && strings.HasSuffix(firstHand[0].Reason, "_unconfirmed") && firstHand[0].Status == 502:
	case firstHand[0].Status != want.results[0].Status || firstHand[0].Result != want.results[0].Result:
		t.Errorf("%s: answered %d %s %s (%s), want %d %s as uncrashed", at, firstHand[0].Status, firstHand[0].Result,
			firstHand[0].Reason, firstHand[0].Detail, want.results[0].Status, want.results[0].Result)
	}
	if !slices.Equal(got.writes, want.writes) {
		t.Errorf("%s: Proxmox writes\n\t%s\nwant, as uncrashed,\n\t%s", at, strings.Join(got.writes, "\n\t"), strings.Join(want.writes, "\n\t"))
	}
	if len(got.entries) != 1 {
		t.Errorf("%s: %d journal entries, want one", at, len(got.entries))
	}
	for _, en := range got.entries {
		if strings.Contains(en.Comments, "- result: in_progress\n") {
			t.Errorf("%s: journal entry %d left in_progress", at, en.ID)
		}
	}
}

// TestResumedDeleteByNameOfAGoneGuest: a vm.delete naming its guest by name, stopped right
// after its DELETE was answered, resumes to find no guest of that name: its DELETE took
// effect, so it answers 200 ok with the vmid its claim recorded, not 502
// proxmox_write_unconfirmed (as the soak once saw); its stop and DELETE were sent once.
func TestResumedDeleteByNameOfAGoneGuest(t *testing.T) {
	t.Parallel()
	cases := apiCallCases(serveCloudImage(t, "gone-cloudimg-amd64.img"))
	i := slices.IndexFunc(cases, func(c apiCallCase) bool { return strings.HasPrefix(c.name, "vm.delete") })
	e := newCrashEnv(t)
	e.prepare(cases, i) // provisions VM 310, demo-310
	before := e.requests()
	cmd := crashCommand("gone-by-name", apiCallCase{verb: "vm.delete", data: `{"vm":"demo-310","stop_first":true}`})
	arrived := time.Now()
	crashing := e.pipeline("dies", func(p string) {
		if p == crashAfterSend+" "+stepDeleteVM {
			panic(crashSignal{point: p})
		}
	})
	crashing.Handle(context.Background(), cmd, events.Delivery{Number: 1, Stored: arrived, StreamSeq: 7})
	e.clock.Advance(31 * time.Second)
	got := e.observe(cmd, before, e.untilDone(e.pipeline("resumes", nil), cmd, arrived, 2))
	if len(got.results) != 1 || got.results[0].Status != 200 || got.results[0].Result != ResultOK || !strings.Contains(string(got.results[0].Output), `"vmid":"310"`) {
		t.Fatalf("results %+v, want one 200 ok naming vmid 310", got.results)
	}
	if want := []string{"DELETE /nodes/pve2/qemu/310", "POST /nodes/pve2/qemu/310/status/stop"}; !slices.Equal(got.writes, want) {
		t.Errorf("writes %v, want %v", got.writes, want)
	}
	if len(got.entries) != 1 || strings.Contains(got.entries[0].Comments, "in_progress") {
		t.Errorf("journal entries %+v, want one finalized", got.entries)
	}
}
