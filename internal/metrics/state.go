package metrics

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/buildinfo"
)

// waitGrace is how long a command handed back to wait is still counted after its pause ended
// without a redelivery here (it may have gone to another replica, or be on its way).
const waitGrace = 30 * time.Second

// scrapeCollector reports samples read at scrape time (from Redis), bounded by a timeout; a
// failing read omits its samples. One read at a time, however many scrapes overlap.
type scrapeCollector struct {
	descs   []*prometheus.Desc
	timeout time.Duration
	read    func(ctx context.Context, ch chan<- prometheus.Metric) error
	mu      sync.Mutex
}

func (c *scrapeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *scrapeCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	_ = c.read(ctx, ch) // a failed read is an absent sample, which the dashboards show as such
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, nil)
}

// buildInfo is proxbus_build_info: 1, labelled with the build's version and commit.
func buildInfo(b buildinfo.Info) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "build_info",
		Help:        "Always 1; its labels say which build of proxbus this replica runs.",
		ConstLabels: prometheus.Labels{"version": b.Version, "commit": b.Commit, "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}

// pendingCollector reports the pending approvals and the age of the oldest at scrape time.
func pendingCollector(fn func(ctx context.Context) (int, time.Time, error), now func() time.Time, timeout time.Duration) prometheus.Collector {
	count := desc("approvals_pending", "Commands awaiting a second person's approval, in the whole deployment (read from Redis at scrape time).")
	oldest := desc("approval_oldest_pending_seconds", "How long the oldest command awaiting approval has waited (0 when none; read from Redis at scrape time).")
	return &scrapeCollector{descs: []*prometheus.Desc{count, oldest}, timeout: timeout, read: func(ctx context.Context, ch chan<- prometheus.Metric) error {
		n, first, err := fn(ctx)
		if err != nil {
			return err
		}
		age := 0.0
		if n > 0 && !first.IsZero() {
			age = max(now().Sub(first), 0).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(count, prometheus.GaugeValue, float64(n))
		ch <- prometheus.MustNewConstMetric(oldest, prometheus.GaugeValue, age)
		return nil
	}}
}

// dependencyCollector reports proxbus_dependency_up for each dependency fn names.
type dependencyCollector struct {
	fn   func() map[string]bool
	desc *prometheus.Desc
}

func newDependencyCollector(fn func() map[string]bool) *dependencyCollector {
	return &dependencyCollector{fn: fn, desc: desc("dependency_up",
		"1 when the dependency (netbox, proxmox/<endpoint id>) is usable, 0 while it refuses proxbus's token or could not be reached; its commands wait meanwhile.", "dependency")}
}

func (c *dependencyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *dependencyCollector) Collect(ch chan<- prometheus.Metric) {
	for name, up := range c.fn() {
		v := 0.0
		if up {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, name)
	}
}

// waitTracker remembers the commands this replica handed back to wait (a Redeliver
// disposition: a wait or a failed attempt before any write), with when each arrived, until
// a later delivery here answers it or its pause plus [waitGrace] has passed.
type waitTracker struct {
	now    func() time.Time
	max    int
	count  *prometheus.Desc
	oldest *prometheus.Desc

	mu   sync.Mutex
	cmds map[string]waiting
}

// waiting is one command handed back: when it arrived and until when it counts.
type waiting struct{ arrived, until time.Time }

func newWaitTracker(now func() time.Time, maxCmds int) *waitTracker {
	return &waitTracker{now: now, max: maxCmds, cmds: map[string]waiting{},
		count: desc("commands_waiting",
			"Commands this replica handed back to wait (busy guest, full endpoint, approval, a dependency down, a failed attempt) and not redelivered here yet; a command redelivered to another replica counts there."),
		oldest: desc("command_oldest_waiting_seconds",
			"Age, since it arrived in the commands stream, of the oldest command proxbus_commands_waiting counts (0 when none)."),
	}
}

// handled records the end of one delivery of cmd.
func (w *waitTracker) handled(cmd events.Command, d events.Delivery, disp events.Disposition) {
	k := cmdKey(cmd.Source, cmd.ID)
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if disp.Action != events.Redeliver {
		delete(w.cmds, k)
		return
	}
	arrived := d.Stored
	if prev, ok := w.cmds[k]; ok && (arrived.IsZero() || prev.arrived.Before(arrived)) {
		arrived = prev.arrived
	}
	if arrived.IsZero() {
		arrived = now
	}
	if _, ok := w.cmds[k]; !ok && len(w.cmds) >= w.max {
		w.expire(now)
		if len(w.cmds) >= w.max {
			return
		}
	}
	w.cmds[k] = waiting{arrived: arrived, until: now.Add(max(disp.Delay, 0) + waitGrace)}
}

// expire drops the commands whose pause and grace have passed; w.mu is held.
func (w *waitTracker) expire(now time.Time) {
	for k, c := range w.cmds {
		if now.After(c.until) {
			delete(w.cmds, k)
		}
	}
}

func (w *waitTracker) Describe(ch chan<- *prometheus.Desc) {
	ch <- w.count
	ch <- w.oldest
}

func (w *waitTracker) Collect(ch chan<- prometheus.Metric) {
	now := w.now()
	w.mu.Lock()
	w.expire(now)
	n, age := len(w.cmds), time.Duration(0)
	for _, c := range w.cmds {
		age = max(age, now.Sub(c.arrived))
	}
	w.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(w.count, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(w.oldest, prometheus.GaugeValue, age.Seconds())
}

// consumerReady is proxbus_consumer_ready from ready.
func consumerReady(ready func() bool) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "consumer_ready",
		Help: "1 while this replica pulls commands from the durable consumer, else 0.",
	}, func() float64 {
		if ready() {
			return 1
		}
		return 0
	})
}
