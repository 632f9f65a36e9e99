package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	cejs "github.com/cloudevents/sdk-go/protocol/nats_jetstream/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/events"
)

// The producers a command can be published by (plan.jsonl records which one sent it).
const (
	// producerNATSGo publishes binary mode with nats.go's JetStream client (events.EncodeBinary):
	// Content-Type application/json and Nats-Msg-Id = the command id, as contract §2 asks.
	producerNATSGo = "natsgo"
	// producerSDKBinary publishes with the CloudEvents Go SDK's JetStream binding
	// (github.com/cloudevents/sdk-go/protocol/nats_jetstream/v2) in binary mode: ce-* headers
	// including ce-datacontenttype, no Content-Type and no Nats-Msg-Id.
	producerSDKBinary = "sdk-binary"
	// producerSDKStructured publishes with the same SDK binding in structured mode: the JSON
	// event as the body and no header at all (no Content-Type, no Nats-Msg-Id).
	producerSDKStructured = "sdk-structured"
)

// producerNames are the producers --producers accepts; the first is the single-mode default.
var producerNames = []string{producerNATSGo, producerSDKBinary, producerSDKStructured}

// sdkPublishWait bounds one publish of the SDK's sender (its JetStream context's MaxWait).
const sdkPublishWait = 2 * time.Second

// sdkSenders holds the CloudEvents SDK's JetStream senders, one per command subject (an SDK
// Sender publishes to the one subject it was made for). They share the soak's connection.
type sdkSenders struct {
	bySubject map[string]*cejs.Sender
}

// newSDKSenders makes a sender for each subject on stream through the SDK's
// NewSenderFromConn, which looks the stream up (and would create it if it were missing: the
// replicas have provisioned it by now). A lookup that fails during a leader election is
// retried, up to 10 times a second apart.
func newSDKSenders(ctx context.Context, nc *nats.Conn, stream string, subjects []string) (*sdkSenders, error) {
	s := &sdkSenders{bySubject: map[string]*cejs.Sender{}}
	for _, subj := range subjects {
		var err error
		for range 10 {
			var snd *cejs.Sender
			snd, err = cejs.NewSenderFromConn(nc, stream, subj, []nats.JSOpt{nats.MaxWait(sdkPublishWait)})
			if err == nil {
				s.bySubject[subj] = snd
				break
			}
			sleepCtx(ctx, time.Second)
		}
		if err != nil {
			return nil, fmt.Errorf("cloudevents sdk sender for %s: %w", subj, err)
		}
	}
	return s, nil
}

// sdkEvent is command c as an SDK user builds it: the CloudEvents attributes, the proxbus
// extensions endpointid (an Integer), idempotencykey, actor and expires (an RFC 3339 string),
// and the data as a JSON value.
func sdkEvent(c events.Command) (event.Event, error) {
	ev := event.New(event.CloudEventsVersionV1)
	ev.SetID(c.ID)
	ev.SetSource(c.Source)
	ev.SetType(c.Type)
	if c.HasEndpointID {
		ev.SetExtension(events.AttrEndpointID, int32(c.EndpointID))
	}
	if c.IdempotencyKey != "" {
		ev.SetExtension(events.AttrIdempotencyKey, c.IdempotencyKey)
	}
	if c.Actor != "" {
		ev.SetExtension(events.AttrActor, c.Actor)
	}
	if !c.Expires.IsZero() {
		ev.SetExtension(events.AttrExpires, c.Expires.UTC().Format(time.RFC3339Nano))
	}
	// A json.RawMessage is a JSON value to the SDK: structured mode writes it as "data" (a
	// []byte would become data_base64).
	if err := ev.SetData(event.ApplicationJSON, json.RawMessage(c.Data)); err != nil {
		return ev, fmt.Errorf("sdk event %s: %w", c.ID, err)
	}
	if err := ev.Validate(); err != nil {
		return ev, fmt.Errorf("sdk event %s: %w", c.ID, err)
	}
	return ev, nil
}

// send publishes c once through the SDK sender of subject, in structured or binary mode, and
// returns the sender's error (the stream's acknowledgement did not arrive in sdkPublishWait,
// or the publish failed).
func (s *sdkSenders) send(ctx context.Context, subject string, c events.Command, structured bool) error {
	snd, ok := s.bySubject[subject]
	if !ok {
		return fmt.Errorf("no cloudevents sdk sender for %s", subject)
	}
	ev, err := sdkEvent(c)
	if err != nil {
		return err
	}
	if structured {
		ctx = binding.WithForceStructured(ctx)
	} else {
		ctx = binding.WithForceBinary(ctx)
	}
	if err := snd.Send(ctx, binding.ToMessage(&ev)); err != nil {
		return fmt.Errorf("cloudevents sdk send %s: %w", c.ID, err)
	}
	return nil
}
