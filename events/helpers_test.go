package events

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/nats-io/nats.go"
)

var testSubjects = NewSubjects("")

const testTraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// binaryMsg returns the subject, headers and body of a valid binary-mode vm.start command,
// after mutate (which may be nil) has changed the headers.
func binaryMsg(mutate func(h nats.Header)) (string, nats.Header, []byte) {
	h := nats.Header{
		"ce-specversion": {"1.0"},
		"ce-id":          {"cmd-1"},
		"ce-source":      {"/netbox/webhook/7"},
		"ce-type":        {"proxbus.vm.start"},
		"Content-Type":   {"application/json"},
	}
	if mutate != nil {
		mutate(h)
	}
	return testSubjects.Command("vm.start"), h, []byte(`{"vm":"web1"}`)
}

// structuredMsg returns the subject, headers and body of a valid structured-mode vm.start
// command, after mutate (which may be nil) has changed the event's JSON object.
func structuredMsg(t *testing.T, mutate func(ev map[string]any)) (string, nats.Header, []byte) {
	t.Helper()
	ev := map[string]any{
		"specversion": "1.0",
		"id":          "cmd-1",
		"source":      "/netbox/webhook/7",
		"type":        "proxbus.vm.start",
		"data":        map[string]any{"vm": "web1"},
	}
	if mutate != nil {
		mutate(ev)
	}
	body, err := json.Marshal(ev)
	if err != nil {
		t.Fatalf("marshal test event: %v", err)
	}
	return testSubjects.Command("vm.start"), nats.Header{"Content-Type": {ContentTypeCE}}, body
}

// jsonEqual reports whether two JSON documents are equal as values.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("not JSON %q: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("not JSON %q: %v", b, err)
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return string(ja) == string(jb)
}

// sameCommand compares two commands, Data as JSON values and Time as instants.
func sameCommand(t *testing.T, got, want Command) {
	t.Helper()
	gd, wd := got.Data, want.Data
	gt, wt := got.Time, want.Time
	got.Data, want.Data = nil, nil
	got.Time, want.Time = wt, wt
	if !reflect.DeepEqual(got, want) {
		t.Errorf("command mismatch:\n got  %+v\n want %+v", got, want)
	}
	if !gt.Equal(wt) {
		t.Errorf("time = %v, want %v", gt, wt)
	}
	if !jsonEqual(t, gd, wd) {
		t.Errorf("data = %s, want %s", gd, wd)
	}
}
