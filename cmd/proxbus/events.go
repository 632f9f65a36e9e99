package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
)

// cmdEvents tails events, all of them or one command's, until interrupted. With --output
// text (the default) it prints one human line per event; with --output json one JSON line per
// event: {"subject","type","id","time","data"} with data the event's own document.
func cmdEvents(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("events", stderr)
	natsURL := fs.str("nats-url", "nats://127.0.0.1:4222", "NATS server URL")
	natsSec := addNATSSecurityFlags(fs)
	prefix := fs.str("subject-prefix", "proxbus", "subject prefix")
	id := fs.String("id", "", "follow one command (its CloudEvents id)")
	source := fs.String("source", "urn:proxbus:cli", "the command's source (needed only for ids that are not plain tokens)")
	all := fs.Bool("all", false, "start with the oldest stored event instead of new ones")
	output := outputFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	format, err := outputOf(output)
	if err != nil {
		return err
	}
	nc, js, err := app.ConnectClient(*natsURL, natsSec.security())
	if err != nil {
		return err
	}
	defer nc.Close()
	subjects := events.NewSubjects(*prefix)
	filter := ""
	if *id != "" {
		filter = subjects.Follow(events.Ref(*source, *id))
	}
	var writeErr error
	err = app.Tail(ctx, js, subjects, filter, *all || *id != "", func(subject string, ev events.Received) bool {
		if format == outputJSON {
			writeErr = writeJSONLine(stdout, eventDoc{Subject: subject, Type: ev.Type, ID: ev.ID, Time: ev.Time, Data: rawOrString(ev.Data)})
		} else {
			_, writeErr = fmt.Fprintln(stdout, sanitizeLine(eventLine(subject, ev)))
		}
		return writeErr == nil
	})
	if writeErr != nil {
		return writeErr
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// eventDoc is one event in `events --output json`.
type eventDoc struct {
	Subject string    `json:"subject"`
	Type    string    `json:"type"`
	ID      string    `json:"id"`
	Time    time.Time `json:"time,omitzero"`
	Data    any       `json:"data"`
}

// eventLine renders an event for a human: time, the command's ref, and what happened.
func eventLine(subject string, ev events.Received) string {
	at := "--:--:--"
	if !ev.Time.IsZero() {
		at = ev.Time.Local().Format(time.TimeOnly)
	}
	kind := subject[strings.LastIndexByte(subject, '.')+1:]
	ref := strings.TrimSuffix(subject, "."+kind)
	if i := strings.Index(ref, ".evt."); i >= 0 {
		ref = ref[i+len(".evt."):]
	}
	head := fmt.Sprintf("%s %s %s", at, ref, kind)
	switch kind {
	case "step":
		var st events.Step
		if json.Unmarshal(ev.Data, &st) == nil {
			line := fmt.Sprintf("%s %d %s %s", head, st.Seq, st.Step, st.Status)
			if st.UPID != "" {
				line += " " + st.UPID
			}
			if st.Detail != "" {
				line += " — " + st.Detail
			}
			return line
		}
	case "result":
		var r events.Result
		if json.Unmarshal(ev.Data, &r) == nil {
			line := fmt.Sprintf("%s %s %d %s", head, r.Verb, r.Status, r.Result)
			if r.Reason != "" {
				line += " " + r.Reason
			}
			if r.Replayed {
				line += " (replayed)"
			}
			if r.Detail != "" {
				line += " — " + r.Detail
			}
			return line
		}
	case "journal":
		var j events.JournalRepaired
		if json.Unmarshal(ev.Data, &j) == nil {
			return fmt.Sprintf("%s repaired %s by %s", head, j.JournalEntryURL, j.RepairedBy)
		}
	}
	return fmt.Sprintf("%s %s %s", head, ev.Type, ev.Data)
}
