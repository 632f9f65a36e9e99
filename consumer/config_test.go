package consumer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/config"
)

// TestWithDefaults pins the documented defaults and that set fields are kept.
func TestWithDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    Config
		check func(t *testing.T, c Config)
	}{
		{"zero", Config{}, func(t *testing.T, c Config) {
			if c.Durable != "proxbus" || c.Concurrency != 8 || c.MaxAckPending != 8 || c.FetchBatch != 64 ||
				c.AckWait != 30*time.Second || c.Heartbeat != 10*time.Second ||
				c.Replicas != 1 || c.DuplicateWindow != 2*time.Minute || c.EventsMaxAge != 7*24*time.Hour ||
				c.DLQMaxAge != 30*24*time.Hour || c.Logger == nil || c.FetchWait != time.Second {
				t.Errorf("defaults = %+v", c)
			}
		}},
		{"small pool", Config{Concurrency: 1}, func(t *testing.T, c Config) {
			// A pull stays open ahead of the one worker; MaxAckPending 1 keeps the
			// server from delivering a second message before the first is acked.
			if c.FetchBatch != 64 || c.MaxAckPending != 1 {
				t.Errorf("FetchBatch %d MaxAckPending %d, want 64 1", c.FetchBatch, c.MaxAckPending)
			}
		}},
		{"shared durable", Config{Concurrency: 8, MaxAckPending: 24}, func(t *testing.T, c Config) {
			// Messages requested ahead may wait for a worker here: few of them.
			if c.FetchBatch != 4 {
				t.Errorf("FetchBatch %d with MaxAckPending 24 > Concurrency 8, want 4", c.FetchBatch)
			}
		}},
		{"shared durable, batch kept", Config{Concurrency: 8, MaxAckPending: 24, FetchBatch: 16}, func(t *testing.T, c Config) {
			if c.FetchBatch != 16 {
				t.Errorf("FetchBatch %d, want 16", c.FetchBatch)
			}
		}},
		{"batch kept", Config{Concurrency: 3, FetchBatch: 10}, func(t *testing.T, c Config) {
			if c.FetchBatch != 10 {
				t.Errorf("FetchBatch %d, want 10", c.FetchBatch)
			}
		}},
		{"set fields kept", Config{Durable: "x", AckWait: time.Second, Heartbeat: 100 * time.Millisecond, MaxAckPending: 24}, func(t *testing.T, c Config) {
			if c.Durable != "x" || c.AckWait != time.Second || c.Heartbeat != 100*time.Millisecond || c.MaxAckPending != 24 {
				t.Errorf("config = %+v", c)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.check(t, tt.in.WithDefaults())
		})
	}
}

// TestNewRejectsBadConfig: New refuses what cannot work, with config.ErrInvalid.
func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	h := HandlerFunc(func(context.Context, events.Command, events.Delivery) events.Disposition { return events.Disposition{} })
	e := newEnv(t, nil)
	tests := []struct {
		name string
		cfg  Config
		h    Handler
		pub  *Publisher
	}{
		{"no prefix", Config{}, h, NewPublisher(e.js, events.NewEmitter(e.s, "test"))},
		{"no handler", testConfig(), nil, NewPublisher(e.js, events.NewEmitter(e.s, "test"))},
		{"no publisher", testConfig(), h, nil},
		{"heartbeat not below ack wait", Config{Subjects: events.NewSubjects("p"), AckWait: time.Second, Heartbeat: time.Second}, h, NewPublisher(e.js, events.NewEmitter(e.s, "test"))},
		{"negative concurrency", Config{Subjects: events.NewSubjects("p"), Concurrency: -1}, h, NewPublisher(e.js, events.NewEmitter(e.s, "test"))},
		{"negative ack wait", Config{Subjects: events.NewSubjects("p"), AckWait: -time.Second}, h, NewPublisher(e.js, events.NewEmitter(e.s, "test"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(e.js, tt.cfg, tt.h, tt.pub)
			if !errors.Is(err, config.ErrInvalid) {
				t.Errorf("err = %v, want config.ErrInvalid", err)
			}
		})
	}
}
