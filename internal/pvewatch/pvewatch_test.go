package pvewatch

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// bus is an in-process stand-in for core NATS: every subscriber of a matching subject gets
// each message (only "*" as the last token is understood).
type bus struct {
	mu   sync.Mutex
	subs map[int]struct {
		subject string
		fn      func(*nats.Msg)
	}
	next int
}

func (b *bus) subscribe(subject string, fn func(*nats.Msg)) (func(), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.subs == nil {
		b.subs = map[int]struct {
			subject string
			fn      func(*nats.Msg)
		}{}
	}
	id := b.next
	b.next++
	b.subs[id] = struct {
		subject string
		fn      func(*nats.Msg)
	}{subject, fn}
	return func() { b.mu.Lock(); delete(b.subs, id); b.mu.Unlock() }, nil
}

func (b *bus) publish(subject string, data []byte) error {
	b.mu.Lock()
	var fns []func(*nats.Msg)
	for _, s := range b.subs {
		if s.subject == subject || strings.HasSuffix(s.subject, ".*") && strings.HasPrefix(subject, strings.TrimSuffix(s.subject, "*")) {
			fns = append(fns, s.fn)
		}
	}
	b.mu.Unlock()
	for _, fn := range fns {
		fn(&nats.Msg{Subject: subject, Data: data})
	}
	return nil
}

// TestReplicasWakeEachOther pins the sharing of an endpoint's watch between replicas: a
// command waiting on a replica whose own watch will not look again for an hour is woken by
// the end another replica's watch saw, and no status is polled.
func TestReplicasWakeEachOther(t *testing.T) {
	t.Parallel()
	sim := simpve.New(simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: time.Hour})
	url, err := sim.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	client := func() *proxmox.Client {
		c, err := proxmox.NewClient(proxmox.EndpointConfig{ID: 1, Name: "lab", URLs: []string{url}, TokenID: simpve.DemoTokenID, Timeout: 5 * time.Second},
			proxmox.Secret(simpve.DemoSecret), proxmox.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	var b bus
	var published sync.Map
	run := func(c *proxmox.Client, busy time.Duration) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			Run(ctx, Config{Clients: []*proxmox.Client{c}, Emitter: events.NewEmitter(events.NewSubjects(""), "r"),
				Publish: func(_ context.Context, m *nats.Msg) error {
					published.Store(m.Header.Get("Nats-Msg-Id"), true)
					return nil
				},
				Watch:     proxmox.WatchConfig{Busy: busy, Idle: busy, Resources: -1},
				Subscribe: b.subscribe, Notify: b.publish})
		}()
		t.Cleanup(func() { cancel(); <-done })
	}
	slow, fast := client(), client()
	upid := sim.StartTask(simpve.HandTask{Node: "pve2", Type: "qmigrate", Duration: 300 * time.Millisecond})
	run(slow, time.Hour)
	// the slow replica's first round has seen the task running once its start is published
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, ok := published.Load("pve.1.task." + upid + ".start"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slow watch never looked")
		}
		time.Sleep(5 * time.Millisecond)
	}
	run(fast, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := slow.WaitTask(ctx, "pve2", upid); err != nil {
		t.Fatalf("WaitTask on the slow replica: %v", err)
	}
	for _, st := range sim.TaskStats() {
		if st.StatusPolls != 0 {
			t.Errorf("task %s polled %d times", st.UPID, st.StatusPolls)
		}
	}
}
