package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
)

// ErrDeadLetterNotFound is returned (wrapped) when the dead-letter stream holds no message
// with the requested sequence (never stored, expired after DLQMaxAge, or purged).
var ErrDeadLetterNotFound = errors.New("dead letter not found")

// HeaderReplayOf marks a command re-injected by [ReplayDeadLetter]; its value is the dead
// letter's sequence. Its body is the redacted copy, so secret fields hold the redaction
// placeholder and a handler should not write them to Proxmox as they are.
const HeaderReplayOf = "Proxbus-Replay-Of"

// DeadLetter is one message of the dead-letter stream as `proxbus dlq` shows it. Header and
// Data are the stored, already redacted copy.
type DeadLetter struct {
	// Seq is the dead letter's sequence in the DLQ stream: its handle for show and replay.
	Seq uint64
	// Subject is the dead letter's subject, proxbus.dlq.<verb|unknown>.
	Subject string
	// Reason is the Proxbus-Dlq-Reason header.
	Reason string
	// OriginalSubject is the command subject it was published on.
	OriginalSubject string
	// Time is when it was dead-lettered (the Proxbus-Dlq-Time header, else the stored time).
	Time time.Time
	// Header holds the stored headers: the original ones (secret-named values redacted,
	// Nats-* control headers dropped) and the Proxbus-Dlq-* ones.
	Header nats.Header
	// Data is the stored, redacted body.
	Data []byte
}

// deadLetterFrom converts a stored DLQ message.
func deadLetterFrom(raw *jetstream.RawStreamMsg) DeadLetter {
	d := DeadLetter{
		Seq:     raw.Sequence,
		Subject: raw.Subject,
		Time:    raw.Time,
		Header:  raw.Header,
		Data:    raw.Data,
	}
	if raw.Header != nil {
		d.Reason = raw.Header.Get(HeaderDLQReason)
		d.OriginalSubject = raw.Header.Get(HeaderDLQSubject)
		if t, err := time.Parse(time.RFC3339Nano, raw.Header.Get(HeaderDLQTime)); err == nil {
			d.Time = t
		}
	}
	return d
}

// ListDeadLetters returns the newest limit dead letters (all of them when limit <= 0), oldest
// first. An empty stream gives an empty slice. It returns the JetStream error, wrapped, when
// the DLQ stream cannot be read (jetstream.ErrStreamNotFound when it was never provisioned).
func ListDeadLetters(ctx context.Context, js jetstream.JetStream, s events.Subjects, limit int) ([]DeadLetter, error) {
	st, err := js.Stream(ctx, s.DLQStream())
	if err != nil {
		return nil, fmt.Errorf("dlq stream %s: %w", s.DLQStream(), err)
	}
	state := st.CachedInfo().State
	out := []DeadLetter{}
	if state.Msgs == 0 {
		return out, nil
	}
	for seq := state.LastSeq; seq >= state.FirstSeq && seq > 0; seq-- {
		if limit > 0 && len(out) >= limit {
			break
		}
		raw, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // deleted or expired meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("dlq seq %d: %w", seq, err)
		}
		out = append(out, deadLetterFrom(raw))
	}
	slices.Reverse(out)
	return out, nil
}

// GetDeadLetter returns the dead letter with DLQ stream sequence seq, or an error wrapping
// ErrDeadLetterNotFound when there is none.
func GetDeadLetter(ctx context.Context, js jetstream.JetStream, s events.Subjects, seq uint64) (DeadLetter, error) {
	st, err := js.Stream(ctx, s.DLQStream())
	if err != nil {
		return DeadLetter{}, fmt.Errorf("dlq stream %s: %w", s.DLQStream(), err)
	}
	if seq == 0 {
		return DeadLetter{}, fmt.Errorf("dlq seq 0: %w", ErrDeadLetterNotFound)
	}
	raw, err := st.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return DeadLetter{}, fmt.Errorf("dlq seq %d: %w", seq, ErrDeadLetterNotFound)
	}
	if err != nil {
		return DeadLetter{}, fmt.Errorf("dlq seq %d: %w", seq, err)
	}
	return deadLetterFrom(raw), nil
}

// ReplayDeadLetter republishes the (redacted) copy of dead letter seq to its original subject
// with the Proxbus-Dlq-* headers removed, [HeaderReplayOf] set to seq, and Nats-Msg-Id
// "<original id>.replay.<seq>" (the original id is the original Nats-Msg-Id, else the
// CloudEvents id, else "dlq"), so replaying the same dead letter twice within the duplicate
// window enqueues it once. It returns the new sequence in the commands stream, an error
// wrapping ErrDeadLetterNotFound when there is no such dead letter, or the publish error.
func ReplayDeadLetter(ctx context.Context, js jetstream.JetStream, s events.Subjects, seq uint64) (uint64, error) {
	d, err := GetDeadLetter(ctx, js, s, seq)
	if err != nil {
		return 0, err
	}
	if d.OriginalSubject == "" {
		return 0, fmt.Errorf("dlq seq %d has no %s header", seq, HeaderDLQSubject)
	}
	h := nats.Header{}
	for k, v := range d.Header {
		if strings.HasPrefix(strings.ToLower(k), strings.ToLower(dlqHeaderPrefix)) || strings.EqualFold(k, jetstreamMsgID) {
			continue
		}
		h[k] = slices.Clone(v)
	}
	h.Set(jetstreamMsgID, originalID(d)+".replay."+strconv.FormatUint(seq, 10))
	h.Set(HeaderReplayOf, strconv.FormatUint(seq, 10))
	ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: d.OriginalSubject, Header: h, Data: d.Data})
	if err != nil {
		return 0, fmt.Errorf("replay dlq seq %d to %s: %w", seq, d.OriginalSubject, err)
	}
	return ack.Sequence, nil
}

// originalID is the id a replay's Nats-Msg-Id is derived from.
func originalID(d DeadLetter) string {
	if id := d.Header.Get(HeaderDLQMsgID); id != "" {
		return id
	}
	if id := d.Header.Get("ce-id"); id != "" {
		return id
	}
	if v, ok := decodeJSON(d.Data); ok {
		if m, ok := v.(map[string]any); ok {
			if id, ok := m["id"].(string); ok && id != "" {
				return id
			}
		}
	}
	return "dlq"
}
