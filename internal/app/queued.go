package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
)

// ErrNotQueued: the commands stream holds no command with the source and id asked for.
var ErrNotQueued = errors.New("no such command in the commands stream")

// FindQueued returns the command with source and id that the commands stream still holds:
// queued, waiting or running, not yet acknowledged (the stream is a work queue, so it holds
// nothing else). It reads the stream message by message without a consumer, skipping
// messages that are not commands, and returns an error wrapping ErrNotQueued when none
// matches, or jetstream.ErrStreamNotFound when the stream does not exist.
func FindQueued(ctx context.Context, js jetstream.JetStream, s events.Subjects, source, id string) (events.Command, error) {
	st, err := js.Stream(ctx, s.CommandsStream())
	if err != nil {
		return events.Command{}, fmt.Errorf("commands stream %s: %w", s.CommandsStream(), err)
	}
	for seq := uint64(1); ; {
		raw, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(s.CommandsFilter()))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return events.Command{}, fmt.Errorf("%w: %s from %s", ErrNotQueued, id, source)
		}
		if err != nil {
			return events.Command{}, fmt.Errorf("commands stream %s seq %d: %w", s.CommandsStream(), seq, err)
		}
		seq = raw.Sequence + 1
		if msgID := raw.Header.Get(nats.MsgIdHdr); msgID != "" && msgID != id {
			continue // producers set Nats-Msg-Id to the command id (contract §2)
		}
		cmd, err := events.Decode(raw.Subject, raw.Header, raw.Data, s)
		if err == nil && cmd.ID == id && cmd.Source == source {
			return cmd, nil
		}
	}
}
