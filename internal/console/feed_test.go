package console

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/embedded"
)

// TestFeedResumesAfterNATSRestart: the console's history survives the NATS server going
// away and coming back: events published before, and after, are each applied once.
func TestFeedResumesAfterNATSRestart(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	opts := embedded.NATSOptions{Port: port, StoreDir: t.TempDir()}
	srv, err := embedded.StartNATS(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown() })
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	s := events.NewSubjects("")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := consumer.Provision(ctx, js, consumer.Config{Subjects: s}); err != nil {
		t.Fatal(err)
	}
	pub := consumer.NewPublisher(js, events.NewEmitter(s, "r1"))
	publish := func(id string) {
		t.Helper()
		for {
			err := pub.Publish(ctx, events.Origin{ID: id, Source: "/test", Verb: "vm.start"}, events.Result{Status: 200, Result: "started"})
			if err == nil {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("publish %s: %v", id, err)
			}
			time.Sleep(50 * time.Millisecond) // reconnecting
		}
	}
	c, err := New(Config{JetStream: js, Subjects: s, Access: Access{ReadToken: testReadToken}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })

	waitHeld := func(n int) {
		t.Helper()
		for c.ix.Len() < n {
			if ctx.Err() != nil {
				t.Fatalf("the console holds %d commands, want %d", c.ix.Len(), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for i := range 5 {
		publish(fmt.Sprintf("before-%d", i))
	}
	waitHeld(5)
	srv.Shutdown()
	srv.WaitForShutdown()
	if srv, err = embedded.StartNATS(opts); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		publish(fmt.Sprintf("after-%d", i))
	}
	waitHeld(10)
	for _, r := range c.ix.Replicas() {
		if r.Events != 10 {
			t.Errorf("replica %s: %d events applied, want 10 (each once)", r.Instance, r.Events)
		}
	}
}
