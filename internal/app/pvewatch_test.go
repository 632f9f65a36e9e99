package app

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/internal/pvewatch"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
	"github.com/proxbus/proxbus/internal/testenv"
)

// pveEvent is one of Proxmox's own events as a subscriber reads it.
type pveEvent struct {
	ID   string          `json:"id"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// pveEvents subscribes to endpoint 1's events of kind on nc and returns the channel they
// arrive on.
func pveEvents(t *testing.T, nc *nats.Conn, kind string) <-chan pveEvent {
	t.Helper()
	ch := make(chan pveEvent, 256)
	sub, err := nc.Subscribe(events.NewSubjects("").PVE(1, kind), func(m *nats.Msg) {
		var e pveEvent
		if err := json.Unmarshal(m.Data, &e); err != nil {
			t.Errorf("event on %s: %v", m.Subject, err)
			return
		}
		ch <- e
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return ch
}

// nextEvent waits for an event on ch for which match holds.
func nextEvent[T any](t *testing.T, ch <-chan pveEvent, what string, match func(T) bool) T {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case e := <-ch:
			var d T
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatalf("%s: data %s: %v", what, e.Data, err)
			}
			if match(d) {
				return d
			}
		case <-deadline:
			t.Fatalf("%s: no event", what)
		}
	}
}

// TestDevPublishesProxmoxEvents pins contract §3a in the dev setup: a task started outside
// proxbus (by hand, as in the GUI) is published at its start and its end, not as proxbus's; a
// PVE notification posted to the webhook route with the secret is published (without it: 401,
// nothing published); and a command's task is woken by the watch, with no status poll, its
// task events naming the command.
func TestDevPublishesProxmoxEvents(t *testing.T) {
	t.Parallel()
	r := testenv.StartRedis(t)
	env, err := StartDev(DevOptions{RedisURL: r.URL, NATSPort: -1, TaskDuration: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Close)
	cfg := env.ServeConfig()
	cfg.TaskWatch = proxmox.WatchConfig{Busy: 20 * time.Millisecond, Idle: 50 * time.Millisecond, Resources: 50 * time.Millisecond}
	cfg.PVEWebhookSecret = "hook-secret"
	cfg.StartupMaxWait = 100 * time.Millisecond
	s := serve(t, cfg)
	s.waitReady()
	nc, err := nats.Connect(env.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	tasks, notes := pveEvents(t, nc, events.PVEKindTask), pveEvents(t, nc, events.PVEKindNotification)

	t.Run("a task started by hand", func(t *testing.T) {
		upid := env.PVE.StartTask(simpve.HandTask{Node: "pve2", Type: "vzdump", VMID: simpve.DemoDBVMID, User: "alice@pve"})
		for _, status := range []string{events.PVETaskRunning, events.PVETaskOK} {
			got := nextEvent(t, tasks, "task "+status, func(e events.PVETask) bool { return e.UPID == upid && e.Status == status })
			if got.ByProxbus || got.User != "alice@pve" || got.VMID != simpve.DemoDBVMID || got.Node != "pve2" || got.Type != "vzdump" {
				t.Errorf("%s event %+v", status, got)
			}
		}
	})

	t.Run("a notification", func(t *testing.T) {
		body := `{"severity":"error","title":"vzdump backup status (pve1): backup failed","message":"Details","fields":{"hostname":"pve1","type":"vzdump"}}`
		post := func(secret string) int {
			req, _ := http.NewRequest(http.MethodPost, s.base+pvewatch.WebhookPath+"?endpoint_id=1", strings.NewReader(body))
			if secret != "" {
				req.Header.Set(pvewatch.SecretHeader, secret)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			return resp.StatusCode
		}
		for _, bad := range []string{"", "wrong"} {
			if code := post(bad); code != http.StatusUnauthorized {
				t.Errorf("secret %q: %d, want 401", bad, code)
			}
		}
		if code := post("hook-secret"); code != http.StatusAccepted {
			t.Fatalf("with the secret: %d, want 202", code)
		}
		got := nextEvent(t, notes, "notification", func(events.PVENotification) bool { return true })
		if got.EndpointID != 1 || got.Severity != "error" || got.Fields["hostname"] != "pve1" || !strings.Contains(got.Title, "backup failed") {
			t.Errorf("notification %+v", got)
		}
		select {
		case e := <-notes:
			t.Errorf("a second notification event %s: the refused posts published one", e.ID)
		default:
		}
	})

	t.Run("a command woken by the watch", func(t *testing.T) {
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		cmd := events.Command{ID: "watch-start-1", Source: "/test", Verb: "vm.start", Type: "proxbus.vm.start",
			EndpointID: 1, HasEndpointID: true, Data: json.RawMessage(`{"vm":101}`)}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := Send(ctx, js, events.NewSubjects(""), cmd, false, nil)
		if err != nil || res.Status != http.StatusOK {
			t.Fatalf("vm.start: %+v, %v", res, err)
		}
		end := nextEvent(t, tasks, "the command's task end", func(e events.PVETask) bool {
			return e.Type == "qmstart" && e.Status == events.PVETaskOK
		})
		if !end.ByProxbus || end.CommandID != cmd.ID {
			t.Errorf("task end %+v: want by_proxbus and command_id %s", end, cmd.ID)
		}
		for _, st := range env.PVE.TaskStats() {
			if st.UPID == end.UPID && st.StatusPolls != 0 {
				t.Errorf("the command's task was polled %d times, want 0 (woken by the watch)", st.StatusPolls)
			}
		}
	})
}
