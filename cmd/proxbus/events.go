package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/handlers"
	"github.com/proxbus/proxbus/internal/app"
)

// eventsCmd is `proxbus events`: it tails events, all of them or one command's (contract §10). With --id it starts at
// the command's first stored event and returns after its first result, unless --follow keeps
// it open (for replays and journal repairs); without --id it tails until interrupted. With
// --output text (the default) it prints one human line per event (a step by its seq, its
// attempt when above 1; vm.list's result also as a table); with --output json one JSON line
// per event: {"subject","type","id","time","data"} with data the event's own document.
// Without --nats-url it follows a running `proxbus dev` (see [cliEnv.natsFromDev]).
type eventsCmd struct {
	ID     string `name:"id" noenv:"" help:"Follow one command (its CloudEvents id)."`
	Source string `name:"source" default:"${default_source}" help:"The command's source (needed only for ids that are not plain tokens)."`
	All    bool   `name:"all" help:"Start with the oldest stored event instead of new ones."`
	Follow bool   `name:"follow" help:"With --id: keep following after the result instead of returning."`
	PVE    bool   `name:"pve" help:"Only Proxmox's own events: tasks, guest changes and notifications of every endpoint."`
	natsFlags
	outputFlags
}

// cmdEvents runs `proxbus events args`.
func cmdEvents(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runSub(ctx, []string{"events"}, args, nil, stdout, stderr)
}

// Run tails the events until the result (--id) or an interrupt.
func (c *eventsCmd) Run(e *cliEnv) error {
	ctx, stdout := e.ctx, e.stdout
	format, err := outputOf(&c.Output)
	if err != nil {
		return err
	}
	client, err := e.connectNATS(&c.natsFlags, app.InboxCLI)
	if err != nil {
		return err
	}
	defer client.Close()
	ctx, js := client.ctx, client.js
	subjects := events.NewSubjects(c.SubjectPrefix)
	filter := ""
	if c.PVE {
		filter = subjects.PVEFilter()
	}
	if c.ID != "" {
		filter = subjects.Follow(events.Ref(c.Source, c.ID))
	}
	untilResult := c.ID != "" && !c.Follow
	var writeErr error
	err = app.Tail(ctx, js, subjects, filter, c.All || c.ID != "", func(subject string, ev events.Received) bool {
		if format == outputJSON {
			writeErr = writeJSONLine(stdout, eventDoc{Subject: subject, Type: ev.Type, ID: ev.ID, Time: ev.Time, Data: rawOrString(ev.Data)})
		} else {
			writeErr = writeEventText(stdout, subject, ev)
		}
		return writeErr == nil && !(untilResult && strings.HasSuffix(subject, ".result"))
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

// writeEventText prints an event's line and, for a vm.list result, its table.
func writeEventText(w io.Writer, subject string, ev events.Received) error {
	if _, err := fmt.Fprintln(w, sanitizeLine(eventLine(subject, ev))); err != nil {
		return err
	}
	if !strings.HasSuffix(subject, ".result") {
		return nil
	}
	var r events.Result
	if json.Unmarshal(ev.Data, &r) != nil {
		return nil
	}
	return writeResultTable(w, r)
}

// vmListVerb is the verb whose result text mode shows as a table.
const vmListVerb = "vm.list"

// writeResultTable prints a successful vm.list result's guests as a table (VMID, NAME, NODE,
// TYPE, STATUS, VCPUS, MEMORY; a template's status reads "template"); any other result, or
// an output it cannot read, prints nothing.
func writeResultTable(w io.Writer, r events.Result) error {
	if r.Verb != vmListVerb || r.Status >= 400 || len(r.Output) == 0 {
		return nil
	}
	var out struct {
		VMs []handlers.VMListEntry `json:"vms"`
	}
	if json.Unmarshal(r.Output, &out) != nil {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VMID\tNAME\tNODE\tTYPE\tSTATUS\tVCPUS\tMEMORY")
	for _, v := range out.VMs {
		status := v.Status
		if v.Template {
			status += " (template)"
		}
		cells := []string{v.VMID, v.Name, v.Node, v.Type, status, strconv.Itoa(v.VCPUs), formatMiB(v.MemoryMB)}
		for i, c := range cells {
			cells[i] = sanitizeLine(c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// formatMiB renders a memory size given in MiB: whole GiB as "4 GiB", else "1536 MiB".
func formatMiB(mb int64) string {
	if mb >= 1024 && mb%1024 == 0 {
		return strconv.FormatInt(mb/1024, 10) + " GiB"
	}
	return strconv.FormatInt(mb, 10) + " MiB"
}

// stepText is a step's words after its ref and kind: seq, name, status, the attempt when
// above 1, the UPID and the detail.
func stepText(st events.Step) string {
	line := fmt.Sprintf("%d %s %s", st.Seq, st.Step, st.Status)
	if st.Attempt > 1 {
		line += fmt.Sprintf(" (attempt %d)", st.Attempt)
	}
	if st.UPID != "" {
		line += " " + st.UPID
	}
	if st.Detail != "" {
		line += " — " + st.Detail
	}
	return line
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
			return head + " " + stepText(st)
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
	case events.PVEKindTask, events.PVEKindGuest, events.PVEKindNotification:
		if line, ok := pveLine(head, kind, ev.Data); ok {
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

// pveLine renders one of Proxmox's own events (head is "<time> pve.<endpoint> <kind>"): a
// task's type, vmid, status (exit status when it failed), user and UPID; a guest's change; a
// notification's severity and title.
func pveLine(head, kind string, data []byte) (string, bool) {
	switch kind {
	case events.PVEKindTask:
		var t events.PVETask
		if json.Unmarshal(data, &t) != nil {
			return "", false
		}
		line := fmt.Sprintf("%s %s", head, t.Type)
		if t.VMID != 0 {
			line += fmt.Sprintf(" %d", t.VMID)
		}
		line += " " + t.Status
		if t.Status == events.PVETaskError {
			line += " (" + t.ExitStatus + ")"
		}
		line += " by " + t.User
		if t.CommandID != "" {
			line += " for " + t.CommandID
		}
		return line + " " + t.UPID, true
	case events.PVEKindGuest:
		var g events.PVEGuest
		if json.Unmarshal(data, &g) != nil {
			return "", false
		}
		line := fmt.Sprintf("%s %d %s %s", head, g.VMID, g.Name, g.Change)
		if g.From != "" || g.To != "" {
			line += fmt.Sprintf(" %s → %s", g.From, g.To)
		}
		return line, true
	default:
		var n events.PVENotification
		if json.Unmarshal(data, &n) != nil {
			return "", false
		}
		return fmt.Sprintf("%s %s %s", head, n.Severity, n.Title), true
	}
}
