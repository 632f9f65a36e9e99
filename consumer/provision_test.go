package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/testenv"
)

// TestStreamConfigsFollowContract pins the three streams of contract §1.
func TestStreamConfigsFollowContract(t *testing.T) {
	t.Parallel()
	cfgs := StreamConfigs(Config{Subjects: events.NewSubjects("proxbus")})
	want := []struct {
		name      string
		subjects  string
		retention jetstream.RetentionPolicy
		maxAge    time.Duration
		schedules bool
	}{
		{"PROXBUS_COMMANDS", "[proxbus.cmd.> proxbus.schedule.>]", jetstream.WorkQueuePolicy, 0, true},
		{"PROXBUS_EVENTS", "[proxbus.evt.>]", jetstream.LimitsPolicy, 7 * 24 * time.Hour, false},
		{"PROXBUS_DLQ", "[proxbus.dlq.>]", jetstream.LimitsPolicy, 30 * 24 * time.Hour, false},
	}
	if len(cfgs) != len(want) {
		t.Fatalf("got %d stream configs, want %d", len(cfgs), len(want))
	}
	for i, w := range want {
		got := cfgs[i]
		if got.Name != w.name || fmt.Sprint(got.Subjects) != w.subjects {
			t.Errorf("stream %d = %s %v, want %s %s", i, got.Name, got.Subjects, w.name, w.subjects)
		}
		if got.AllowMsgSchedules != w.schedules || got.AllowRollup != w.schedules {
			t.Errorf("%s: AllowMsgSchedules %v AllowRollup %v, want %v", got.Name, got.AllowMsgSchedules, got.AllowRollup, w.schedules)
		}
		if got.Retention != w.retention || got.Storage != jetstream.FileStorage {
			t.Errorf("%s: retention %v storage %v", got.Name, got.Retention, got.Storage)
		}
		if got.MaxAge != w.maxAge {
			t.Errorf("%s: MaxAge %v, want %v", got.Name, got.MaxAge, w.maxAge)
		}
		if got.Duplicates != 2*time.Minute || got.Replicas != 1 {
			t.Errorf("%s: Duplicates %v Replicas %d", got.Name, got.Duplicates, got.Replicas)
		}
	}
}

// TestConsumerConfigHasNoBackOff pins the durable: explicit acks, no BackOff (which would
// replace AckWait), no delivery limit, MaxAckPending tied to Concurrency.
func TestConsumerConfigHasNoBackOff(t *testing.T) {
	t.Parallel()
	cc := ConsumerConfig(Config{Subjects: events.NewSubjects("proxbus"), Concurrency: 3})
	if cc.Durable != "proxbus" || cc.AckPolicy != jetstream.AckExplicitPolicy || cc.DeliverPolicy != jetstream.DeliverAllPolicy {
		t.Errorf("consumer config = %+v", cc)
	}
	if len(cc.BackOff) != 0 {
		t.Errorf("BackOff = %v, want none", cc.BackOff)
	}
	if cc.MaxAckPending != 3 || cc.MaxDeliver != -1 || cc.AckWait != 30*time.Second || cc.FilterSubject != "proxbus.cmd.>" {
		t.Errorf("MaxAckPending %d MaxDeliver %d AckWait %v Filter %s", cc.MaxAckPending, cc.MaxDeliver, cc.AckWait, cc.FilterSubject)
	}
}

// TestProvisionIsIdempotent runs Provision twice, then with a changed AckWait, and checks
// the server converges each time.
func TestProvisionIsIdempotent(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	steps := []struct {
		name    string
		ackWait time.Duration
	}{
		{"create", 2 * time.Second},
		{"again", 2 * time.Second},
		{"update ack wait", 3 * time.Second},
	}
	for _, step := range steps {
		cfg := testConfig()
		cfg.AckWait = step.ackWait
		if err := Provision(ctxT(t), n.JS, cfg); err != nil {
			t.Fatalf("%s: provision: %v", step.name, err)
		}
		for _, want := range StreamConfigs(cfg) {
			st, err := n.JS.Stream(ctxT(t), want.Name)
			if err != nil {
				t.Fatalf("%s: stream %s: %v", step.name, want.Name, err)
			}
			got := st.CachedInfo().Config
			if got.Retention != want.Retention || got.MaxAge != want.MaxAge || got.Duplicates != want.Duplicates || got.Subjects[0] != want.Subjects[0] {
				t.Errorf("%s: %s config = %+v", step.name, want.Name, got)
			}
		}
		c, err := n.JS.Consumer(ctxT(t), "PROXBUS_COMMANDS", "proxbus")
		if err != nil {
			t.Fatalf("%s: consumer: %v", step.name, err)
		}
		if got := c.CachedInfo().Config; got.AckWait != step.ackWait || got.MaxDeliver != -1 {
			t.Errorf("%s: AckWait %v MaxDeliver %d, want %v -1", step.name, got.AckWait, got.MaxDeliver, step.ackWait)
		}
	}
	names := n.JS.StreamNames(ctxT(t))
	count := 0
	for range names.Name() {
		count++
	}
	if count != 3 {
		t.Errorf("%d streams, want 3", count)
	}
}

// TestProvisionLiftsDeliveryLimit: a durable created by an older version with MaxDeliver 5
// is updated to MaxDeliver -1 (unlimited) in place, its pending message kept, and that
// message can then be delivered more than 5 times.
func TestProvisionLiftsDeliveryLimit(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	cfg := testConfig()
	for _, sc := range StreamConfigs(cfg) {
		if _, err := n.JS.CreateStream(ctxT(t), sc); err != nil {
			t.Fatalf("create stream %s: %v", sc.Name, err)
		}
	}
	old := ConsumerConfig(cfg)
	old.MaxDeliver = 5
	if _, err := n.JS.CreateConsumer(ctxT(t), cfg.Subjects.CommandsStream(), old); err != nil {
		t.Fatalf("create old durable: %v", err)
	}
	e := &env{js: n.JS, cfg: cfg, s: cfg.Subjects}
	e.publish(t, binaryCommand(e.s, "vm.start", "old1", `{}`))
	if got := e.consumerInfo(t).Config.MaxDeliver; got != 5 {
		t.Fatalf("old durable MaxDeliver %d, want 5", got)
	}

	if err := Provision(ctxT(t), n.JS, cfg); err != nil {
		t.Fatalf("provision: %v", err)
	}
	if got := e.consumerInfo(t).Config.MaxDeliver; got != -1 {
		t.Errorf("MaxDeliver after Provision = %d, want -1", got)
	}
	h := &recorder{answer: func(_ context.Context, _ events.Command, d events.Delivery) events.Disposition {
		if d.Number <= 7 {
			return events.Disposition{Action: events.Redeliver}
		}
		return events.Disposition{Action: events.Ack}
	}}
	e.start(t, h)
	eventually(t, 10*time.Second, "acked on the 8th delivery", func() bool {
		return h.count() == 8 && e.streamMsgs(t, e.s.CommandsStream()) == 0
	})
}

// TestProvisionRejectsEmptyPrefix: a config without a prefix is refused before touching the
// server.
func TestProvisionRejectsEmptyPrefix(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	err := Provision(ctxT(t), n.JS, Config{})
	if !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("err = %v, want config.ErrInvalid", err)
	}
}

// TestProvisionConvergesOlderStream: a commands stream created by an older version with a
// different duplicate window is updated in place, its messages kept.
func TestProvisionConvergesOlderStream(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	old := StreamConfigs(testConfig())[0]
	old.Duplicates = 10 * time.Second
	if _, err := n.JS.CreateStream(ctxT(t), old); err != nil {
		t.Fatalf("create old stream: %v", err)
	}
	if _, err := n.JS.Publish(ctxT(t), "proxbus.cmd.vm.start", []byte("{}")); err != nil {
		t.Fatalf("publish: %v", err)
	}
	e := provisioned(t, n.JS, nil)
	st, err := e.js.Stream(ctxT(t), "PROXBUS_COMMANDS")
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if got := st.CachedInfo().Config.Duplicates; got != 2*time.Minute {
		t.Errorf("Duplicates = %v, want 2m", got)
	}
	if got := st.CachedInfo().State.Msgs; got != 1 {
		t.Errorf("messages = %d, want 1 kept", got)
	}
}

// TestProvisionWithNeverLowersSilently pins what ProvisionWith does with a durable whose
// MaxAckPending (24, three replicas of 8) is above the configuration's (8, the default): keep
// it and say so, refuse without applying anything, or lower it when asked to; and that it
// reports creations, changes and unchanged objects.
func TestProvisionWithNeverLowersSilently(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		policy    Lowering
		wantErr   bool
		wantMAP   int
		wantLines []string
	}{
		{"keep higher", KeepHigher, false, 24, []string{
			"stream PROXBUS_COMMANDS: unchanged", "stream PROXBUS_EVENTS: unchanged", "stream PROXBUS_DLQ: unchanged",
			"consumer proxbus on PROXBUS_COMMANDS: MaxAckPending 24 kept (higher than the requested 8)",
		}},
		{"refuse", RefuseLower, true, 24, nil},
		{"allow", AllowLower, false, 8, []string{
			"stream PROXBUS_COMMANDS: unchanged", "stream PROXBUS_EVENTS: unchanged", "stream PROXBUS_DLQ: unchanged",
			"consumer proxbus on PROXBUS_COMMANDS: MaxAckPending 24 → 8",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n := testenv.StartNATS(t)
			cfg := Config{Subjects: events.NewSubjects("proxbus"), Concurrency: 8, MaxAckPending: 24}
			created, err := ProvisionWith(ctxT(t), n.JS, cfg, ProvisionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := lines(created); !slices.Equal(got, []string{
				"stream PROXBUS_COMMANDS: created (replicas 1)", "stream PROXBUS_EVENTS: created (replicas 1)",
				"stream PROXBUS_DLQ: created (replicas 1)", "consumer proxbus on PROXBUS_COMMANDS: created (MaxAckPending 24)",
			}) {
				t.Errorf("first run = %q", got)
			}
			cfg.MaxAckPending = 0 // the default: Concurrency
			cfg.AckWait = 0
			changes, err := ProvisionWith(ctxT(t), n.JS, cfg, ProvisionOptions{MaxAckPending: tt.policy})
			var le *LowerError
			if tt.wantErr {
				if !errors.Is(err, ErrWouldLower) || !errors.As(err, &le) || le.Current != 24 || le.Requested != 8 || le.Setting != "MaxAckPending" {
					t.Fatalf("err = %v, want a LowerError 24 → 8", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if got := lines(changes); !slices.Equal(got, tt.wantLines) {
				t.Errorf("changes = %q, want %q", got, tt.wantLines)
			}
			c, err := n.JS.Consumer(ctxT(t), "PROXBUS_COMMANDS", "proxbus")
			if err != nil {
				t.Fatal(err)
			}
			if got := c.CachedInfo().Config.MaxAckPending; got != tt.wantMAP {
				t.Errorf("server MaxAckPending = %d, want %d", got, tt.wantMAP)
			}
		})
	}
}

// TestProvisionWithReportsChangedSettings pins the old → new lines of a changed AckWait.
func TestProvisionWithReportsChangedSettings(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	cfg := Config{Subjects: events.NewSubjects("proxbus"), AckWait: 10 * time.Second}
	if _, err := ProvisionWith(ctxT(t), n.JS, cfg, ProvisionOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg.AckWait = 20 * time.Second
	changes, err := ProvisionWith(ctxT(t), n.JS, cfg, ProvisionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := "consumer proxbus on PROXBUS_COMMANDS: AckWait 10s → 20s"
	if got := lines(changes); got[len(got)-1] != want {
		t.Errorf("changes = %q, want last %q", got, want)
	}
}

func lines(changes []Change) []string {
	out := make([]string, len(changes))
	for i, c := range changes {
		out[i] = c.String()
	}
	return out
}
