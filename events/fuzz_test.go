package events

import (
	"errors"
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

// FuzzDecode pins that Decode never panics, that every refusal is a *PoisonError, and that
// every accepted command survives a re-encode in its own mode unchanged.
func FuzzDecode(f *testing.F) {
	f.Add("proxbus.cmd.vm.start", "ce-specversion: 1.0\nce-id: a\nce-source: /s\nce-type: proxbus.vm.start\nContent-Type: application/json", []byte(`{"vm":"x"}`))
	f.Add("proxbus.cmd.vm.list", "Content-Type: application/cloudevents+json", []byte(`{"specversion":"1.0","id":"a","source":"/s","type":"proxbus.vm.list","endpointid":3,"data":null}`))
	f.Fuzz(func(t *testing.T, subject, headers string, body []byte) {
		// A secret planted in the data must never surface in a refusal or its 400 result.
		const canary = "FUZZ-CANARY-s3cret"
		body = append(body, []byte(`{"password":"`+canary+`"}`)...)
		c, err := Decode(subject, parseFuzzHeaders(headers), body, testSubjects)
		if err != nil {
			var p *PoisonError
			if !errors.As(err, &p) || !errors.Is(err, ErrPoison) || p.Reason == "" {
				t.Fatalf("refusal is not a PoisonError: %v", err)
			}
			res, _, _ := InvalidCommandResult(p)
			if strings.Contains(err.Error(), canary) || strings.Contains(res.Detail, canary) {
				t.Fatalf("a refusal echoes the data's secret: %v / %q", err, res.Detail)
			}
			return
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
	})
}
