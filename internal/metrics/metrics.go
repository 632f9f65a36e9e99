// Package metrics holds proxbus's Prometheus metrics. A [Metrics] owns its own registry (never
// the global default one) and is fed by the other packages through the small interfaces they
// declare: a consumer.Middleware around the handler (deliveries, in-flight, redeliveries), the
// consumer's dead-letter callback, a consumer.PublishHook (commands by verb, result and status
// and step durations, from the typed step and result data proxbus publishes), an HTTP
// transport wrapper for the Proxmox and NetBox clients, and a go-redis hook.
// [Metrics.Handler] serves the registry for /metrics.
//
// No label ever carries a value from a command's data, an id, a node name, a URL's query or
// user part: verbs outside the configured set become "other", HTTP paths become bounded
// operation names, and everything else comes from proxbus's own fixed vocabulary.
package metrics

import (
	"context"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/proxbus/proxbus/internal/buildinfo"
)

// Namespace prefixes every metric name.
const Namespace = "proxbus"

// OtherVerb is the verb label of a command whose verb is not one of [Options.Verbs].
const OtherVerb = "other"

// Options configures [New]. The zero value is usable.
type Options struct {
	// Verbs are the verbs that get their own label value; any other verb is counted as
	// [OtherVerb], so a flood of made-up subjects cannot grow the series count. Nil means
	// every verb is "other".
	Verbs []string
	// PendingRepairs, when set, is called at scrape time (bounded by ScrapeTimeout) to
	// report the number of journal repairs waiting; a failing call omits the sample.
	PendingRepairs func(ctx context.Context) (int, error)
	// PendingApprovals, when set, is called at scrape time (bounded by ScrapeTimeout) to
	// report the commands awaiting approval and when the oldest asked; a failing call omits
	// the samples.
	PendingApprovals func(ctx context.Context) (n int, oldest time.Time, err error)
	// ConsumerReady, when set, says whether the replica pulls commands now.
	ConsumerReady func() bool
	// Dependencies, when set, names each dependency (netbox, proxmox/<id>) and whether it
	// is usable, at scrape time.
	Dependencies func() map[string]bool
	// Build labels proxbus_build_info (version and commit).
	Build buildinfo.Info
	// ScrapeTimeout bounds PendingRepairs and PendingApprovals. Default 2s.
	ScrapeTimeout time.Duration
	// MaxTrackedSteps bounds the started steps remembered to time them. Default 10000.
	MaxTrackedSteps int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Metrics is proxbus's set of Prometheus metrics. Safe for concurrent use. Create it with
// [New].
type Metrics struct {
	reg   *prometheus.Registry
	verbs []string
	now   func() time.Time

	commands        *prometheus.CounterVec
	commandDuration *prometheus.HistogramVec
	stepDuration    *prometheus.HistogramVec
	inFlight        prometheus.Gauge
	redeliveries    *prometheus.CounterVec
	deadLetters     *prometheus.CounterVec
	events          *prometheus.CounterVec

	proxmoxDuration *prometheus.HistogramVec
	proxmoxErrors   *prometheus.CounterVec
	netboxDuration  *prometheus.HistogramVec
	netboxErrors    *prometheus.CounterVec
	redisErrors     *prometheus.CounterVec

	steps *stepTracker
	waits *waitTracker
	own   []prometheus.Collector // every collector New registered but the Go and process ones
}

// durationBuckets suit commands and steps: 50ms to about 7 minutes.
var durationBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 200, 400}

// requestBuckets suit single HTTP requests: 5ms to 60s.
var requestBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// New returns a Metrics registered on a fresh registry, which also holds the Go runtime and
// process collectors.
func New(o Options) *Metrics {
	if o.ScrapeTimeout <= 0 {
		o.ScrapeTimeout = 2 * time.Second
	}
	if o.MaxTrackedSteps <= 0 {
		o.MaxTrackedSteps = 10000
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	m := &Metrics{
		reg:   prometheus.NewRegistry(),
		verbs: slices.Clone(o.Verbs),
		now:   o.Now,
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "commands_total",
			Help: "Commands answered, by verb, result word and HTTP-semantics status (one per result event stored).",
		}, []string{"verb", "result", "status"}),
		commandDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "command_duration_seconds",
			Help:    "Time the pipeline spent on one delivery of a command, by verb and disposition (ack, redeliver, dead_letter).",
			Buckets: durationBuckets,
		}, []string{"verb", "disposition"}),
		stepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "step_duration_seconds",
			Help:    "Time from a step's started event to its done, error or skipped event, by verb, step and final status.",
			Buckets: durationBuckets,
		}, []string{"verb", "step", "status"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "commands_in_flight",
			Help: "Commands being handled by this replica now.",
		}),
		redeliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "redeliveries_total",
			Help: "Deliveries of a command after its first, by verb.",
		}, []string{"verb"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "dead_letters_total",
			Help: "Messages copied to the dead-letter stream by this replica, by verb and reason.",
		}, []string{"verb", "reason"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "events_published_total",
			Help: "Step, result and journal events stored, by kind; duplicate is true for a replay the stream already held.",
		}, []string{"kind", "duplicate"}),
		proxmoxDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "proxmox_request_duration_seconds",
			Help:    "Proxmox VE API requests, by endpoint id, operation (method and path template) and status class (2xx..5xx, or error when no response came).",
			Buckets: requestBuckets,
		}, []string{"endpoint", "operation", "code"}),
		proxmoxErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "proxmox_request_errors_total",
			Help: "Proxmox VE API requests that failed, by endpoint id, operation and kind (timeout, canceled, transport, status_5xx).",
		}, []string{"endpoint", "operation", "kind"}),
		netboxDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "netbox_request_duration_seconds",
			Help:    "NetBox API requests, by operation (method and path template) and status class.",
			Buckets: requestBuckets,
		}, []string{"operation", "code"}),
		netboxErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "netbox_request_errors_total",
			Help: "NetBox API requests that failed, by operation and kind (timeout, canceled, transport, status_5xx).",
		}, []string{"operation", "kind"}),
		redisErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "redis_errors_total",
			Help: "Redis commands and dials that failed (a missing key is not a failure), by command name.",
		}, []string{"command"}),
		steps: newStepTracker(o.MaxTrackedSteps),
		waits: newWaitTracker(o.Now, o.MaxTrackedSteps),
	}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.register(
		m.commands, m.commandDuration, m.stepDuration, m.inFlight, m.redeliveries, m.deadLetters, m.events,
		m.proxmoxDuration, m.proxmoxErrors, m.netboxDuration, m.netboxErrors, m.redisErrors,
	)
	m.register(buildInfo(o.Build), m.waits)
	if o.PendingRepairs != nil {
		repairs := desc("journal_repairs_pending", "Terminal NetBox journal updates waiting to be repaired (read from Redis at scrape time).")
		m.register(&scrapeCollector{descs: []*prometheus.Desc{repairs}, timeout: o.ScrapeTimeout, read: func(ctx context.Context, ch chan<- prometheus.Metric) error {
			n, err := o.PendingRepairs(ctx)
			if err == nil {
				ch <- prometheus.MustNewConstMetric(repairs, prometheus.GaugeValue, float64(n))
			}
			return err
		}})
	}
	if o.PendingApprovals != nil {
		m.register(pendingCollector(o.PendingApprovals, o.Now, o.ScrapeTimeout))
	}
	if o.ConsumerReady != nil {
		m.register(consumerReady(o.ConsumerReady))
	}
	if o.Dependencies != nil {
		m.register(newDependencyCollector(o.Dependencies))
	}
	return m
}

// register registers cs and remembers them for [Metrics.Names].
func (m *Metrics) register(cs ...prometheus.Collector) {
	m.reg.MustRegister(cs...)
	m.own = append(m.own, cs...)
}

// fqName finds the name in a Desc's String ("Desc{fqName: \"proxbus_x\", ...}").
var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// Names returns, sorted, the name of every sample /metrics may show, whether or not it has one
// yet: proxbus's own (a histogram's as NAME_bucket, NAME_sum and NAME_count) and those of the
// Go runtime and process collectors. The dashboards and alert rules in deploy/ name only these.
func (m *Metrics) Names() []string {
	seen := map[string]bool{}
	withSuffixes := func(name string, histogram bool) {
		seen[name] = true
		if histogram {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				seen[name+s] = true
			}
		}
	}
	for _, c := range m.own {
		_, histogram := c.(*prometheus.HistogramVec)
		ch := make(chan *prometheus.Desc, 8)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			if sm := fqName.FindStringSubmatch(d.String()); sm != nil {
				withSuffixes(sm[1], histogram)
			}
		}
	}
	families, _ := m.reg.Gather() // the runtime collectors always have samples
	for _, f := range families {
		t := f.GetType()
		withSuffixes(f.GetName(), t == dto.MetricType_HISTOGRAM || t == dto.MetricType_SUMMARY || t == dto.MetricType_GAUGE_HISTOGRAM)
	}
	return slices.Sorted(maps.Keys(seen))
}

// Registry returns the registry every metric is registered on.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition formats (for /metrics).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// verb bounds a verb label to the configured set.
func (m *Metrics) verb(v string) string {
	if slices.Contains(m.verbs, v) {
		return v
	}
	return OtherVerb
}
