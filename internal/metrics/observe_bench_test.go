package metrics

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/consumer"
)

// BenchmarkPublished measures the publish hook on what the pipeline publishes: a step event
// pair (started, then done), a result event, and a message that is not an event (a
// structured-mode command dead-lettered as is).
func BenchmarkPublished(b *testing.B) {
	subjects := events.NewSubjects("proxbus")
	em := events.NewEmitter(subjects, "bench")
	o := events.Origin{ID: "bench-run-42", Source: "/bench", Verb: "storage.pbs.create",
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	at := time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC)
	mustMsg := func(m *nats.Msg, err error) *nats.Msg {
		b.Helper()
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	started := mustMsg(em.StepEvent(o, events.Step{Seq: 1, Step: "storage", Status: events.StepStarted, At: at}))
	done := mustMsg(em.StepEvent(o, events.Step{Seq: 2, Step: "storage", Status: events.StepDone, UPID: "UPID:pve1:0001", At: at.Add(time.Second)}))
	endpoint := int64(1)
	result := mustMsg(em.ResultEvent(o, events.Result{Status: 201, Result: "created", EndpointID: &endpoint,
		JournalEntryURL: "https://netbox.example/api/extras/journal-entries/7/", JournalFinalized: true,
		IdempotencyKey: "key-run-42", Output: json.RawMessage(`{"storage":"brun1-42","type":"pbs"}`)}))
	cmd, err := events.EncodeStructured(subjects, events.Command{ID: "bench-run-42", Source: "/bench",
		Verb: "storage.pbs.create", Data: json.RawMessage(`{"storage":"brun1-42"}`)})
	if err != nil {
		b.Fatal(err)
	}
	dlq := &nats.Msg{Subject: subjects.DLQ("storage.pbs.create"), Header: cmd.Header, Data: cmd.Data}

	fill := func(st events.Step) events.Step {
		st.CommandID, st.CommandSource, st.Verb = o.ID, o.Source, o.Verb
		return st
	}
	typedPair := []consumer.Publication{
		{Msg: started, Event: fill(events.Step{Seq: 1, Step: "storage", Status: events.StepStarted, At: at})},
		{Msg: done, Event: fill(events.Step{Seq: 2, Step: "storage", Status: events.StepDone, At: at.Add(time.Second)})},
	}
	typedResult := []consumer.Publication{{Msg: result, Event: events.Result{CommandID: o.ID, CommandSource: o.Source,
		Verb: o.Verb, Status: 201, Result: "created"}}}
	decoded := func(msgs ...*nats.Msg) []consumer.Publication {
		var ps []consumer.Publication
		for _, m := range msgs {
			ps = append(ps, consumer.Publication{Msg: m})
		}
		return ps
	}

	cases := []struct {
		name string
		pubs []consumer.Publication
	}{
		{"step-pair", decoded(started, done)},
		{"result", decoded(result)},
		{"not-an-event", decoded(dlq)},
		{"typed-step-pair", typedPair},
		{"typed-result", typedResult},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			m := New(Options{Verbs: []string{"storage.pbs.create"}})
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				for _, p := range tc.pubs {
					m.Published(ctx, p)
				}
			}
		})
	}
}
