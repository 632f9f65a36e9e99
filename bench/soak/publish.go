package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
)

// publishDeadline bounds how long one message is retried (NATS down, a leader election)
// before the soak gives up on the run.
const publishDeadline = 90 * time.Second

// publisher publishes the plan at a steady rate, each message by its planned producer,
// retrying while NATS is down, and schedules the duplicate publishes.
type publisher struct {
	js       jetstream.JetStream
	subjects events.Subjects
	sdk      *sdkSenders // nil when no command is planned for an SDK producer

	mu        sync.Mutex
	published map[string]time.Time // command id → first successful publish
	dups      int
	retries   int
	// sdkRetries counts the SDK sends that were repeated after an error: the SDK sets no
	// Nats-Msg-Id, so a repeat of a send whose acknowledgement was lost is stored twice and
	// proxbus sees the command twice (a same-id duplicate it must answer by replay).
	sdkRetries int
	byProducer map[string]int // messages first published, per producer
	// before, when set, is called right before each planned message is first published (the
	// decider's early decisions).
	before func(context.Context, *planned) error
}

// newPublisher returns a publisher of plan; when the plan uses an SDK producer it makes
// the SDK's senders for every subject the plan uses.
func newPublisher(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, s events.Subjects, plan []*planned) (*publisher, error) {
	pb := &publisher{js: js, subjects: s, published: map[string]time.Time{}, byProducer: map[string]int{}}
	var subjects []string
	seen := map[string]bool{}
	for _, p := range plan {
		if p.poison != nil || p.producer == producerNATSGo || seen[p.cmd.Verb] {
			continue
		}
		seen[p.cmd.Verb] = true
		subjects = append(subjects, s.Command(p.cmd.Verb))
	}
	if len(subjects) == 0 {
		return pb, nil
	}
	sdk, err := newSDKSenders(ctx, nc, s.CommandsStream(), subjects)
	if err != nil {
		return nil, err
	}
	pb.sdk = sdk
	return pb, nil
}

// message encodes p (or its duplicate, with a new Nats-Msg-Id) for publishing.
func (pb *publisher) message(p *planned, dup bool) (*nats.Msg, error) {
	var msg *nats.Msg
	if p.poison != nil {
		msg = nats.NewMsg(pb.subjects.Command(p.poison.subject))
		for k, v := range p.poison.header {
			msg.Header.Set(k, v)
		}
		msg.Data = p.poison.body
	} else {
		m, err := events.EncodeBinary(pb.subjects, p.cmd)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", p.cmd.ID, err)
		}
		msg = m
	}
	if dup {
		msg.Header.Set("Nats-Msg-Id", p.cmd.ID+"-dup")
	}
	return msg, nil
}

// publishOne publishes p (poison always with nats.go) until the stream acknowledges it,
// ctx ends or publishDeadline passes.
func (pb *publisher) publishOne(ctx context.Context, p *planned, dup bool) error {
	if p.expiresIn > 0 && p.cmd.Expires.IsZero() {
		p.cmd.Expires = time.Now().Add(p.expiresIn).UTC()
	}
	var send func() error
	sdk := p.producerName() != producerNATSGo
	switch {
	case sdk && pb.sdk == nil:
		return fmt.Errorf("publish %s: no cloudevents sdk senders", p.cmd.ID)
	case sdk:
		subject, structured := pb.subjects.Command(p.cmd.Verb), p.producer == producerSDKStructured
		send = func() error { return pb.sdk.send(ctx, subject, p.cmd, structured) }
	default:
		msg, err := pb.message(p, dup)
		if err != nil {
			return err
		}
		send = func() error {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, err := pb.js.PublishMsg(pctx, msg)
			return err
		}
	}
	deadline := time.Now().Add(publishDeadline)
	for {
		err := send()
		if err == nil {
			break
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("publish %s: %w", p.cmd.ID, err)
		}
		pb.mu.Lock()
		pb.retries++
		if sdk {
			pb.sdkRetries++
		}
		pb.mu.Unlock()
		sleepCtx(ctx, 200*time.Millisecond)
	}
	pb.mu.Lock()
	defer pb.mu.Unlock()
	if dup {
		pb.dups++
	} else if _, ok := pb.published[p.cmd.ID]; !ok {
		pb.published[p.cmd.ID] = time.Now()
		pb.byProducer[p.producerName()]++
	}
	return nil
}

// run publishes every planned message at rate per second; each duplicate follows its
// original 0.5–3 s later.
func (pb *publisher) run(ctx context.Context, plan []*planned, rate float64, progress func(int)) error {
	type due struct {
		p  *planned
		at time.Time
	}
	var dups []due
	interval := time.Duration(float64(time.Second) / rate)
	next := time.Now()
	flush := func(all bool) error {
		for len(dups) > 0 && (all || time.Now().After(dups[0].at)) {
			if all {
				sleepCtx(ctx, time.Until(dups[0].at))
			}
			if err := pb.publishOne(ctx, dups[0].p, true); err != nil {
				return err
			}
			dups = dups[1:]
		}
		return nil
	}
	for i, p := range plan {
		if d := time.Until(next); d > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(d):
			}
		}
		next = next.Add(interval)
		if err := flush(false); err != nil {
			return err
		}
		if pb.before != nil {
			if err := pb.before(ctx, p); err != nil {
				return err
			}
		}
		if err := pb.publishOne(ctx, p, false); err != nil {
			return err
		}
		if p.dup {
			dups = append(dups, due{p, time.Now().Add(500*time.Millisecond + rand.N(2500*time.Millisecond))})
			// keep them ordered by due time (insertion is nearly ordered already)
			for j := len(dups) - 1; j > 0 && dups[j].at.Before(dups[j-1].at); j-- {
				dups[j], dups[j-1] = dups[j-1], dups[j]
			}
		}
		if progress != nil {
			progress(i + 1)
		}
	}
	return flush(true)
}
