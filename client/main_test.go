package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/embedded"
)

// js is the JetStream of the embedded server the examples and tests run against; the fake
// processor answers the commands published there.
var js jetstream.JetStream

// TestMain starts an embedded NATS JetStream server with the proxbus streams and a fake
// processor for the package's examples and tests, and stops them afterwards.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "proxbus-client-test-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	srv, err := embedded.StartNATS(embedded.NATSOptions{StoreDir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer srv.WaitForShutdown()
	defer srv.Shutdown()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer nc.Close()
	if js, err = jetstream.New(nc); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stop, err := startFakeProcessor(js)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	return m.Run()
}

// startFakeProcessor provisions the streams and answers every command on proxbus's durable
// consumer as a processor would, with step events and a result: vm.backup with a running step
// carrying progress, a command whose data has "vm": "missing" with 404 vm_not_found, any other
// with 200 ok and its data as output. stop ends it and waits for it.
func startFakeProcessor(js jetstream.JetStream) (stop func(), err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := consumer.Config{Subjects: events.NewSubjects("")}.WithDefaults()
	if err := consumer.Provision(ctx, js, cfg); err != nil {
		return nil, err
	}
	cons, err := js.Consumer(ctx, cfg.Subjects.CommandsStream(), cfg.Durable)
	if err != nil {
		return nil, err
	}
	emitter := events.NewEmitter(cfg.Subjects, "fake")
	cc, err := cons.Consume(func(m jetstream.Msg) {
		cmd, err := events.Decode(m.Subject(), m.Headers(), m.Data(), cfg.Subjects)
		if err != nil {
			_ = m.Term()
			return
		}
		for _, p := range fakeAnswer(cmd) {
			_, msg, err := emitter.Event(events.OriginOf(cmd), p)
			if err == nil {
				_, err = js.PublishMsg(context.Background(), msg)
			}
			if err != nil {
				_ = m.Nak()
				return
			}
		}
		_ = m.Ack()
	})
	if err != nil {
		return nil, err
	}
	return func() {
		cc.Stop()
		<-cc.Closed()
	}, nil
}

// fakeAnswer is what the fake processor publishes for cmd.
func fakeAnswer(cmd events.Command) []events.Payload {
	var data struct {
		VM any `json:"vm"`
	}
	_ = json.Unmarshal(cmd.Data, &data)
	if data.VM == "missing" {
		return []events.Payload{
			events.Step{Seq: 1, Step: "locate", Status: events.StepError, Attempt: 1},
			events.Result{Status: 404, Result: "refused", Reason: "vm_not_found", Detail: "no guest is named missing"},
		}
	}
	step := "run"
	var out []events.Payload
	switch cmd.Verb {
	case "vm.start":
		step = "start_vm"
	case "vm.backup":
		step = "backup"
		out = append(out, events.Step{Seq: 1, Step: step, Status: events.StepStarted, Attempt: 1},
			events.Step{Seq: 2, Step: step, Status: events.StepRunning, Attempt: 1, Progress: &events.Progress{Done: 512, Total: 1024, Unit: "bytes"}})
	}
	return append(out,
		events.Step{Seq: len(out) + 1, Step: step, Status: events.StepDone, Attempt: 1},
		events.Result{Status: 200, Result: "ok", Output: cmd.Data})
}

// provisionOnly creates the streams of prefix, with nothing consuming its commands.
func provisionOnly(ctx context.Context, prefix string) error {
	return consumer.Provision(ctx, js, consumer.Config{Subjects: events.NewSubjects(prefix)}.WithDefaults())
}
