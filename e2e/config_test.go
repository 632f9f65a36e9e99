package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/app"
)

// TestMaxAckPendingReachesTheDurable pins that --max-ack-pending, not --concurrency, bounds the
// shared durable consumer: with N replicas the commands in flight across all of them.
func TestMaxAckPendingReachesTheDurable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(func(c *app.Config) { c.Consumer.Concurrency, c.Consumer.MaxAckPending = 4, 12 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := e.nats.JS.Consumer(ctx, e.subjects.CommandsStream(), "proxbus")
	if err != nil {
		t.Fatalf("durable: %v", err)
	}
	if got := cons.CachedInfo().Config.MaxAckPending; got != 12 {
		t.Errorf("MaxAckPending = %d, want 12 (from MaxAckPending, not Concurrency 4)", got)
	}
}
