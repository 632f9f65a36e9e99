package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
)

// Fingerprint is a valid PBS fingerprint for the commands the benchmarks send.
const Fingerprint = "AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89"

// CommandSource is the CloudEvents source of every benchmark command.
const CommandSource = "/bench"

// StorageID is the storage id of command i of run.
func StorageID(run string, i int) string { return fmt.Sprintf("b%s-%d", run, i) }

// PBSCommand is storage.pbs.create number i of run, on endpoint 1, with its own storage id
// and Idempotency-Key, so both Redis records are written.
func PBSCommand(run string, i int) events.Command {
	data, _ := json.Marshal(map[string]any{
		"storage": StorageID(run, i), "server": "pbs.example.net", "datastore": "store1",
		"username": "backup@pbs!proxbus", "password": "bench-secret", "fingerprint": Fingerprint,
	})
	return events.Command{
		ID: fmt.Sprintf("%s-%d", run, i), Source: CommandSource, Type: events.TypePrefix + "storage.pbs.create",
		Verb: "storage.pbs.create", EndpointID: 1, HasEndpointID: true,
		IdempotencyKey: fmt.Sprintf("key-%s-%d", run, i), Actor: "bench", Data: data,
	}
}

// VMStartCommand is vm.start number i of run for guest vmid.
func VMStartCommand(run string, i int, vmid int64) events.Command {
	data, _ := json.Marshal(map[string]any{"vm": vmid})
	return events.Command{
		ID: fmt.Sprintf("%s-%d", run, i), Source: CommandSource, Type: events.TypePrefix + "vm.start",
		Verb: "vm.start", EndpointID: 1, HasEndpointID: true, Actor: "bench", Data: data,
	}
}

// PublishAll publishes cmds in binary mode with asynchronous publishes (at most 256
// unacknowledged) and returns once the stream has stored every one.
func (e *Env) PublishAll(ctx context.Context, cmds []events.Command) error {
	js, err := jetstream.New(e.NC, jetstream.WithPublishAsyncMaxPending(256))
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	futures := make([]jetstream.PubAckFuture, 0, len(cmds))
	for _, c := range cmds {
		m, err := events.EncodeBinary(e.Subjects, c)
		if err != nil {
			return fmt.Errorf("encode %s: %w", c.ID, err)
		}
		// A server that fsyncs every write (sync_interval: always) acknowledges slower than
		// the default 200ms stall allows 256 publishes to wait.
		f, err := js.PublishMsgAsync(m, jetstream.WithStallWait(30*time.Second))
		if err != nil {
			return fmt.Errorf("publish %s: %w", c.ID, err)
		}
		futures = append(futures, f)
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("publish %s: %w", f.Msg().Subject, err)
		}
	}
	return nil
}

// Publish publishes one command and waits for the stream's acknowledgement.
func (e *Env) Publish(ctx context.Context, c events.Command) error {
	m, err := events.EncodeBinary(e.Subjects, c)
	if err != nil {
		return fmt.Errorf("encode %s: %w", c.ID, err)
	}
	if _, err := e.JS.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("publish %s: %w", c.ID, err)
	}
	return nil
}
