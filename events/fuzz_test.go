package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// parseFuzzHeaders turns "Name: value" lines into a header.
func parseFuzzHeaders(s string) nats.Header {
	h := nats.Header{}
	for line := range strings.SplitSeq(s, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		h[k] = append(h[k], strings.TrimSpace(v))
	}
	return h
}

// fuzzMode is the content mode contract §2 gives a message, worked out apart from Decode:
// structured when a Content-Type's media type is application/cloudevents+json, or when there
// is no ce-* header and no Content-Type and the body is a JSON object with a non-null
// specversion member; else binary. bare says whether the message had neither kind of header.
func fuzzMode(h nats.Header, body []byte) (mode Mode, bare bool) {
	ce, ct := false, false
	for k, vs := range h {
		if len(k) >= len(HeaderPrefix) && strings.EqualFold(k[:len(HeaderPrefix)], HeaderPrefix) {
			ce = true
		}
		if strings.EqualFold(k, HeaderContentType) {
			for _, v := range vs {
				ct = true
				mt, _, _ := strings.Cut(v, ";")
				if strings.EqualFold(strings.TrimSpace(mt), ContentTypeCE) {
					return ModeStructured, false
				}
			}
		}
	}
	if ce || ct {
		return ModeBinary, false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) == nil {
		if v, ok := obj[AttrSpecVersion]; ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return ModeStructured, true
		}
	}
	return ModeBinary, true
}

// FuzzDecode pins that Decode never panics, that every refusal is a *PoisonError that does not
// echo a secret planted in the data, that every accepted command has the content mode
// [fuzzMode] gives and survives a re-encode in that mode unchanged, and that a message without
// ce-* headers and Content-Type that is not a structured event is refused with nothing
// readable (specversion missing, unless its subject or size fails first).
func FuzzDecode(f *testing.F) {
	f.Add("proxbus.cmd.vm.start", "ce-specversion: 1.0\nce-id: a\nce-source: /s\nce-type: proxbus.vm.start\nContent-Type: application/json", []byte(`{"vm":"x"}`))
	f.Add("proxbus.cmd.vm.list", "Content-Type: application/cloudevents+json", []byte(`{"specversion":"1.0","id":"a","source":"/s","type":"proxbus.vm.list","endpointid":3,"data":null}`))
	f.Add("proxbus.cmd.vm.list", "", []byte(`{"specversion":"1.0","id":"a","source":"/s","type":"proxbus.vm.list","datacontenttype":"application/json","data":{"node":"pve1"}}`))
	f.Add("proxbus.cmd.vm.list", "Nats-Msg-Id: a", []byte(` {"data":{},"type":"proxbus.vm.list","source":"urn:x","id":"a","specversion":"1.0"}`))
	f.Add("proxbus.cmd.vm.list", "", []byte(`{"specversion":null,"id":"a","source":"/s","type":"proxbus.vm.list"}`))
	f.Add("proxbus.cmd.vm.list", "ce-ext: 1", []byte(`{"specversion":"1.0","id":"a","source":"/s","type":"proxbus.vm.list"}`))
	f.Add("proxbus.cmd.vm.start", "CE-SpecVersion: 1.0\nCe-Id: a\nce-source: /s\nce-type: proxbus.vm.start", []byte(`{"specversion":"1.0","vm":"x"}`))
	f.Fuzz(func(t *testing.T, subject, headers string, body []byte) {
		h := parseFuzzHeaders(headers)
		// A secret planted in the data must never surface in a refusal or its 400 result.
		const canary = "FUZZ-CANARY-s3cret"
		planted := append(slices.Clip(body), []byte(`{"password":"`+canary+`"}`)...)
		for _, b := range [][]byte{body, planted} {
			c, err := Decode(subject, h, b, testSubjects)
			mode, bare := fuzzMode(h, b)
			if bare && mode == ModeStructured {
				sameAsExplicitStructured(t, subject, h, b, c, err)
			}
			if err != nil {
				var p *PoisonError
				if !errors.As(err, &p) || !errors.Is(err, errPoison) || p.Reason == "" {
					t.Fatalf("refusal is not a PoisonError: %v", err)
				}
				res, _, _ := InvalidCommandResult(p)
				if strings.Contains(err.Error(), canary) || strings.Contains(res.Detail, canary) {
					t.Fatalf("a refusal echoes the data's secret: %v / %q", err, res.Detail)
				}
				if bare && mode == ModeBinary {
					if p.ID != "" || p.Source != "" || (p.Reason != reasonSpecVersion && p.Reason != reasonSubject && p.Reason != reasonTooLarge) {
						t.Fatalf("bare binary message refused as (%q, %q, %q)", p.Reason, p.ID, p.Source)
					}
				}
				continue
			}
			if bare && mode == ModeBinary {
				t.Fatalf("a message without ce- headers, Content-Type or a structured body was accepted: %+v", c)
			}
			if c.Mode != mode {
				t.Fatalf("mode %v, contract §2 says %v", c.Mode, mode)
			}
			encode := EncodeBinary
			if c.Mode == ModeStructured {
				encode = EncodeStructured
			}
			msg, err := encode(testSubjects, c)
			if err != nil {
				t.Fatalf("accepted command does not encode: %v (%+v)", err, c)
			}
			again, err := Decode(msg.Subject, msg.Header, msg.Data, testSubjects)
			if err != nil {
				t.Fatalf("re-encoded command refused: %v", err)
			}
			sameCommand(t, again, c)
		}
	})
}

// sameAsExplicitStructured checks that Decode answered a message without ce-* headers and
// Content-Type whose body is a structured event (c, err) as it answers the same message with
// Content-Type application/cloudevents+json: the same command, or the same poison reason and
// readable id and source. The added header counts towards the size limit, so a difference
// that only the size rule explains is accepted.
func sameAsExplicitStructured(t *testing.T, subject string, h nats.Header, body []byte, c Command, err error) {
	t.Helper()
	explicit := nats.Header{HeaderContentType: {ContentTypeCE}}
	for k, vs := range h {
		explicit[k] = vs
	}
	c2, err2 := Decode(subject, explicit, body, testSubjects)
	var p, p2 *PoisonError
	errors.As(err, &p)
	errors.As(err2, &p2)
	tooLarge := func(p *PoisonError) bool { return p != nil && p.Reason == reasonTooLarge }
	switch {
	case tooLarge(p) != tooLarge(p2):
		if !tooLarge(p2) {
			t.Fatalf("without headers: %v; with Content-Type: %v", err, err2)
		}
	case (err == nil) != (err2 == nil):
		t.Fatalf("without headers: %v; with Content-Type: %v", err, err2)
	case err == nil:
		sameCommand(t, c, c2)
	case p.Reason != p2.Reason || p.ID != p2.ID || p.Source != p2.Source:
		t.Fatalf("without headers (%q, %q, %q); with Content-Type (%q, %q, %q)", p.Reason, p.ID, p.Source, p2.Reason, p2.ID, p2.Source)
	}
}
