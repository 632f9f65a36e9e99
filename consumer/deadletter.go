package consumer

import (
	"context"
	"fmt"
	"time"

	"github.com/proxbus/proxbus/internal/deadletter"
)

// deadLetter publishes the redacted copy of o to the dead-letter stream and returns once the
// stream stored it. It returns the publish error, wrapped, when the copy is not stored; the
// caller then must not drop the original.
func (c *Consumer) deadLetter(ctx context.Context, o deadletter.Original, verb, reason, detail string) error {
	if reason == "" {
		reason = deadletter.ReasonDeadLetter
	}
	var maxPayload int64
	if nc := c.js.Conn(); nc != nil {
		maxPayload = nc.MaxPayload()
	}
	m := deadletter.Build(c.cfg.Subjects, o, verb, reason, detail, time.Now(), maxPayload)
	ack, err := c.pub.store(ctx, m)
	if err != nil {
		return fmt.Errorf("dead-letter stream seq %d: %w", o.StreamSeq, err)
	}
	if !ack.Duplicate && c.cfg.DeadLettered != nil {
		c.cfg.DeadLettered(verb, reason)
	}
	c.log.Warn("command dead-lettered",
		"reason", reason, "detail", detail, "subject", o.Subject, "dlq_subject", m.Subject,
		"stream_seq", o.StreamSeq, "deliveries", o.Deliveries)
	return nil
}
