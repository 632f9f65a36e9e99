package deadletter

import (
	"context"
	"encoding/json"
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

// ErrNotFound is returned (wrapped) when the dead-letter stream holds no message
// with the requested sequence (never stored, expired after DLQMaxAge, or purged).
var ErrNotFound = errors.New("dead letter not found")

// HeaderReplayOf marks a command re-injected by [Replay]; its value is the dead
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
	// Replays are the replays of this letter recorded by [Replay], oldest first
	// (filled by List and Get).
	Replays []ReplayRecord
}

// ReplayRecord is one re-injection of a dead letter: the command it became.
type ReplayRecord struct {
	// DeadLetterSeq is the replayed letter's sequence in the DLQ stream.
	DeadLetterSeq uint64 `json:"dead_letter_seq"`
	// CommandID and CommandSource identify the new command (follow it with
	// `proxbus events --id`); CommandID is empty when the letter had no readable id.
	CommandID     string `json:"command_id,omitempty"`
	CommandSource string `json:"command_source,omitempty"`
	// CommandSeq is the new command's sequence in the commands stream.
	CommandSeq uint64 `json:"command_seq"`
	// Time is when it was replayed.
	Time time.Time `json:"time"`
}

// Replay markers. A dead letter in a Limits stream cannot be edited, so [Replay]
// records each replay as a second message in the DLQ stream: subject
// "<prefix>.dlq._replayed.<letter seq>", header [HeaderReplayedOf] = the letter's sequence,
// no Proxbus-Dlq-Reason header (which every dead letter has), body the [ReplayRecord] as JSON. The
// marker ages out with the stream like the letter; listings skip markers and attach them to
// their letter; a purge removes a letter's markers with it.
const (
	replayMarkerVerb = "_replayed"
	// HeaderReplayedOf is a replay marker's header: the replayed letter's DLQ sequence.
	HeaderReplayedOf = "Proxbus-Replayed-Of"
)

// replayMarkerSubject is the subject of dead letter seq's replay markers.
func replayMarkerSubject(s events.Subjects, seq uint64) string {
	return s.DLQ(replayMarkerVerb + "." + strconv.FormatUint(seq, 10))
}

// replayMarker reads raw as a replay marker; ok is false for a dead letter.
func replayMarker(raw *jetstream.RawStreamMsg) (ReplayRecord, bool) {
	if raw.Header == nil || raw.Header.Get(HeaderReplayedOf) == "" || raw.Header.Get(HeaderDLQReason) != "" {
		return ReplayRecord{}, false
	}
	var r ReplayRecord
	if json.Unmarshal(raw.Data, &r) != nil || r.DeadLetterSeq == 0 {
		return ReplayRecord{}, false
	}
	return r, true
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

// List returns the newest limit dead letters (all of them when limit <= 0), oldest
// first. An empty stream gives an empty slice. It returns the JetStream error, wrapped, when
// the DLQ stream cannot be read (jetstream.ErrStreamNotFound when it was never provisioned).
func List(ctx context.Context, js jetstream.JetStream, s events.Subjects, limit int) ([]DeadLetter, error) {
	st, err := js.Stream(ctx, s.DLQStream())
	if err != nil {
		return nil, fmt.Errorf("dlq stream %s: %w", s.DLQStream(), err)
	}
	state := st.CachedInfo().State
	out := []DeadLetter{}
	if state.Msgs == 0 {
		return out, nil
	}
	replays := map[uint64][]ReplayRecord{} // markers are stored after their letter: seen first
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
		if r, ok := replayMarker(raw); ok {
			replays[r.DeadLetterSeq] = append(replays[r.DeadLetterSeq], r)
			continue
		}
		d := deadLetterFrom(raw)
		d.Replays = replays[d.Seq]
		slices.Reverse(d.Replays)
		out = append(out, d)
	}
	slices.Reverse(out)
	return out, nil
}

// Get returns the dead letter with DLQ stream sequence seq, or an error wrapping
// ErrNotFound when there is none.
func Get(ctx context.Context, js jetstream.JetStream, s events.Subjects, seq uint64) (DeadLetter, error) {
	st, err := js.Stream(ctx, s.DLQStream())
	if err != nil {
		return DeadLetter{}, fmt.Errorf("dlq stream %s: %w", s.DLQStream(), err)
	}
	if seq == 0 {
		return DeadLetter{}, fmt.Errorf("dlq seq 0: %w", ErrNotFound)
	}
	raw, err := st.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return DeadLetter{}, fmt.Errorf("dlq seq %d: %w", seq, ErrNotFound)
	}
	if err != nil {
		return DeadLetter{}, fmt.Errorf("dlq seq %d: %w", seq, err)
	}
	if _, marker := replayMarker(raw); marker {
		return DeadLetter{}, fmt.Errorf("dlq seq %d is a replay marker: %w", seq, ErrNotFound)
	}
	d := deadLetterFrom(raw)
	d.Replays, err = replaysOf(ctx, st, s, seq)
	if err != nil {
		return DeadLetter{}, err
	}
	return d, nil
}

// replaysOf reads dead letter seq's replay markers, oldest first.
func replaysOf(ctx context.Context, st jetstream.Stream, s events.Subjects, seq uint64) ([]ReplayRecord, error) {
	subject := replayMarkerSubject(s, seq)
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return nil, fmt.Errorf("dlq seq %d replays: %w", seq, err)
	}
	if info.State.Subjects[subject] == 0 {
		return nil, nil
	}
	var out []ReplayRecord
	for n := seq + 1; n <= info.State.LastSeq; n++ {
		raw, err := st.GetMsg(ctx, n, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("dlq seq %d replays: %w", seq, err)
		}
		if r, ok := replayMarker(raw); ok && r.DeadLetterSeq == seq {
			out = append(out, r)
		}
		n = raw.Sequence
	}
	return out, nil
}

// Replay republishes the (redacted) copy of dead letter seq to its original subject
// as a new command: the Proxbus-Dlq-* headers removed, [HeaderReplayOf] set to seq, the
// CloudEvents id (the ce-id header, or a structured body's "id") replaced by
// "<original id>-replay-<seq>" so the command runs afresh instead of being answered from the
// original's record, and Nats-Msg-Id "<original id>.replay.<seq>" (the original id is the
// original Nats-Msg-Id, else the CloudEvents id, else "dlq") so replaying the same letter
// twice within the duplicate window enqueues it once. It then records the replay with a
// marker in the DLQ stream (see [HeaderReplayedOf]) and returns it. Errors: one wrapping
// ErrNotFound when there is no such letter, the publish error, or the marker's
// publish error (the command was published then; the returned ReplayRecord says as what).
func Replay(ctx context.Context, js jetstream.JetStream, s events.Subjects, seq uint64) (ReplayRecord, error) {
	d, err := Get(ctx, js, s, seq)
	if err != nil {
		return ReplayRecord{}, err
	}
	if d.OriginalSubject == "" {
		return ReplayRecord{}, fmt.Errorf("dlq seq %d has no %s header", seq, HeaderDLQSubject)
	}
	h := nats.Header{}
	for k, v := range d.Header {
		if strings.HasPrefix(strings.ToLower(k), strings.ToLower(HeaderPrefix)) || strings.EqualFold(k, jetstreamMsgID) {
			continue
		}
		h[k] = slices.Clone(v)
	}
	suffix := "-replay-" + strconv.FormatUint(seq, 10)
	r := ReplayRecord{DeadLetterSeq: seq}
	data := d.Data
	if id := h.Get("ce-id"); id != "" {
		r.CommandID, r.CommandSource = id+suffix, h.Get("ce-source")
		h.Set("ce-id", r.CommandID)
	} else if body, id, source, ok := withStructuredID(d.Data, suffix); ok {
		data, r.CommandID, r.CommandSource = body, id, source
	}
	h.Set(jetstreamMsgID, originalID(d)+".replay."+strconv.FormatUint(seq, 10))
	h.Set(HeaderReplayOf, strconv.FormatUint(seq, 10))
	ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: d.OriginalSubject, Header: h, Data: data})
	if err != nil {
		return ReplayRecord{}, fmt.Errorf("replay dlq seq %d to %s: %w", seq, d.OriginalSubject, err)
	}
	r.CommandSeq, r.Time = ack.Sequence, time.Now().UTC()
	if ack.Duplicate {
		return r, nil // replayed before within the duplicate window: already marked
	}
	body, err := json.Marshal(r)
	if err != nil {
		return r, fmt.Errorf("replay marker of dlq seq %d: %w", seq, err)
	}
	mh := nats.Header{}
	mh.Set(HeaderReplayedOf, strconv.FormatUint(seq, 10))
	mh.Set(jetstreamMsgID, "dlq-replayed-"+strconv.FormatUint(seq, 10)+"-"+strconv.FormatUint(ack.Sequence, 10))
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: replayMarkerSubject(s, seq), Header: mh, Data: body}); err != nil {
		return r, fmt.Errorf("dlq seq %d replayed as command stream seq %d, but its replay marker was not stored: %w", seq, ack.Sequence, err)
	}
	return r, nil
}

// withStructuredID returns a structured-mode command body with its "id" suffixed, the new id
// and the source; ok is false when data is not a JSON object with a string id.
func withStructuredID(data []byte, suffix string) (body []byte, id, source string, ok bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return nil, "", "", false
	}
	if json.Unmarshal(m["id"], &id) != nil || id == "" {
		return nil, "", "", false
	}
	_ = json.Unmarshal(m["source"], &source)
	id += suffix
	m["id"], _ = json.Marshal(id)
	body, err := json.Marshal(m)
	if err != nil {
		return nil, "", "", false
	}
	return body, id, source, true
}

// Purge removes the dead letters stored before before (all of them when before is
// zero), with their replay markers, and returns how many letters it removed. It reads the
// stream once to find the cut and count, then purges every message below the cut (letters
// stored meanwhile are kept). Errors: the JetStream error, wrapped.
func Purge(ctx context.Context, js jetstream.JetStream, s events.Subjects, before time.Time) (int, error) {
	st, err := js.Stream(ctx, s.DLQStream())
	if err != nil {
		return 0, fmt.Errorf("dlq stream %s: %w", s.DLQStream(), err)
	}
	state := st.CachedInfo().State
	if state.Msgs == 0 {
		return 0, nil
	}
	cut, letters := state.LastSeq+1, 0
	for seq := state.FirstSeq; seq <= state.LastSeq; seq++ {
		raw, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("dlq seq %d: %w", seq, err)
		}
		if !before.IsZero() && !raw.Time.Before(before) {
			cut = seq
			break
		}
		if _, marker := replayMarker(raw); !marker {
			letters++
		}
	}
	if cut > state.FirstSeq {
		if err := st.Purge(ctx, jetstream.WithPurgeSequence(cut)); err != nil {
			return 0, fmt.Errorf("purge dlq stream %s below seq %d: %w", s.DLQStream(), cut, err)
		}
	}
	// Markers stored after the cut for letters below it would be orphans: remove them too.
	for seq := range purgedMarkerSeqs(ctx, st, s, cut) {
		if err := st.Purge(ctx, jetstream.WithPurgeSubject(replayMarkerSubject(s, seq))); err != nil {
			return letters, fmt.Errorf("purge replay markers of dlq seq %d: %w", seq, err)
		}
	}
	return letters, nil
}

// purgedMarkerSeqs lists the letters below cut that still have replay markers stored.
func purgedMarkerSeqs(ctx context.Context, st jetstream.Stream, s events.Subjects, cut uint64) map[uint64]bool {
	out := map[uint64]bool{}
	filter := s.DLQ(replayMarkerVerb + ".*")
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return out
	}
	prefix := strings.TrimSuffix(filter, "*")
	for subject := range info.State.Subjects {
		if n, err := strconv.ParseUint(strings.TrimPrefix(subject, prefix), 10, 64); err == nil && n < cut {
			out[n] = true
		}
	}
	return out
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
