package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
)

var fixedNow = time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)

func testEmitter() Emitter {
	e := NewEmitter(testSubjects, "replica-1")
	e.Now = func() time.Time { return fixedNow }
	return e
}

// TestEmitterEvents pins ids, types, subjects, headers, source, time and traceparent of every
// event kind, for a simple and a hashed ref.
func TestEmitterEvents(t *testing.T) {
	t.Parallel()
	e := testEmitter()
	simple := Origin{ID: "cmd-1", Source: "/netbox/webhook/7", Verb: "vm.start", TraceParent: testTraceParent}
	hashed := Origin{ID: "a/b", Source: "urn:proxbus:cli", Verb: "vm.start"}
	stepAt := time.Date(2026, 11, 29, 17, 59, 0, 0, time.UTC)
	tests := []struct {
		name             string
		build            func() (*nats.Msg, error)
		id, typ, subject string
		traceParent      string
		at               time.Time
	}{
		{"step", func() (*nats.Msg, error) {
			return msgOf(e, simple, Step{Seq: 3, Step: "start_vm", Status: StepDone, At: stepAt})
		}, "cmd-1.step.3", "proxbus.vm.start.step", "proxbus.evt.cmd-1.step", testTraceParent, stepAt},
		{"step without time gets now", func() (*nats.Msg, error) {
			return msgOf(e, hashed, Step{Seq: 1, Step: "start_vm", Status: StepStarted})
		}, "a/b.step.1", "proxbus.vm.start.step", "proxbus.evt." + Ref("urn:proxbus:cli", "a/b") + ".step", "", fixedNow},
		{"result", func() (*nats.Msg, error) {
			return msgOf(e, simple, Result{Status: 200, Result: "ok"})
		}, "cmd-1.result", "proxbus.vm.start.result", "proxbus.evt.cmd-1.result", testTraceParent, fixedNow},
		{"replayed result, one per duplicate delivered", func() (*nats.Msg, error) {
			o := simple
			o.Delivery = 42
			return msgOf(e, o, Result{Status: 200, Result: "ok", Replayed: true})
		}, "cmd-1.result.replay.42", "proxbus.vm.start.result", "proxbus.evt.cmd-1.result", testTraceParent, fixedNow},
		{"result hashed ref", func() (*nats.Msg, error) {
			return msgOf(e, hashed, Result{Status: 200, Result: "ok"})
		}, "a/b.result", "proxbus.vm.start.result", "proxbus.evt." + Ref("urn:proxbus:cli", "a/b") + ".result", "", fixedNow},
		{"journal", func() (*nats.Msg, error) {
			return msgOf(e, simple, JournalRepaired{JournalEntryURL: "http://nb/api/extras/journal-entries/5/", RepairedBy: RepairedByRepairer})
		}, "cmd-1.journal.repaired", "proxbus.journal.repaired", "proxbus.evt.cmd-1.journal", testTraceParent, fixedNow},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			msg, err := tc.build()
			if err != nil {
				t.Fatal(err)
			}
			if msg.Subject != tc.subject {
				t.Errorf("subject = %q, want %q", msg.Subject, tc.subject)
			}
			if got := msg.Header.Get(HeaderMsgID); got != tc.id {
				t.Errorf("Nats-Msg-Id = %q, want %q", got, tc.id)
			}
			if got := msg.Header.Get(HeaderContentType); got != ContentTypeCE {
				t.Errorf("Content-Type = %q", got)
			}
			r, err := ParseEvent(msg.Data)
			if err != nil {
				t.Fatalf("ParseEvent: %v", err)
			}
			if r.ID != tc.id || r.Type != tc.typ || r.Source != "urn:proxbus:replica-1" {
				t.Errorf("event = %+v", r)
			}
			if r.TraceParent != tc.traceParent {
				t.Errorf("traceparent = %q, want %q", r.TraceParent, tc.traceParent)
			}
			if !r.Time.Equal(tc.at) {
				t.Errorf("time = %v, want %v", r.Time, tc.at)
			}
			var data map[string]any
			if err := json.Unmarshal(r.Data, &data); err != nil {
				t.Fatalf("data: %v", err)
			}
			if data["command_id"] != strings.SplitN(tc.id, ".", 2)[0] && data["command_id"] != "a/b" {
				t.Errorf("command_id = %v", data["command_id"])
			}
			again, err := tc.build()
			if err != nil || again.Header.Get(HeaderMsgID) != tc.id || string(again.Data) != string(msg.Data) {
				t.Errorf("event is not deterministic: %s vs %s", again.Data, msg.Data)
			}
		})
	}
}

// TestStepJSON pins the step payload's field names and the origin fields the emitter fills.
func TestStepJSON(t *testing.T) {
	t.Parallel()
	o := Origin{ID: "cmd-1", Source: "/nb", Verb: "vm.provision"}
	msg, err := msgOf(testEmitter(), o, Step{CommandID: "wrong", Seq: 2, Step: "clone_template", Status: StepStarted, UPID: "UPID:pve1:1", Attempt: 3})
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseEvent(msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(r.Data, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"command_id": "cmd-1", "command_source": "/nb", "verb": "vm.provision", "seq": 2.0,
		"step": "clone_template", "status": "started", "upid": "UPID:pve1:1", "attempt": 3.0, "at": "2026-11-29T18:00:00Z",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("step data = %v, want %v", got, want)
	}
}

// TestResultJSON pins the result payload's field names: journal_finalized and replayed always
// present, optional fields omitted when unset and named exactly as the contract when set.
func TestResultJSON(t *testing.T) {
	t.Parallel()
	ep := int64(7)
	o := Origin{ID: "cmd-1", Source: "/nb", Verb: "storage.pbs.create"}
	tests := []struct {
		name string
		r    Result
		keys []string
	}{
		{"minimal", Result{Status: 200, Result: "ok"},
			[]string{"command_id", "command_source", "replayed", "result", "status", "verb"}},
		{"every field", Result{
			EndpointID: &ep, Status: 409, Result: "failed", Reason: "storage_conflict", Detail: "d",
			Fields: []string{"port"}, ProxmoxStatus: 400, JournalEntryURL: "http://nb/j/1/", JournalFinalized: new(true),
			Replayed: true, IdempotencyKey: "k", Output: json.RawMessage(`{"a":1}`),
		}, []string{"command_id", "command_source", "detail", "endpoint_id", "fields", "idempotency_key", "journal_entry_url",
			"journal_finalized", "output", "proxmox_status", "reason", "replayed", "result", "status", "verb"}},
		{"journal entry still pending", Result{Status: 502, Result: "created", JournalEntryURL: "http://nb/j/1/", JournalFinalized: new(false)},
			[]string{"command_id", "command_source", "journal_entry_url", "journal_finalized", "replayed", "result", "status", "verb"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			msg, err := msgOf(testEmitter(), o, tc.r)
			if err != nil {
				t.Fatal(err)
			}
			r, err := ParseEvent(msg.Data)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]json.RawMessage
			if err := json.Unmarshal(r.Data, &got); err != nil {
				t.Fatal(err)
			}
			keys := make([]string, 0, len(got))
			for k := range got {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			if !reflect.DeepEqual(keys, tc.keys) {
				t.Errorf("keys = %v, want %v", keys, tc.keys)
			}
			if string(got["command_id"]) != `"cmd-1"` || string(got["verb"]) != `"storage.pbs.create"` {
				t.Errorf("origin fields not filled: %s", r.Data)
			}
			var back Result
			if err := json.Unmarshal(r.Data, &back); err != nil {
				t.Fatal(err)
			}
			if back.Status != tc.r.Status || back.Replayed != tc.r.Replayed || back.Finalized() != tc.r.Finalized() || (back.JournalFinalized == nil) != (tc.r.JournalFinalized == nil) {
				t.Errorf("result round trip = %+v", back)
			}
		})
	}
}

// TestEmitterRedacts pins that a secret in free text or output never leaves in an event.
func TestEmitterRedacts(t *testing.T) {
	t.Parallel()
	o := Origin{ID: "cmd-1", Source: "/nb", Verb: "storage.pbs.create"}
	e := testEmitter()
	res, err := msgOf(e, o, Result{Status: 502, Result: "failed", Detail: "upstream said password=hunter2",
		Output: json.RawMessage(`{"cloud_init":{"password":"hunter2"},"vmid":100}`)})
	if err != nil {
		t.Fatal(err)
	}
	step, err := msgOf(e, o, Step{Seq: 1, Step: "x", Status: StepError, Detail: `"token":"hunter2"`})
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range []*nats.Msg{res, step} {
		if strings.Contains(string(msg.Data), "hunter2") {
			t.Errorf("secret leaked: %s", msg.Data)
		}
	}
	r, _ := ParseEvent(res.Data)
	if !strings.Contains(string(r.Data), `"vmid":100`) {
		t.Errorf("non-secret output lost: %s", r.Data)
	}
	plain, err := msgOf(e, o, Result{Status: 200, Result: "ok", Output: json.RawMessage(`{"z":1,"a":[2,1]}`)})
	if err != nil {
		t.Fatal(err)
	}
	pr, _ := ParseEvent(plain.Data)
	if !strings.Contains(string(pr.Data), `"output":{"z":1,"a":[2,1]}`) {
		t.Errorf("output without secrets was rewritten: %s", pr.Data)
	}
}

// TestEmitterRejects pins the emitter's input errors.
func TestEmitterRejects(t *testing.T) {
	t.Parallel()
	e := testEmitter()
	ok := Origin{ID: "cmd-1", Source: "/nb", Verb: "vm.start"}
	tests := []struct {
		name  string
		build func() (*nats.Msg, error)
	}{
		{"step without id", func() (*nats.Msg, error) { return msgOf(e, Origin{Verb: "vm.start"}, Step{Seq: 1}) }},
		{"result without id", func() (*nats.Msg, error) { return msgOf(e, Origin{}, Result{Status: 200}) }},
		{"result id with newline", func() (*nats.Msg, error) { return msgOf(e, Origin{ID: "a\nb"}, Result{Status: 200}) }},
		{"result status zero", func() (*nats.Msg, error) { return msgOf(e, ok, Result{Result: "ok"}) }},
		{"result output not JSON", func() (*nats.Msg, error) {
			return msgOf(e, ok, Result{Status: 200, Output: json.RawMessage(`{`)})
		}},
		{"journal without id", func() (*nats.Msg, error) { return msgOf(e, Origin{}, JournalRepaired{}) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if msg, err := tc.build(); !errors.Is(err, ErrEncode) {
				t.Errorf("got %v, %v; want ErrEncode", msg, err)
			}
		})
	}
}

// TestInvalidCommandResult pins the 400 invalid_command result for a poison message.
func TestInvalidCommandResult(t *testing.T) {
	t.Parallel()
	subj, h, body := binaryMsg(func(h nats.Header) { h["ce-endpointid"] = []string{"abc"} })
	_, err := Decode(subj, h, body, testSubjects)
	var p *PoisonError
	if !errors.As(err, &p) {
		t.Fatalf("want poison, got %v", err)
	}
	r, o, ok := InvalidCommandResult(p)
	if !ok {
		t.Fatal("id was readable but ok = false")
	}
	want := Result{CommandID: "cmd-1", CommandSource: "/netbox/webhook/7", Verb: "vm.start",
		Status: http.StatusBadRequest, Result: "refused", Reason: "invalid_command", Detail: reasonEndpointID}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("result = %+v, want %+v", r, want)
	}
	if o != (Origin{ID: "cmd-1", Source: "/netbox/webhook/7", Verb: "vm.start"}) {
		t.Errorf("origin = %+v", o)
	}
	msg, err := msgOf(testEmitter(), o, r)
	if err != nil || msg.Subject != "proxbus.evt.cmd-1.result" {
		t.Errorf("publishable result: %v, %v", msg, err)
	}
	for _, p := range []*PoisonError{nil, {Reason: reasonNotObject}} {
		if _, _, ok := InvalidCommandResult(p); ok {
			t.Errorf("InvalidCommandResult(%v) ok without an id", p)
		}
	}
	noVerb, err := msgOf(testEmitter(), Origin{ID: "x"}, Result{Status: 400, Result: "refused"})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := ParseEvent(noVerb.Data); r.Type != "proxbus.unknown.result" {
		t.Errorf("type without verb = %q", r.Type)
	}
}

// TestParseEventRejects pins ParseEvent's errors.
func TestParseEventRejects(t *testing.T) {
	t.Parallel()
	for _, body := range []string{``, `[]`, `{"id":"x"}`, `{"specversion":"1.0","id":"","source":"s","type":"t"}`, `{"specversion":"9.9","id":"x","source":"s","type":"t"}`} {
		if _, err := ParseEvent([]byte(body)); !errors.Is(err, errMalformedEvent) {
			t.Errorf("ParseEvent(%q) = %v, want errMalformedEvent", body, err)
		}
	}
}

// TestModeString pins Mode names.
func TestModeString(t *testing.T) {
	t.Parallel()
	for m, want := range map[Mode]string{ModeBinary: "binary", ModeStructured: "structured", Mode(9): "unknown"} {
		if m.String() != want {
			t.Errorf("%d.String() = %q, want %q", m, m.String(), want)
		}
	}
	if OriginOf(Command{ID: "i", Source: "s", Verb: "v", TraceParent: "t"}) != (Origin{ID: "i", Source: "s", Verb: "v", TraceParent: "t"}) {
		t.Error("OriginOf does not copy the command's identity")
	}
}

// TestEventBodyIsWhatEncodingJSONWrites: an emitted event's body is byte for byte what
// json.Marshal writes for the SDK event, also for text encoding/json escapes (<, >, &, U+2028)
// and non-ASCII text.
func TestEventBodyIsWhatEncodingJSONWrites(t *testing.T) {
	t.Parallel()
	em := NewEmitter(NewSubjects("proxbus"), "test")
	o := Origin{ID: "c1", Source: "/test", Verb: "vm.start", TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	msg, err := msgOf(em, o, Step{CommandID: "c1", CommandSource: "/test", Verb: "vm.start", Seq: 1,
		Step: "start_vm", Status: StepError, Detail: `<b>&"quoted"` + "\u2028 ünïcødé \x7f", At: time.Unix(1700000000, 5).UTC()})
	if err != nil {
		t.Fatal(err)
	}
	var ev event.Event
	if err := json.Unmarshal(msg.Data, &ev); err != nil {
		t.Fatalf("body is not an event: %v", err)
	}
	want, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(msg.Data, want) {
		t.Errorf("body\n%s\nwant\n%s", msg.Data, want)
	}
}

// TestTypedEventIsWhatTheMessageCarries: Step, Result and Journal return the value exactly as
// their message's data carries it — command fields filled, texts redacted — so an observer
// given the value sees nothing the event does not.
func TestTypedEventIsWhatTheMessageCarries(t *testing.T) {
	t.Parallel()
	em := testEmitter()
	o := Origin{ID: "c1", Source: "/test", Verb: "vm.start"}
	dataOf := func(t *testing.T, m *nats.Msg, into any) {
		t.Helper()
		var ev struct{ Data json.RawMessage }
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(ev.Data, into); err != nil {
			t.Fatal(err)
		}
	}
	p, msg, err := em.Event(o, Step{Seq: 2, Step: "start_vm", Status: StepError, Detail: "failed: password=hunter22"})
	if err != nil {
		t.Fatal(err)
	}
	st := p.(Step)
	var gotStep Step
	dataOf(t, msg, &gotStep)
	if !reflect.DeepEqual(st, gotStep) || strings.Contains(st.Detail, "hunter22") || st.CommandID != "c1" {
		t.Errorf("Event returned %+v, message carries %+v", st, gotStep)
	}
	p, msg, err = em.Event(o, Result{Status: 200, Result: "ok", Detail: "token=abcd1234",
		Output: json.RawMessage(`{"vm":101,"password":"hunter22"}`)})
	if err != nil {
		t.Fatal(err)
	}
	res := p.(Result)
	var gotRes Result
	dataOf(t, msg, &gotRes)
	if !reflect.DeepEqual(res, gotRes) || strings.Contains(string(res.Output), "hunter22") || strings.Contains(res.Detail, "abcd1234") {
		t.Errorf("Event returned %+v, message carries %+v", res, gotRes)
	}
	p, msg, err = em.Event(o, JournalRepaired{JournalEntryURL: "https://netbox.example/api/extras/journal-entries/1/", RepairedBy: "repairer"})
	if err != nil {
		t.Fatal(err)
	}
	j := p.(JournalRepaired)
	var gotJ JournalRepaired
	dataOf(t, msg, &gotJ)
	if !reflect.DeepEqual(j, gotJ) || j.CommandID != "c1" {
		t.Errorf("Event returned %+v, message carries %+v", j, gotJ)
	}
}

// msgOf is the message of the event e builds of p.
func msgOf(e Emitter, o Origin, p Payload) (*nats.Msg, error) {
	_, m, err := e.Event(o, p)
	return m, err
}
