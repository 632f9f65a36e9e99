package events

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestDecodeValid pins what a valid command decodes to, in both modes, including odd header
// casing, percent-encoded values and attribute forms.
func TestDecodeValid(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 29, 17, 0, 0, 123000000, time.UTC)
	full := Command{
		ID: "cmd-1", Source: "/netbox/webhook/7", Type: "proxbus.vm.start", Verb: "vm.start",
		Time: at, Subject: "vm 100", EndpointID: 7, HasEndpointID: true,
		IdempotencyKey: "key-1 x", Actor: `José "JJ" Ortiz`, TraceParent: testTraceParent,
		Expires: at.Add(15 * time.Minute), DryRun: true, Data: json.RawMessage(`{"vm":"web1"}`),
	}
	tests := []struct {
		name string
		msg  func(t *testing.T) (string, nats.Header, []byte)
		want Command
	}{
		{
			name: "binary odd casing and percent-encoded values",
			msg: func(*testing.T) (string, nats.Header, []byte) {
				return binaryMsg(func(h nats.Header) {
					delete(h, "ce-id")
					delete(h, "ce-source")
					delete(h, "Content-Type")
					h["CE-ID"] = []string{"cmd-1"}
					h["Ce-Source"] = []string{"/netbox/webhook/7"}
					h["content-type"] = []string{"Application/JSON; charset=utf-8"}
					h["CE-Time"] = []string{"2026-11-29T18:00:00.123+01:00"}
					h["ce-subject"] = []string{"vm%20100"}
					h["ce-endpointid"] = []string{"7"}
					h["ce-idempotencykey"] = []string{"key-1%20x"}
					h["ce-actor"] = []string{"Jos%C3%A9%20%22JJ%22%20Ortiz"}
					h["ce-traceparent"] = []string{testTraceParent}
					h["CE-Expires"] = []string{"2026-11-29T18:15:00.123%2B01:00"}
					h["ce-dryrun"] = []string{"true"}
					h["ce-unknownext"] = []string{"%zz ignored"}
				})
			},
			want: full,
		},
		{
			name: "binary minimal without content type or data",
			msg: func(*testing.T) (string, nats.Header, []byte) {
				subj, h, _ := binaryMsg(func(h nats.Header) { delete(h, "Content-Type") })
				return subj, h, nil
			},
			want: Command{ID: "cmd-1", Source: "/netbox/webhook/7", Type: "proxbus.vm.start", Verb: "vm.start"},
		},
		{
			name: "binary null data is absent and bad traceparent dropped",
			msg: func(*testing.T) (string, nats.Header, []byte) {
				subj, h, _ := binaryMsg(func(h nats.Header) { h["ce-traceparent"] = []string{"00-zz-yy-01"} })
				return subj, h, []byte(" null ")
			},
			want: Command{ID: "cmd-1", Source: "/netbox/webhook/7", Type: "proxbus.vm.start", Verb: "vm.start"},
		},
		{
			name: "binary fired by proxbus's own schedule",
			msg: func(*testing.T) (string, nats.Header, []byte) {
				return binaryMsg(func(h nats.Header) {
					h["Nats-Scheduler"] = []string{"proxbus.schedule.nightly"}
					h["Nats-Schedule-Next"] = []string{"2026-11-30T02:00:00Z"}
					h["ce-source"] = []string{"urn:proxbus:schedule:nightly"}
				})
			},
			want: Command{ID: "cmd-1", Source: "urn:proxbus:schedule:nightly", Type: "proxbus.vm.start", Verb: "vm.start", Data: json.RawMessage(`{"vm":"web1"}`),
				Firing: &Firing{Name: "nightly", Next: time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC), Window: DefaultScheduleWindow}},
		},
		{
			name: "binary fired by proxbus's own schedule with a window",
			msg: func(*testing.T) (string, nats.Header, []byte) {
				return binaryMsg(func(h nats.Header) {
					h["Nats-Scheduler"] = []string{"proxbus.schedule.nightly"}
					h["Proxbus-Schedule-Window"] = []string{"1h0m0s"}
					h["ce-source"] = []string{"urn:proxbus:schedule:nightly"}
				})
			},
			want: Command{ID: "cmd-1", Source: "urn:proxbus:schedule:nightly", Type: "proxbus.vm.start", Verb: "vm.start", Data: json.RawMessage(`{"vm":"web1"}`),
				Firing: &Firing{Name: "nightly", Window: time.Hour}},
		},
		{
			name: "binary non-simple id",
			msg: func(*testing.T) (string, nats.Header, []byte) {
				return binaryMsg(func(h nats.Header) { h["ce-id"] = []string{"a%20b%2Fc"} })
			},
			want: Command{ID: "a b/c", Source: "/netbox/webhook/7", Type: "proxbus.vm.start", Verb: "vm.start", Data: json.RawMessage(`{"vm":"web1"}`)},
		},
		{
			name: "structured with every attribute, endpointid as number",
			msg: func(t *testing.T) (string, nats.Header, []byte) {
				subj, _, body := structuredMsg(t, func(ev map[string]any) {
					ev["time"] = "2026-11-29T18:00:00.123+01:00"
					ev["subject"] = "vm 100"
					ev["endpointid"] = 7
					ev["idempotencykey"] = "key-1 x"
					ev["actor"] = `José "JJ" Ortiz`
					ev["traceparent"] = testTraceParent
					ev["expires"] = "2026-11-29T17:15:00.123Z"
					ev["dryrun"] = true
					ev["datacontenttype"] = "application/json; charset=utf-8"
					ev["otherext"] = "ignored"
				})
				return subj, nats.Header{"content-type": {"Application/CloudEvents+JSON; charset=UTF-8"}}, body
			},
			want: full,
		},
		{
			name: "structured endpointid as string, nulls absent, ce headers ignored",
			msg: func(t *testing.T) (string, nats.Header, []byte) {
				subj, h, body := structuredMsg(t, func(ev map[string]any) {
					ev["endpointid"] = "4000000000"
					ev["actor"] = nil
					ev["time"] = nil
					ev["data"] = nil
				})
				h["ce-id"] = []string{"other"}
				h["ce-type"] = []string{"proxbus.vm.stop"}
				return subj, h, body
			},
			want: Command{ID: "cmd-1", Source: "/netbox/webhook/7", Type: "proxbus.vm.start", Verb: "vm.start", EndpointID: 4000000000, HasEndpointID: true},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			subj, h, body := tc.msg(t)
			got, err := Decode(subj, h, body, testSubjects)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			want := tc.want
			if strings.HasPrefix(tc.name, "structured") {
				want.Mode = ModeStructured
			}
			sameCommand(t, got, want)
			if !got.Time.IsZero() && got.Time.Location() != time.UTC {
				t.Errorf("time %v is not in UTC", got.Time)
			}
		})
	}
}

// TestDecodePoison has one row per poison rule; each checks the reason and what was readable.
func TestDecodePoison(t *testing.T) {
	t.Parallel()
	big := []byte(`{"x":"` + strings.Repeat("a", MaxCommandBytes) + `"}`)
	type msgFunc func(t *testing.T) (string, nats.Header, []byte)
	bin := func(mutate func(h nats.Header)) msgFunc {
		return func(*testing.T) (string, nats.Header, []byte) { return binaryMsg(mutate) }
	}
	binBody := func(body string, mutate func(h nats.Header)) msgFunc {
		return func(*testing.T) (string, nats.Header, []byte) {
			subj, h, _ := binaryMsg(mutate)
			return subj, h, []byte(body)
		}
	}
	str := func(mutate func(ev map[string]any)) msgFunc {
		return func(t *testing.T) (string, nats.Header, []byte) { return structuredMsg(t, mutate) }
	}
	raw := func(body string) msgFunc {
		return func(*testing.T) (string, nats.Header, []byte) {
			return testSubjects.Command("vm.start"), nats.Header{"Content-Type": {ContentTypeCE}}, []byte(body)
		}
	}
	set := func(k, v string) func(h nats.Header) { return func(h nats.Header) { h[k] = []string{v} } }
	del := func(k string) func(h nats.Header) { return func(h nats.Header) { delete(h, k) } }
	put := func(k string, v any) func(ev map[string]any) { return func(ev map[string]any) { ev[k] = v } }

	const id, src, verb = "cmd-1", "/netbox/webhook/7", "vm.start"
	tests := []struct {
		name                    string
		msg                     msgFunc
		reason                  string
		wantID, wantSrc, wantVb string
	}{
		{"binary over 1 MiB", binBody(string(big), nil), reasonTooLarge, id, src, verb},
		{"structured over 1 MiB", str(put("data", strings.Repeat("a", MaxCommandBytes))), reasonTooLarge, id, src, verb},
		{"headers count towards the limit", bin(set("ce-bulk", strings.Repeat("a", MaxCommandBytes))), reasonTooLarge, id, src, verb},
		{"subject not under the commands prefix", func(*testing.T) (string, nats.Header, []byte) {
			_, h, b := binaryMsg(nil)
			return "other.cmd.vm.start", h, b
		}, reasonSubject, id, src, ""},
		{"fired by a schedule on a command subject", bin(set("Nats-Scheduler", "proxbus.cmd.vm.start")), reasonScheduler, id, src, verb},
		{"fired by a schedule of another prefix", bin(set("Nats-Scheduler", "other.schedule.x")), reasonScheduler, id, src, verb},
		{"fired by proxbus.schedule.x with another source", bin(set("Nats-Scheduler", "proxbus.schedule.x")), reasonScheduler, id, src, verb},
		{"fired by proxbus.schedule. without a name", bin(func(h nats.Header) {
			h["Nats-Scheduler"] = []string{"proxbus.schedule."}
			h["ce-source"] = []string{"urn:proxbus:schedule:"}
		}), reasonScheduler, id, "urn:proxbus:schedule:", verb},
		{"fired by two schedulers", bin(func(h nats.Header) {
			h["Nats-Scheduler"] = []string{"proxbus.schedule.x", "proxbus.schedule.x"}
			h["ce-source"] = []string{"urn:proxbus:schedule:x"}
		}), reasonScheduler, id, "urn:proxbus:schedule:x", verb},
		{"fired by a lower-case scheduler header", bin(set("nats-scheduler", "proxbus.cmd.vm.start")), reasonScheduler, id, src, verb},
		{"a schedule itself", bin(set("Nats-Schedule", "@every 1m")), reasonScheduleMsg, id, src, verb},
		{"a schedule target", bin(set("Nats-Schedule-Target", "proxbus.cmd.command.approve")), reasonScheduleMsg, id, src, verb},
		{"an approval fired by proxbus's own schedule", func(*testing.T) (string, nats.Header, []byte) {
			_, h, _ := binaryMsg(func(h nats.Header) {
				h["Nats-Scheduler"] = []string{"proxbus.schedule.x"}
				h["ce-source"] = []string{"urn:proxbus:schedule:x"}
				h["ce-type"] = []string{"proxbus.command.approve"}
			})
			return testSubjects.Command("command.approve"), h, []byte(`{"command_id":"a","command_source":"b"}`)
		}, reasonScheduledVerb, id, "urn:proxbus:schedule:x", "command.approve"},
		{"a schedule fired by proxbus's own schedule", func(*testing.T) (string, nats.Header, []byte) {
			_, h, _ := binaryMsg(func(h nats.Header) {
				h["Nats-Scheduler"] = []string{"proxbus.schedule.x"}
				h["ce-source"] = []string{"urn:proxbus:schedule:x"}
				h["ce-type"] = []string{"proxbus.schedule.add"}
			})
			return testSubjects.Command("schedule.add"), h, []byte(`{"name":"y"}`)
		}, reasonScheduledVerb, id, "urn:proxbus:schedule:x", "schedule.add"},
		{"fired by a schedule whose name is no schedule name", bin(func(h nats.Header) {
			h["Nats-Scheduler"] = []string{"proxbus.schedule.a.b"}
			h["ce-source"] = []string{"urn:proxbus:schedule:a.b"}
		}), reasonScheduler, id, "urn:proxbus:schedule:a.b", verb},
		{"binary actor with an escape sequence", bin(set("ce-actor", "bob%1B%5B2J")), reasonActor, id, src, verb},
		{"binary actor with a bidi override", bin(set("ce-actor", "bob%E2%80%AEtxt")), reasonActor, id, src, verb},
		{"binary actor with a zero-width space", bin(set("ce-actor", "b%E2%80%8Bob")), reasonActor, id, src, verb},
		{"structured actor with a newline", str(put("actor", "bob\nalice")), reasonActor, id, src, verb},
		{"structured actor over 255 bytes", str(put("actor", strings.Repeat("a", 256))), reasonActor, id, src, verb},
		{"binary missing specversion", bin(del("ce-specversion")), reasonSpecVersion, id, src, verb},
		{"structured specversion 0.3", str(put("specversion", "0.3")), reasonSpecVersion, id, src, verb},
		{"structured specversion number", str(put("specversion", 1.0)), reasonSpecVersion, id, src, verb},
		{"binary missing id", bin(del("ce-id")), reasonID, "", src, verb},
		{"binary id with a newline", bin(set("ce-id", "a%0D%0ANats-Msg-Id:%20x")), reasonID, "", src, verb},
		{"structured blank id", str(put("id", "  ")), reasonID, "", src, verb},
		{"structured id number", str(put("id", 5)), reasonID, "", src, verb},
		{"binary id with surrounding space", bin(set("ce-id", "%20cmd-1")), reasonID, "", src, verb},
		{"binary source with a raw space", bin(set("ce-source", "/netbox/webhook%207")), reasonSource, id, "", verb},
		{"structured source with a raw space", str(put("source", "/netbox/webhook 7")), reasonSource, id, "", verb},
		{"structured source upper-case scheme", str(put("source", "URN:proxbus:cli")), reasonSource, id, "", verb},
		{"binary missing source", bin(del("ce-source")), reasonSource, id, "", verb},
		{"structured source not a URI-reference", str(put("source", ":/no scheme")), reasonSource, id, "", verb},
		{"binary missing type", bin(del("ce-type")), reasonType, id, src, verb},
		{"type does not match subject", bin(set("ce-type", "proxbus.vm.stop")), reasonTypeMismatch, id, src, verb},
		{"type without proxbus prefix", str(put("type", "vm.start")), reasonTypeMismatch, id, src, verb},
		{"binary time not RFC 3339", bin(set("ce-time", "yesterday")), reasonTime, id, src, verb},
		{"structured time without zone", str(put("time", "2026-11-29T10:00:00")), reasonTime, id, src, verb},
		{"binary expires not RFC 3339", bin(set("ce-expires", "in 10 minutes")), reasonExpires, id, src, verb},
		{"structured expires a number", str(put("expires", 600)), reasonExpires, id, src, verb},
		{"binary dryrun yes", bin(set("ce-dryrun", "yes")), reasonDryRun, id, src, verb},
		{"structured dryrun a number", str(put("dryrun", 1)), reasonDryRun, id, src, verb},
		{"endpointid zero", bin(set("ce-endpointid", "0")), reasonEndpointID, id, src, verb},
		{"endpointid negative", bin(set("ce-endpointid", "-1")), reasonEndpointID, id, src, verb},
		{"endpointid not a number", bin(set("ce-endpointid", "abc")), reasonEndpointID, id, src, verb},
		{"endpointid leading zero", bin(set("ce-endpointid", "007")), reasonEndpointID, id, src, verb},
		{"endpointid overflows int64", bin(set("ce-endpointid", "99999999999999999999")), reasonEndpointID, id, src, verb},
		{"structured endpointid fraction", str(put("endpointid", 1.5)), reasonEndpointID, id, src, verb},
		{"structured endpointid beyond CE Integer", str(put("endpointid", 3000000000)), reasonEndpointID, id, src, verb},
		{"structured endpointid bool", str(put("endpointid", true)), reasonEndpointID, id, src, verb},
		{"structured endpointid string zero", str(put("endpointid", "0")), reasonEndpointID, id, src, verb},
		{"idempotencykey empty", bin(set("ce-idempotencykey", "")), reasonIdempotencyKey, id, src, verb},
		{"idempotencykey 256 chars", bin(set("ce-idempotencykey", strings.Repeat("k", 256))), reasonIdempotencyKey, id, src, verb},
		{"idempotencykey non-ASCII", bin(set("ce-idempotencykey", "cl%C3%A9")), reasonIdempotencyKey, id, src, verb},
		{"idempotencykey control", str(put("idempotencykey", "a\tb")), reasonIdempotencyKey, id, src, verb},
		{"structured idempotencykey number", str(put("idempotencykey", 12)), reasonIdempotencyKey, id, src, verb},
		{"structured actor not a string", str(put("actor", 12)), "actor is not a string", id, src, verb},
		{"structured subject not a string", str(put("subject", []any{"x"})), "subject is not a string", id, src, verb},
		{"binary data not JSON", binBody("not json", nil), reasonDataNotJSON, id, src, verb},
		{"binary content type not JSON", bin(set("Content-Type", "text/plain")), reasonContentType, id, src, verb},
		{"binary content type given twice", bin(func(h nats.Header) { h["content-type"] = []string{"text/plain"} }), "Content-Type is given more than once", id, src, verb},
		{"binary datacontenttype not JSON", bin(set("ce-datacontenttype", "application/xml")), reasonDataContentType, id, src, verb},
		{"binary attribute repeated", bin(set("CE-ID", "cmd-2")), "id is given more than once", "", src, verb},
		{"binary attribute bad percent-encoding", bin(set("ce-source", "%zz")), "source is not percent-encoded UTF-8", id, "", verb},
		{"structured data_base64", str(func(ev map[string]any) { delete(ev, "data"); ev["data_base64"] = "e30=" }), reasonDataBase64, id, src, verb},
		{"structured datacontenttype not JSON", str(put("datacontenttype", "text/plain")), reasonDataContentType, id, src, verb},
		{"structured body an array", raw(`[{"id":"x"}]`), reasonNotObject, "", "", verb},
		{"structured body a string", raw(`"x"`), reasonNotObject, "", "", verb},
		{"structured body not JSON", raw(`{"id":"x",`), reasonNotObject, "", "", verb},
		{"structured body empty", raw(``), reasonNotObject, "", "", verb},
		{"structured extension the SDK refuses", str(put("nested", map[string]any{"a": 1})), reasonMalformed, id, src, verb},
		{"structured extension name invalid", str(put("bad_name", "x")), reasonMalformed, id, src, verb},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			subj, h, body := tc.msg(t)
			c, err := Decode(subj, h, body, testSubjects)
			if err == nil {
				t.Fatalf("Decode accepted a poison message: %+v", c)
			}
			if !errors.Is(err, errPoison) {
				t.Errorf("errors.Is(err, errPoison) = false for %v", err)
			}
			var p *PoisonError
			if !errors.As(err, &p) {
				t.Fatalf("error %T is not a *PoisonError", err)
			}
			if p.Reason != tc.reason {
				t.Errorf("reason = %q, want %q", p.Reason, tc.reason)
			}
			if p.ID != tc.wantID || p.Source != tc.wantSrc || p.Verb != tc.wantVb {
				t.Errorf("readable = (%q, %q, %q), want (%q, %q, %q)", p.ID, p.Source, p.Verb, tc.wantID, tc.wantSrc, tc.wantVb)
			}
			if err.Error() != errPoison.Error()+": "+tc.reason {
				t.Errorf("Error() = %q", err.Error())
			}
		})
	}
}

// TestPoisonErrorHidesMessageValues pins that neither the reason nor Error() echoes a value
// from the message, while the cause stays reachable.
func TestPoisonErrorHidesMessageValues(t *testing.T) {
	t.Parallel()
	subj, h, _ := binaryMsg(func(h nats.Header) { h["ce-idempotencykey"] = []string{"password=hunter2%0A"} })
	_, err := Decode(subj, h, []byte(`{"password":"hunter2"`), testSubjects)
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error %v leaks the message or is nil", err)
	}
	subj, h, body := structuredMsg(t, func(ev map[string]any) { ev["bad_name"] = "hunter2" })
	_, err = Decode(subj, h, body, testSubjects)
	var p *PoisonError
	if !errors.As(err, &p) || p.Err == nil {
		t.Fatalf("want a PoisonError with a cause, got %v", err)
	}
	if strings.Contains(err.Error(), "hunter2") || strings.Contains(p.Reason, "hunter2") {
		t.Errorf("error %q leaks a value", err)
	}
	if !errors.Is(err, p.Err) {
		t.Error("errors.Is does not reach the cause")
	}
}

// TestDecodeSizeLimitBoundary pins that a message of exactly MaxCommandBytes is accepted.
func TestDecodeSizeLimitBoundary(t *testing.T) {
	t.Parallel()
	subj, h, _ := binaryMsg(nil)
	pad := MaxCommandBytes - scanHeaders(h).size - len(`{"x":""}`)
	body := []byte(`{"x":"` + strings.Repeat("a", pad) + `"}`)
	c, err := Decode(subj, h, body, testSubjects)
	if err != nil {
		t.Fatalf("exactly %d bytes refused: %v", MaxCommandBytes, err)
	}
	if len(c.Data) != len(body) {
		t.Errorf("data length %d, want %d", len(c.Data), len(body))
	}
	_, err = Decode(subj, h, append(body, ' '), testSubjects)
	var p *PoisonError
	if !errors.As(err, &p) || p.Reason != reasonTooLarge {
		t.Errorf("one byte more: %v, want %q", err, reasonTooLarge)
	}
}

// TestDecodeContentModeWithoutHeaders pins contract §2's third mode rule: a message with no
// ce-* header and no Content-Type whose body is a JSON object with specversion is structured
// (the CloudEvents Go SDK's NATS bindings send structured events so); every other message
// keeps the mode its headers give, and a bare message that is not such an object stays the
// poison it always was (binary, specversion missing, nothing readable).
func TestDecodeContentModeWithoutHeaders(t *testing.T) {
	t.Parallel()
	const id, src, verb = "cmd-1", "/netbox/webhook/7", "vm.start"
	// event is the JSON of a valid structured vm.start command after mutate.
	event := func(t *testing.T, mutate func(ev map[string]any)) []byte {
		t.Helper()
		_, _, body := structuredMsg(t, mutate)
		return body
	}
	put := func(k string, v any) func(ev map[string]any) { return func(ev map[string]any) { ev[k] = v } }
	del := func(k string) func(ev map[string]any) { return func(ev map[string]any) { delete(ev, k) } }
	binaryData := json.RawMessage(`{"specversion":"1.0","id":"x","source":"/y","type":"proxbus.vm.stop","data":{"vm":"web1"}}`)
	structured := Command{ID: id, Source: src, Type: "proxbus.vm.start", Verb: verb, Data: json.RawMessage(`{"vm":"web1"}`), Mode: ModeStructured}

	tests := []struct {
		name    string
		subject string // "" means the vm.start command subject
		header  nats.Header
		body    func(t *testing.T) []byte
		// want is the command when the message is valid; else reason and the readable id
		// and source.
		want            *Command
		reason          string
		wantID, wantSrc string
	}{
		{
			name: "no headers at all (SDK structured)", header: nil,
			body: func(t *testing.T) []byte { return event(t, nil) }, want: &structured,
		},
		{
			name: "only non-ce headers", header: nats.Header{HeaderMsgID: {id}, "X-Trace": {"t"}},
			body: func(t *testing.T) []byte { return event(t, nil) }, want: &structured,
		},
		{
			name: "leading whitespace and SDK attributes", header: nats.Header{},
			body: func(t *testing.T) []byte {
				return append([]byte(" \r\n\t"), event(t, func(ev map[string]any) {
					ev["datacontenttype"] = "application/json"
					ev["endpointid"] = 7
					ev["time"] = "2026-11-29T17:00:00.123456789Z"
				})...)
			},
			want: &Command{ID: id, Source: src, Type: "proxbus.vm.start", Verb: verb, EndpointID: 7, HasEndpointID: true,
				Time: time.Date(2026, 11, 29, 17, 0, 0, 123456789, time.UTC), Data: json.RawMessage(`{"vm":"web1"}`), Mode: ModeStructured},
		},
		{
			name:   "ce- headers keep binary although the body has specversion",
			header: nats.Header{"ce-specversion": {"1.0"}, "ce-id": {id}, "ce-source": {src}, "ce-type": {"proxbus.vm.start"}},
			body:   func(*testing.T) []byte { return binaryData },
			want:   &Command{ID: id, Source: src, Type: "proxbus.vm.start", Verb: verb, Data: binaryData, Mode: ModeBinary},
		},
		{
			name:   "ce- headers in odd case keep binary",
			header: nats.Header{"CE-SPECVERSION": {"1.0"}, "Ce-Id": {id}, "cE-source": {src}, "CE-type": {"proxbus.vm.start"}},
			body:   func(*testing.T) []byte { return binaryData },
			want:   &Command{ID: id, Source: src, Type: "proxbus.vm.start", Verb: verb, Data: binaryData, Mode: ModeBinary},
		},
		{
			name: "bare body without specversion", header: nil,
			body:   func(t *testing.T) []byte { return event(t, del("specversion")) },
			reason: reasonSpecVersion,
		},
		{
			name: "bare body with null specversion", header: nil,
			body:   func(t *testing.T) []byte { return event(t, put("specversion", nil)) },
			reason: reasonSpecVersion,
		},
		{
			name: "bare body with specversion only nested", header: nil,
			body: func(t *testing.T) []byte {
				return event(t, func(ev map[string]any) { delete(ev, "specversion"); ev["data"] = map[string]any{"specversion": "1.0"} })
			},
			reason: reasonSpecVersion,
		},
		{
			name: "bare body with SpecVersion in another case", header: nil,
			body: func(t *testing.T) []byte {
				return event(t, func(ev map[string]any) { delete(ev, "specversion"); ev["SpecVersion"] = "1.0" })
			},
			reason: reasonSpecVersion,
		},
		{name: "bare body an array", body: func(*testing.T) []byte { return []byte(`[{"specversion":"1.0"}]`) }, reason: reasonSpecVersion},
		{name: "bare body not JSON", body: func(*testing.T) []byte { return []byte(`{"specversion":"1.0",`) }, reason: reasonSpecVersion},
		{name: "bare body JSON text", body: func(*testing.T) []byte { return []byte(`"specversion"`) }, reason: reasonSpecVersion},
		{name: "bare body empty", body: func(*testing.T) []byte { return nil }, reason: reasonSpecVersion},
		{
			name: "an unknown ce- header alone keeps binary", header: nats.Header{"ce-otherext": {"x"}},
			body:   func(t *testing.T) []byte { return event(t, nil) },
			reason: reasonSpecVersion,
		},
		{
			name: "Content-Type application/json keeps binary", header: nats.Header{"Content-Type": {ContentTypeJSON}},
			body:   func(t *testing.T) []byte { return event(t, nil) },
			reason: reasonSpecVersion,
		},
		{
			name: "an empty Content-Type is a Content-Type", header: nats.Header{"content-type": {""}},
			body:   func(t *testing.T) []byte { return event(t, nil) },
			reason: reasonSpecVersion,
		},
		{
			name: "sniffed structured poison: specversion 0.3", header: nil,
			body:   func(t *testing.T) []byte { return event(t, put("specversion", "0.3")) },
			reason: reasonSpecVersion, wantID: id, wantSrc: src,
		},
		{
			name: "sniffed structured poison: specversion a number", header: nil,
			body:   func(t *testing.T) []byte { return event(t, put("specversion", 1)) },
			reason: reasonSpecVersion, wantID: id, wantSrc: src,
		},
		{
			name: "sniffed structured poison: wrong subject", subject: "other.cmd.vm.start", header: nil,
			body:   func(t *testing.T) []byte { return event(t, nil) },
			reason: reasonSubject, wantID: id, wantSrc: src,
		},
		{
			name: "sniffed structured poison: type mismatch", header: nil,
			body:   func(t *testing.T) []byte { return event(t, put("type", "proxbus.vm.stop")) },
			reason: reasonTypeMismatch, wantID: id, wantSrc: src,
		},
		{
			name: "sniffed structured poison: data_base64", header: nil,
			body: func(t *testing.T) []byte {
				return event(t, func(ev map[string]any) { delete(ev, "data"); ev["data_base64"] = "e30=" })
			},
			reason: reasonDataBase64, wantID: id, wantSrc: src,
		},
		{
			name: "sniffed structured poison: over 1 MiB, id still readable", header: nil,
			body:   func(t *testing.T) []byte { return event(t, put("data", strings.Repeat("a", MaxCommandBytes))) },
			reason: reasonTooLarge, wantID: id, wantSrc: src,
		},
		{
			name: "sniffed structured poison: an extension the SDK refuses", header: nil,
			body:   func(t *testing.T) []byte { return event(t, put("nested", map[string]any{"a": 1})) },
			reason: reasonMalformed, wantID: id, wantSrc: src,
		},
		{
			name: "bare over 8 MiB is not parsed", header: nil,
			body:   func(t *testing.T) []byte { return event(t, put("data", strings.Repeat("a", 8*MaxCommandBytes))) },
			reason: reasonTooLarge,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			subject := tc.subject
			if subject == "" {
				subject = testSubjects.Command(verb)
			}
			c, err := Decode(subject, tc.header, tc.body(t), testSubjects)
			if tc.want != nil {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				sameCommand(t, c, *tc.want)
				return
			}
			var p *PoisonError
			if !errors.As(err, &p) {
				t.Fatalf("Decode = %+v, %v; want poison %q", c, err, tc.reason)
			}
			if p.Reason != tc.reason || p.ID != tc.wantID || p.Source != tc.wantSrc {
				t.Errorf("poison (%q, id %q, source %q), want (%q, %q, %q)", p.Reason, p.ID, p.Source, tc.reason, tc.wantID, tc.wantSrc)
			}
		})
	}
}
