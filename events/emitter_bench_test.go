package events

import (
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkEmit measures building the events of one command: a step and a result, each with
// a traceparent, as the pipeline emits them.
func BenchmarkEmit(b *testing.B) {
	em := NewEmitter(testSubjects, "bench")
	at := time.Date(2026, 11, 29, 17, 0, 0, 123456789, time.UTC)
	em.Now = func() time.Time { return at }
	o := Origin{ID: "cli-0123456789abcdef01234567", Source: "urn:proxbus:cli", Verb: "storage.pbs.create", TraceParent: testTraceParent}
	b.Run("step", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := em.Event(o, Step{Seq: 2, Step: "create_storage", Status: StepStarted, Detail: "creating storage brun1-42"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("result", func(b *testing.B) {
		b.ReportAllocs()
		out := json.RawMessage(`{"storage":"brun1-42","type":"pbs","nodes":["pve1","pve2"]}`)
		for b.Loop() {
			if _, _, err := em.Event(o, Result{Status: 201, Result: "created", Output: out, JournalFinalized: new(true)}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
