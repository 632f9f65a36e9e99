package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/client"
	"github.com/proxbus/proxbus/events"
)

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestSendFillsTheEnvelope: a command without id, source, actor or time gets the client's,
// and the processor sees them with its endpoint and data.
func TestSendFillsTheEnvelope(t *testing.T) {
	t.Parallel()
	c, err := client.New(js, client.WithActor("svc-a"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Send(testContext(t), client.Command{EndpointID: 7, Input: client.VMStop{VM: "101", Force: new(true)}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.CommandID, "pbc-") || res.CommandSource != client.DefaultSource || res.Actor != "svc-a" ||
		res.EndpointID == nil || *res.EndpointID != 7 || res.Verb != "vm.stop" {
		t.Errorf("result %+v", res)
	}
	if string(res.Output) != `{"vm":"101","force":true}` {
		t.Errorf("data %s", res.Output)
	}
}

// TestSendDuplicate: a command sent again within the duplicate window is not stored again,
// and Send still returns its result, from the first publication's events.
func TestSendDuplicate(t *testing.T) {
	t.Parallel()
	c, err := client.New(js)
	if err != nil {
		t.Fatal(err)
	}
	cmd := client.Command{ID: "dup-1", EndpointID: 1, Input: client.VMStart{VM: "web1"}}
	if _, err := c.Send(testContext(t), cmd); err != nil {
		t.Fatal(err)
	}
	var sent client.Sent
	res, err := c.Send(testContext(t), cmd, client.OnSent(func(s client.Sent) { sent = s }))
	if err != nil {
		t.Fatal(err)
	}
	if !sent.Duplicate || sent.ID != "dup-1" || sent.Ref != "dup-1" || res.Status != 200 {
		t.Errorf("sent %+v, result %d", sent, res.Status)
	}
}

// TestSendRefusals: what is refused before anything is published.
func TestSendRefusals(t *testing.T) {
	t.Parallel()
	missing, err := client.New(js, client.WithSubjectPrefix("nostreams"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(js)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		send func(ctx context.Context) error
		want error
	}{
		{"no input", func(ctx context.Context) error { _, err := c.Send(ctx, client.Command{EndpointID: 1}); return err }, events.ErrEncode},
		{"bad idempotency key", func(ctx context.Context) error {
			_, err := c.Send(ctx, client.Command{Input: client.VMList{}, IdempotencyKey: "é"})
			return err
		}, events.ErrEncode},
		{"streams missing (Send)", func(ctx context.Context) error {
			_, err := missing.Send(ctx, client.Command{Input: client.VMList{}})
			return err
		}, client.ErrStreamsMissing},
		{"streams missing (Publish)", func(ctx context.Context) error {
			_, err := missing.Publish(ctx, client.Command{Input: client.VMList{}})
			return err
		}, client.ErrStreamsMissing},
		{"too large", func(ctx context.Context) error {
			_, err := c.Publish(ctx, client.Command{Input: client.Raw{Verb: "vm.list", Data: []byte(`"` + strings.Repeat("x", 2<<20) + `"`)}})
			return err
		}, client.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := tt.send(testContext(t)); !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestSendGivesUpWithCtx: no result before ctx ends is ErrNoResult with ctx's error.
func TestSendGivesUpWithCtx(t *testing.T) {
	t.Parallel()
	c, err := client.New(js, client.WithSubjectPrefix("unanswered"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testContext(t))
	// Streams of this prefix exist but nobody answers: the command waits for ever.
	if err := provisionOnly(ctx, "unanswered"); err != nil {
		t.Fatal(err)
	}
	_, err = c.Send(ctx, client.Command{Input: client.VMList{}}, client.OnSent(func(client.Sent) { cancel() }))
	if !errors.Is(err, client.ErrNoResult) || !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want ErrNoResult and context.Canceled", err)
	}
}

// TestNewRefusesBadOptions: options that cannot work are refused by New.
func TestNewRefusesBadOptions(t *testing.T) {
	t.Parallel()
	for name, opt := range map[string]client.Option{
		"source": client.WithSource("not a uri"),
		"actor":  client.WithActor(strings.Repeat("a", 300)),
		"ids":    client.WithIDs(nil),
		"clock":  client.WithClock(nil),
	} {
		if _, err := client.New(js, opt); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
	if _, err := client.New(nil); err == nil {
		t.Error("New(nil) accepted")
	}
}

// TestCommandOf: a command assembled with the events package is sent as it is.
func TestCommandOf(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ec := events.Command{ID: "x1", Source: "/s", Verb: "vm.start", Time: at, Expires: at.Add(time.Hour), DryRun: true,
		Subject: "vm/1", EndpointID: 3, HasEndpointID: true, IdempotencyKey: "k", Actor: "a", Data: []byte(`{"vm":1}`)}
	got := client.CommandOf(ec)
	raw, ok := got.Input.(client.Raw)
	if !ok || raw.Verb != "vm.start" || string(raw.Data) != `{"vm":1}` || got.ID != "x1" || got.Source != "/s" || !got.Time.Equal(at) ||
		!got.Expires.Equal(at.Add(time.Hour)) || !got.DryRun || got.Subject != "vm/1" || got.EndpointID != 3 || got.IdempotencyKey != "k" || got.Actor != "a" {
		t.Errorf("CommandOf = %+v", got)
	}
}
