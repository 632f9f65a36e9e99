package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/proxbus/proxbus/client"
)

// A producer sends a typed command to endpoint 1 and waits for its result.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(js, client.WithSource("urn:example:billing"), client.WithActor("billing"))
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Send(ctx, client.Command{
		EndpointID: 1,
		Input:      client.VMStart{VM: "web1"},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, res.Result, res.CommandSource)
	// Output: 200 ok urn:example:billing
}

// OnStep follows the command's steps while Send waits: a long Proxmox task reports its
// progress in running steps.
func ExampleOnStep() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(js)
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Send(ctx, client.Command{
		EndpointID:     1,
		IdempotencyKey: "nightly-web1",
		Input:          client.VMBackup{VM: "web1", Storage: "pbs1", Protected: new(true)},
	}, client.OnStep(func(s client.Step) {
		if s.Progress != nil {
			fmt.Printf("%s %s %d/%d %s\n", s.Step, s.Status, s.Progress.Done, s.Progress.Total, s.Progress.Unit)
			return
		}
		fmt.Println(s.Step, s.Status)
	}))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, res.Result)
	// Output:
	// backup started
	// backup running 512/1024 bytes
	// backup done
	// 200 ok
}

// Publish returns once the command is stored; Follow reads its events back, here until its
// result.
func ExampleClient_Follow() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(js)
	if err != nil {
		log.Fatal(err)
	}
	sent, err := c.Publish(ctx, client.Command{EndpointID: 1, Input: client.VMStart{VM: "missing"}})
	if err != nil {
		log.Fatal(err)
	}
	for ev, err := range c.Follow(ctx, sent.Source, sent.ID) {
		switch {
		case err != nil:
			log.Fatal(err)
		case ev.Step != nil:
			fmt.Println("step", ev.Step.Step, ev.Step.Status)
		case ev.Result != nil:
			fmt.Println("result", ev.Result.Status, ev.Result.Reason)
		}
	}
	// Output:
	// step locate error
	// result 404 vm_not_found
}

// Raw sends any verb with data of the caller's own.
func ExampleRaw() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(js)
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Send(ctx, client.Command{EndpointID: 1, Input: client.Raw{Verb: "vm.list", Data: []byte(`{"node":"pve1"}`)}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, res.Verb, string(res.Output))
	// Output: 200 vm.list {"node":"pve1"}
}

// A second person approves a command awaiting approval, naming it by source and id.
func ExampleClient_Approve() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(js, client.WithActor("alice"))
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Approve(ctx, client.Decision{Source: "urn:proxbus:cli", ID: "cli-3f2a", Reason: "change 4711"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, res.Verb, string(res.Output))
	// Output: 200 command.approve {"command_id":"cli-3f2a","command_source":"urn:proxbus:cli","reason":"change 4711"}
}
