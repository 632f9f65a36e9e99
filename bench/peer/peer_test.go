// Package peer compares proxbus's JetStream consumer (the consumer package) with Watermill's
// JetStream subscriber (watermill-nats/v2 pkg/jetstream) running the same no-op handler (issue
// #6, part 5): both consume the same durable pull consumer on the same stream and acknowledge
// each message with DoubleAck (Watermill with AckAsync false), c messages in flight at most.
//
// The handler takes a command, so both decode and validate every CloudEvents envelope before
// it: proxbus's consumer does that itself; Watermill's subscriber does it in its Unmarshaler,
// the hook Watermill has for turning a JetStream message into an application's message, with
// the same call (events.Decode of the message's subject, headers and data) before building its
// standard message. Beside them, as bounds rather than peers: Watermill's subscriber decoding
// nothing (watermill-nodecode), and the limit of each one's way of reading the durable, doing
// nothing but DoubleAck: nats.go's message iterator (rawiterator, proxbus's way) and its
// Consume callbacks (rawconsume, Watermill's). A run ends when the work-queue stream is empty,
// which every implementation reaches only by acknowledging every message.
//
//	go -C bench test -run '^$' -bench Peer -benchtime 10000x -count 6 ./peer | tee peer.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /impl peer.txt
//
// bash bench/run.sh runs it in interleaved rounds instead (-count runs every sample of one
// implementation before the other's, so a drift of the machine favours one of them).
package peer

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmjs "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/jetstream"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/bench/internal/harness"
	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
)

// impl starts a consumer of the proxbus durable with at most c messages in flight and
// returns its stop.
type impl func(tb testing.TB, e *harness.Env, c int) (stop func())

func proxbusConsumer(tb testing.TB, e *harness.Env, c int) func() {
	tb.Helper()
	noop := consumer.HandlerFunc(func(context.Context, events.Command, events.Delivery) events.Disposition {
		return events.Disposition{Action: events.Ack}
	})
	cfg := consumer.Config{Subjects: e.Subjects, Concurrency: c, Instance: "peer", Logger: slog.New(slog.DiscardHandler)}
	// Its own connection, as Watermill's and as `proxbus serve` has: the harness's connection
	// also carries the polling of the stream.
	nc, js := connectJS(tb, e)
	cons, err := consumer.New(js, cfg, noop, consumer.NewPublisher(js, events.NewEmitter(e.Subjects, "peer")))
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cons.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("consumer: %v", err)
		}
		nc.Close()
	}
}

// watermillSubscriber runs the no-op handler through Watermill's subscriber, each envelope
// decoded by its Unmarshaler as proxbus's consumer decodes it.
func watermillSubscriber(tb testing.TB, e *harness.Env, c int) func() {
	tb.Helper()
	u := &decodingUnmarshaler{subjects: e.Subjects}
	stop := watermillWith(tb, e, c, u)
	return func() {
		stop()
		if n := u.failed.Load(); n > 0 {
			tb.Errorf("watermill: %d envelopes did not decode", n)
		}
	}
}

// watermillNoDecode is Watermill's subscriber alone: its standard Unmarshaler, no envelope
// decoded (a bound: less work than the handler needs).
func watermillNoDecode(tb testing.TB, e *harness.Env, c int) func() {
	tb.Helper()
	return watermillWith(tb, e, c, wmjs.DefaultUnmarshaler{})
}

// decodingUnmarshaler decodes and validates each message's CloudEvents envelope with the call
// proxbus's consumer makes, then builds Watermill's standard message. An envelope that does
// not decode is counted (the benchmark's commands all decode; a count above 0 fails the run):
// Watermill's subscriber cannot take an Unmarshal error (it goes on with a nil message).
type decodingUnmarshaler struct {
	subjects events.Subjects
	failed   atomic.Int64
}

func (u *decodingUnmarshaler) Unmarshal(msg jetstream.Msg) (*message.Message, error) {
	if _, err := events.Decode(msg.Subject(), msg.Headers(), msg.Data(), u.subjects); err != nil {
		u.failed.Add(1)
	}
	return wmjs.DefaultUnmarshaler{}.Unmarshal(msg)
}

// watermillWith starts c Watermill subscriptions of the proxbus durable, each acknowledging
// what it receives, with u as the subscriber's Unmarshaler.
func watermillWith(tb testing.TB, e *harness.Env, c int, u wmjs.Unmarshaler) func() {
	tb.Helper()
	nc, err := nats.Connect(e.NATSURL)
	if err != nil {
		tb.Fatal(err)
	}
	sub, err := wmjs.NewSubscriber(wmjs.SubscriberConfig{
		Conn: nc, Logger: watermill.NopLogger{}, AckWaitTimeout: 30 * time.Second, Unmarshaler: u,
		ResourceInitializer: wmjs.ExistingConsumer(func(string, string) jetstream.ConsumerConfig {
			return jetstream.ConsumerConfig{Name: "proxbus"}
		}, ""),
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	// Watermill's JetStream subscriber hands one message at a time to its subscription (the
	// next waits for the ack), so c messages in flight take c subscriptions.
	for range c {
		msgs, err := sub.Subscribe(ctx, e.Subjects.CommandsStream())
		if err != nil {
			tb.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range msgs {
				m.Ack()
			}
		}()
	}
	return func() {
		cancel()
		_ = sub.Close()
		wg.Wait()
		nc.Close()
	}
}

// connectJS opens a NATS connection of its own for one implementation.
func connectJS(tb testing.TB, e *harness.Env) (*nats.Conn, jetstream.JetStream) {
	tb.Helper()
	nc, err := nats.Connect(e.NATSURL)
	if err != nil {
		tb.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	return nc, js
}

// connect opens a connection of its own and the proxbus durable on it.
func connect(tb testing.TB, e *harness.Env) (*nats.Conn, jetstream.Consumer) {
	tb.Helper()
	nc, js := connectJS(tb, e)
	cons, err := js.Consumer(context.Background(), e.Subjects.CommandsStream(), "proxbus")
	if err != nil {
		tb.Fatal(err)
	}
	return nc, cons
}

// rawIterator is the limit of proxbus's way of reading the durable: c goroutines taking
// messages from one nats.go message iterator (64 requested ahead, as proxbus's default) and
// acknowledging each with DoubleAck, nothing else.
func rawIterator(tb testing.TB, e *harness.Env, c int) func() {
	tb.Helper()
	nc, cons := connect(tb, e)
	it, err := cons.Messages(jetstream.PullMaxMessages(consumer.DefaultFetchBatch))
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m, err := it.Next()
				if err != nil {
					return // the iterator was stopped
				}
				_ = m.DoubleAck(context.Background())
			}
		}()
	}
	return func() {
		it.Stop()
		wg.Wait()
		nc.Close()
	}
}

// rawConsume is the limit of Watermill's way of reading it: c nats.go Consume callbacks (one
// per Watermill subscription) acknowledging each message with DoubleAck, nothing else.
func rawConsume(tb testing.TB, e *harness.Env, c int) func() {
	tb.Helper()
	nc, cons := connect(tb, e)
	var ccs []jetstream.ConsumeContext
	for range c {
		cc, err := cons.Consume(func(m jetstream.Msg) { _ = m.DoubleAck(context.Background()) })
		if err != nil {
			tb.Fatal(err)
		}
		ccs = append(ccs, cc)
	}
	return func() {
		for _, cc := range ccs {
			cc.Stop()
			<-cc.Closed()
		}
		nc.Close()
	}
}

// BenchmarkPeer drains b.N pre-published commands through each implementation.
func BenchmarkPeer(b *testing.B) {
	impls := []struct {
		name  string
		start impl
	}{
		{"proxbus", proxbusConsumer}, {"watermill", watermillSubscriber},
		{"watermill-nodecode", watermillNoDecode},
		{"rawiterator", rawIterator}, {"rawconsume", rawConsume},
	}
	for _, c := range []int{1, 8} {
		for _, im := range impls {
			b.Run(fmt.Sprintf("impl=%s/c=%d", im.name, c), func(b *testing.B) {
				e, err := harness.Start(harness.Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(e.Close)
				ctx := context.Background()
				if err := e.Provision(ctx, c); err != nil {
					b.Fatal(err)
				}
				cmds := make([]events.Command, b.N)
				for i := range cmds {
					cmds[i] = harness.PBSCommand("peer", i)
				}
				if err := e.PublishAll(ctx, cmds); err != nil {
					b.Fatal(err)
				}
				stream, err := e.JS.Stream(ctx, e.Subjects.CommandsStream())
				if err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				start := time.Now()
				stop := im.start(b, e, c)
				waitEmpty(b, stream, time.Duration(b.N)*time.Millisecond+30*time.Second)
				elapsed := time.Since(start)
				b.StopTimer()
				stop()
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
			})
		}
	}
}

// waitEmpty polls the work-queue stream until every message was acknowledged.
func waitEmpty(tb testing.TB, s jetstream.Stream, limit time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for {
		info, err := s.Info(context.Background())
		if err != nil {
			tb.Fatal(err)
		}
		if info.State.Msgs == 0 {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d messages left after %s", info.State.Msgs, limit)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
