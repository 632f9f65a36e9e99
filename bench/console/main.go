// Command console measures the web console with a full history (issue: "the list of the last
// 10,000 commands renders in under 300 ms server time and the page stays responsive with 200
// commands per second arriving").
//
// It starts an embedded JetStream server, publishes the events of -n synthetic commands as
// three replicas would (claim, the verb's steps, started and done, then the result: 4–6
// events each; one in 50 still running), starts a console on them behind httptest, and waits
// until it holds them all. Then:
//
//   - render: -requests GETs, one at a time, of the whole list (?limit=N), the default page
//     (500 rows) and a filtered one (?verb=vm.start&limit=N), each timed in the handler
//     (ServeHTTP wrapped: until the last byte is written to the loopback connection) and at the
//     client (to the last byte read);
//   - live: -rate new commands a second for -d, each command's events 50–300 ms apart, while a
//     Go client reads the list's live stream (/ui/live/commands) and times each new
//     command's row from the publication of its first event, and, when node, /usr/bin/chromium
//     and playwright-core are there, responsive.mjs watches the same page in headless Chromium
//     (event-loop lag, long tasks, frame gaps, the rows handler, input → next paint, a click
//     on Filter). It runs twice: on the default page and on ?limit=1000 (the longest list
//     the console updates live; a longer one is a static page).
//
// -live-interval sets the console's LiveInterval, -extra-css adds a style sheet to the page in
// the browser and -trace-dir writes a Chromium trace of each window: ways to try a change of
// the console without making it.
//
//	go -C bench run ./console                         # -n 10000 -requests 30 -rate 200 -d 20s
//	go -C bench run ./console -short                  # CI: 1,000 commands, 3 s windows
//	go -C bench run ./console -cpuprofile cpu.pprof   # profile of the render part
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/console"
	"github.com/proxbus/proxbus/internal/embedded"
)

// token is the console's read token in this benchmark (not a secret: nothing else uses it).
const token = "bench-read-token-0123456789"

type options struct {
	n, requests  int
	rate         float64
	d            time.Duration
	noBrowser    bool
	cpuprofile   string
	extraCSS     string
	traceDir     string
	liveInterval time.Duration
}

func main() {
	var o options
	flag.IntVar(&o.n, "n", console.DefaultHistory, "commands of the history (the console holds at most 10,000)")
	flag.IntVar(&o.requests, "requests", 30, "requests per rendered page")
	flag.Float64Var(&o.rate, "rate", 200, "new commands per second in the live part")
	flag.DurationVar(&o.d, "d", 20*time.Second, "duration of each live window")
	flag.BoolVar(&o.noBrowser, "no-browser", false, "skip the headless Chromium part")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the render part to this file")
	flag.DurationVar(&o.liveInterval, "live-interval", 0, "the console's LiveInterval (0: its default, 250 ms)")
	flag.StringVar(&o.traceDir, "trace-dir", "", "write a Chromium trace of each browser window to this directory")
	flag.StringVar(&o.extraCSS, "extra-css", "", "CSS added to the page in the browser part (to try a style change)")
	short := flag.Bool("short", false, "CI smoke run: 1,000 commands, 5 requests, 3 s windows")
	flag.Parse()
	if *short {
		o.n, o.requests, o.d = 1000, 5, 3*time.Second
	}
	if o.n < 1 || o.requests < 1 || o.rate <= 0 || o.d <= 0 {
		log.Fatal("-n, -requests, -rate and -d must be positive")
	}
	if err := run(o); err != nil {
		log.Fatal(err)
	}
}

func run(o options) error {
	ctx := context.Background()
	loadAverage := "?"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		loadAverage = strings.Fields(string(b))[0]
	}
	dir, err := os.MkdirTemp("", "proxbus-bench-console-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := embedded.StartNATS(embedded.NATSOptions{StoreDir: dir})
	if err != nil {
		return err
	}
	defer srv.WaitForShutdown()
	defer srv.Shutdown()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		return fmt.Errorf("connect nats: %w", err)
	}
	defer nc.Close()
	s := events.NewSubjects("")
	f, err := newFleet(nc, s)
	if err != nil {
		return err
	}
	if err := consumer.Provision(ctx, f.js, consumer.Config{Subjects: s}); err != nil {
		return fmt.Errorf("provision: %w", err)
	}

	began := time.Now()
	evs, err := f.history(ctx, o.n)
	if err != nil {
		return err
	}
	published := time.Since(began)

	c, err := console.New(console.Config{JetStream: f.js, Subjects: s, Access: console.Access{ReadToken: token}, Verbs: verbNames(), LiveInterval: o.liveInterval})
	if err != nil {
		return err
	}
	cctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	began = time.Now()
	wg.Go(func() { c.Run(cctx) })
	th := &timedHandler{next: c.Handler()}
	ts := httptest.NewServer(th)
	defer func() { stop(); wg.Wait(); ts.Close() }()
	cl := client{base: ts.URL, token: token, hc: &http.Client{Timeout: time.Minute}}
	// The console holds the newest held commands: of them, finished have their result and
	// starts are vm.start.
	held := min(o.n, console.DefaultHistory)
	var finished, starts int
	for i := o.n - held; i < o.n; i++ {
		p := newPlan("hist", i, true)
		if _, ok := p.events[len(p.events)-1].(events.Result); ok {
			finished++
		}
		if p.origin.Verb == "vm.start" {
			starts++
		}
	}
	if err := waitHeld(ctx, cl, held, finished); err != nil {
		return err
	}
	read := time.Since(began)

	fmt.Printf("# console: %d commands (%d events) of history, GOMAXPROCS %d, %s, load average %s at start\n",
		o.n, evs, runtime.GOMAXPROCS(0), runtime.Version(), loadAverage)
	fmt.Printf("# published in %.1f s; the console read them at start in %.1f s (%.0f events/s)\n\n",
		published.Seconds(), read.Seconds(), float64(evs)/read.Seconds())

	cases := []renderCase{
		{fmt.Sprintf("/ui/commands?limit=%d", held), held},
		{"/ui/commands", min(held, console.DefaultListLimit)},
		{fmt.Sprintf("/ui/commands?verb=vm.start&limit=%d", held), starts},
	}
	if o.cpuprofile != "" {
		pf, err := os.Create(o.cpuprofile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pf.Close()
	}
	var results []renderResult
	for _, rc := range cases {
		r, err := measureRender(ctx, cl, th, rc, o.requests)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	if o.cpuprofile != "" {
		pprof.StopCPUProfile()
	}
	printRender(results)

	b, note := findBrowser()
	switch {
	case o.noBrowser:
		b, note = nil, "-no-browser"
	case b != nil:
		b.extraCSS, b.traceDir = o.extraCSS, o.traceDir
		if o.extraCSS != "" {
			fmt.Printf("\nThe browser adds this CSS to the page: `%s`\n", o.extraCSS)
		}
	}
	var ws []window
	// The longest live list is 1,000 rows: a longer one is rendered once, not updated live.
	for i, page := range []string{"/ui/commands", fmt.Sprintf("/ui/commands?limit=%d", min(held, maxLiveRows))} {
		w, err := liveWindow(ctx, cl, f, b, page, fmt.Sprintf("live%d", i), o.rate, o.d)
		if err != nil {
			return err
		}
		ws = append(ws, w)
	}
	if o.liveInterval > 0 {
		fmt.Printf("\nThe console's LiveInterval is %s.\n", o.liveInterval)
	}
	printLive(ws, o.rate, o.d, note)
	return nil
}

// liveWindow publishes new commands at rate for d while a Go client, and b when there is one,
// watch page.
func liveWindow(ctx context.Context, cl client, f *fleet, b *browser, page, prefix string, rate float64, d time.Duration) (window, error) {
	w := window{page: page}
	live, err := livePath(ctx, cl, page)
	if err != nil {
		return w, err
	}
	fs := &firsts{at: map[string]time.Time{}}
	sctx, stopSSE := context.WithCancel(ctx)
	defer stopSSE()
	var (
		wg             sync.WaitGroup
		sseErr, brErr  error
		br             browserResult
		ready          = make(chan struct{})
		bctx, stopNode = context.WithTimeout(ctx, d+2*time.Minute)
	)
	defer stopNode()
	wg.Go(func() { w.sse, sseErr = readSSE(sctx, cl, live, prefix, fs) })
	if b != nil {
		ended := make(chan struct{})
		// The browser measures for the first four fifths of the window, then clicks Filter
		// while commands still arrive.
		wg.Go(func() { defer close(ended); br, brErr = b.run(bctx, cl.base+page, cl.token, prefix, d*4/5, ready) })
		select {
		case <-ready:
		case <-ended:
			stopSSE()
			wg.Wait()
			return w, fmt.Errorf("the browser did not open %s: %w", page, brErr)
		}
	}
	w.from = time.Now()
	mark := markCPU()
	w.cmds, w.evs, err = f.live(ctx, prefix, rate, d, fs)
	w.cpu = mark.since()
	w.to = time.Now()
	if err != nil {
		return w, err
	}
	time.Sleep(time.Second) // the last rows' updates
	stopSSE()
	wg.Wait()
	if sseErr != nil {
		return w, sseErr
	}
	if brErr != nil {
		return w, brErr
	}
	if b != nil {
		w.browser = &br
	}
	return w, nil
}

// maxLiveRows is the longest list the console updates live (internal/console).
const maxLiveRows = 1000
