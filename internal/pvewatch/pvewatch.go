// Package pvewatch publishes Proxmox's own events (contract §3a): it runs the watch of every
// endpoint ([proxmox.Client.Watch]), which also wakes the commands waiting for tasks, and
// publishes the tasks and guest changes it sees; and it receives the notifications of a PVE
// webhook target ([Webhook]).
package pvewatch

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/proxmox"
)

// Publish stores one event on its stream (JetStream deduplicates it by its Nats-Msg-Id).
type Publish func(ctx context.Context, m *nats.Msg) error

// Config configures [Run].
type Config struct {
	// Clients are the endpoints to watch, one watch each.
	Clients []*proxmox.Client
	// Emitter builds the events; Publish stores them.
	Emitter events.Emitter
	Publish Publish
	// Watch sets the intervals of every watch (its callbacks are Run's).
	Watch proxmox.WatchConfig
	// Subscribe, when set, subscribes fn to subject until the returned function is called, and
	// Notify publishes one message (core NATS, not stored): each watch notifies every task end
	// it sees at once on WakeSubject, and Run wakes this replica's commands waiting for a task
	// whose end another replica notified.
	Subscribe func(subject string, fn func(*nats.Msg)) (unsubscribe func(), err error)
	Notify    func(subject string, data []byte) error
	// Replicas, when set, lists the instances of the replicas serving (each watching every
	// endpoint); with Subscribe set, the watches share each endpoint: each looks as many times
	// less often, in turn by the rank of Instance among them (proxmox.WatchConfig.Share),
	// together as often as one. It is asked every ReplicasEvery; a failure keeps the last list.
	Replicas func(context.Context) ([]string, error)
	// Instance is this replica's name, as Replicas lists it.
	Instance string
	// Logger receives failed publications (warn); nil discards.
	Logger *slog.Logger
}

// ReplicasEvery is how often [Config.Replicas] is asked.
const ReplicasEvery = 2 * time.Second

// queueSize is how many events of one endpoint wait for publication at most; beyond that
// the newest are dropped with a warning, so a slow stream never stalls the watch.
const queueSize = 4096

// Run watches every client until ctx ends and publishes what the watches see; it returns when
// every watch and publisher has stopped.
func Run(ctx context.Context, cfg Config) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var wg sync.WaitGroup
	byID := make(map[int64]*proxmox.Client, len(cfg.Clients))
	for _, c := range cfg.Clients {
		byID[c.Endpoint().ID] = c
	}
	var share atomic.Pointer[[2]int] // n, rank
	share.Store(&[2]int{1, 0})
	if cfg.Subscribe != nil {
		unsub, err := cfg.Subscribe(WakeSubject(cfg.Emitter.Subjects, "*"), func(m *nats.Msg) {
			wakeFrom(byID, m)
		})
		if err != nil {
			log.Warn("task events of other replicas not followed: each replica watches alone", "err", err)
		} else {
			defer unsub()
			if cfg.Replicas != nil {
				wg.Go(func() { rankReplicas(ctx, cfg.Replicas, cfg.Instance, &share) })
			}
		}
	}
	for _, c := range cfg.Clients {
		ep := c.Endpoint().ID
		q := make(chan *nats.Msg, queueSize)
		enqueue := func(p events.PVEPayload) {
			m, err := cfg.Emitter.PVEEvent(p)
			if err != nil {
				log.Warn("Proxmox event not built", "endpoint_id", ep, "err", err)
				return
			}
			select {
			case q <- m:
			default:
				log.Warn("Proxmox event dropped: the publication queue is full", "endpoint_id", ep, "subject", m.Subject)
			}
		}
		wcfg := cfg.Watch
		wcfg.Share = func() (int, int) { s := share.Load(); return s[0], s[1] }
		wcfg.OnTask = func(t proxmox.Task) { enqueue(TaskEvent(ep, t)) }
		wcfg.OnGuest = func(g proxmox.GuestChange) { enqueue(GuestEvent(ep, g)) }
		if cfg.Notify != nil && cfg.Subscribe != nil {
			subject := WakeSubject(cfg.Emitter.Subjects, formatID(ep))
			wcfg.OnEnd = func(t proxmox.Task) {
				data, _ := json.Marshal(wake{Endpoint: ep, UPID: t.UPID, Node: t.Node, ExitStatus: t.ExitStatus})
				if err := cfg.Notify(subject, data); err != nil {
					log.Debug("task end not notified to the other replicas", "endpoint_id", ep, "err", err)
				}
			}
		}
		watchCtx, stop := context.WithCancel(ctx)
		wg.Go(func() {
			defer stop()
			_ = c.Watch(watchCtx, wcfg)
		})
		wg.Go(func() {
			for {
				select {
				case <-watchCtx.Done():
					return
				case m := <-q:
					if err := cfg.Publish(watchCtx, m); err != nil && watchCtx.Err() == nil {
						log.Warn("Proxmox event not published", "endpoint_id", ep, "subject", m.Subject, "err", err)
					}
				}
			}
		})
	}
	wg.Wait()
}

// WakeSubject is where the watches of endpoint ep ("*": every endpoint) notify each other of
// task ends, "proxbus.watch.<ep>": core NATS, outside every stream, never stored.
func WakeSubject(s events.Subjects, ep string) string {
	return strings.TrimSuffix(s.CommandsFilter(), ".cmd.>") + ".watch." + ep
}

// wake is a task end one replica's watch notifies to the others.
type wake struct {
	Endpoint   int64  `json:"endpoint_id"`
	UPID       string `json:"upid"`
	Node       string `json:"node"`
	ExitStatus string `json:"exit_status"`
}

// wakeFrom wakes the waiters of the task whose end m (a wake) reports.
func wakeFrom(byID map[int64]*proxmox.Client, m *nats.Msg) {
	var w wake
	if json.Unmarshal(m.Data, &w) != nil || w.UPID == "" {
		return
	}
	if c, ok := byID[w.Endpoint]; ok {
		c.TaskEnded(proxmox.Task{UPID: w.UPID, Node: w.Node, ExitStatus: w.ExitStatus})
	}
}

// rankReplicas keeps share at the number of replicas and instance's rank among them (sorted
// by name; 0 while instance is not listed yet) until ctx ends.
func rankReplicas(ctx context.Context, list func(context.Context) ([]string, error), instance string, share *atomic.Pointer[[2]int]) {
	for {
		if names, err := list(ctx); err == nil && len(names) > 0 {
			slices.Sort(names)
			share.Store(&[2]int{len(names), max(slices.Index(names, instance), 0)})
		}
		t := time.NewTimer(ReplicasEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// TaskEvent is the event data of task t of endpoint ep.
func TaskEvent(ep int64, t proxmox.Task) events.PVETask {
	e := events.PVETask{EndpointID: ep, Node: t.Node, UPID: t.UPID, Type: t.Type, VMID: t.VMID(), User: t.User,
		Status: events.PVETaskRunning, StartedAt: t.StartTime, ByProxbus: t.ByProxbus, CommandID: t.CommandID}
	if !t.Running {
		end := t.EndTime
		e.EndedAt, e.ExitStatus, e.Status = &end, t.ExitStatus, events.PVETaskOK
		if !t.OK() {
			e.Status = events.PVETaskError
		}
	}
	return e
}

// GuestEvent is the event data of guest change g of endpoint ep.
func GuestEvent(ep int64, g proxmox.GuestChange) events.PVEGuest {
	return events.PVEGuest{EndpointID: ep, VMID: g.VMID, Name: g.Name, Node: g.Node, Type: g.Type, Change: g.Change,
		From: g.From, To: g.To, At: g.At, Key: g.UPID}
}

// endpointParam names the webhook's query parameter carrying the endpoint's id.
const endpointParam = "endpoint_id"

// formatID renders an endpoint id.
func formatID(id int64) string { return strconv.FormatInt(id, 10) }
