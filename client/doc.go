// Package client is the Go client for producers of proxbus commands: it sends a command to
// the commands stream in binary mode (contract §2), follows its step events and returns its
// result (contract §3), and approves, rejects or cancels commands (contract §4, §4b).
//
//	c, err := client.New(js, client.WithSource("urn:example:billing"))
//	res, err := c.Send(ctx, client.Command{
//		EndpointID: 1,
//		Input:      client.VMStart{VM: "web1"},
//	}, client.OnStep(func(s client.Step) { log.Println(s.Step, s.Status) }))
//
// Every verb has a typed input (VMStart, StoragePBSCreate, …) generated from the verb's data
// schema in docs/asyncapi.yaml, the schema the pipeline's validation is tested against; [Raw]
// sends any verb with data of the caller's own. The client does not validate data: the
// pipeline does, and answers 422 invalid_body naming the fields.
//
// A [Client] is safe for concurrent use. It needs a NATS user that may publish on
// proxbus.cmd.> and, to follow commands, create ordered consumers on the events stream (the
// cli user of deploy/nats/accounts.conf).
package client

//go:generate go run ../internal/clientgen/cmd/clientgen -asyncapi ../docs/asyncapi.yaml -out inputs_gen.go
