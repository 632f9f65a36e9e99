package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/handlers"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/schedule"
	"github.com/proxbus/proxbus/seal"
	"github.com/proxbus/proxbus/store"
)

// errScheduleRefused: schedule.add or schedule.remove was refused; the message says why.
var errScheduleRefused = errors.New("schedule refused")

// scheduleCmd is `proxbus schedule add|list|remove` (contract §11): scheduled commands, kept as
// JetStream message schedules that fire each command at its time.
type scheduleCmd struct {
	Add    scheduleAddCmd    `cmd:"" help:"Make or replace a scheduled command (the schedule.add command)."`
	List   scheduleListCmd   `cmd:"" help:"The schedules, with their next firing and their last firing's result."`
	Remove scheduleRemoveCmd `cmd:"" help:"Remove a schedule: it fires no more (the schedule.remove command)."`
}

// scheduleAddCmd is `proxbus schedule add NAME VERB (--cron EXPR [--tz ZONE] | --every D | --at
// TIME) --endpoint N --data JSON`: it publishes schedule.add, which proxbus checks as the
// command it fires would be, and waits for its answer. Without --nats-url it works on a
// running `proxbus dev`.
type scheduleAddCmd struct {
	Name          string        `arg:"" help:"The schedule's name (1–64 of A–Z a–z 0–9 _ -); a schedule of that name is replaced."`
	Verb          string        `arg:"" help:"The verb it fires (vm.backup, vm.snapshot.create, node.reboot, …)."`
	Cron          string        `name:"cron" help:"6-field cron expression, seconds first ('0 0 2 * * *' is 02:00:00 daily), or @daily, @hourly, …"`
	TZ            string        `name:"tz" help:"IANA time zone of --cron (default UTC), e.g. Europe/Berlin."`
	Every         string        `name:"every" help:"Fire at this interval (Go duration, whole seconds, at least 1s; e.g. 6h)."`
	At            string        `name:"at" help:"Fire once at this time (RFC 3339, e.g. 2026-12-24T02:00:00Z)."`
	Endpoint      int64         `name:"endpoint" help:"The endpoint the fired commands name."`
	Data          string        `name:"data" noenv:"" default:"{}" help:"The fired commands' data: JSON, @file, or @- to read it from stdin; its secret fields are sealed to proxbus's key (--seal-public-key or the keys bucket)."`
	SealPublicKey string        `name:"seal-public-key" help:"proxbus's sealing public key (age1…), or a file holding it; default: the key published in the keys bucket. A schedule's secret fields must be sealed."`
	Window        string        `name:"window" help:"How long after its firing a firing may still start (default 15m); later it is answered 410."`
	Actor         string        `name:"actor" help:"Who makes the schedule: the actor of every command it fires (default proxbus)."`
	Timeout       time.Duration `name:"timeout" default:"1m" help:"How long to wait for the answer."`
	natsFlags
	outputFlags
}

// Run publishes schedule.add and waits for its answer.
func (c *scheduleAddCmd) Run(e *cliEnv) error {
	format, err := outputOf(&c.Output)
	if err != nil {
		return err
	}
	patterns := 0
	for _, p := range []string{c.Cron, c.Every, c.At} {
		if p != "" {
			patterns++
		}
	}
	switch {
	case c.Endpoint <= 0:
		return fmt.Errorf("%w: --endpoint N is required: the endpoint the fired commands name", errUsage)
	case patterns != 1:
		return fmt.Errorf("%w: give exactly one of --cron EXPR [--tz ZONE], --every DURATION and --at TIME", errUsage)
	}
	data, err := readData(c.Data, e.stdin)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if data, err = c.seal(e, data); err != nil {
		return err
	}
	in := handlers.ScheduleInput{Name: c.Name, Cron: c.Cron, TZ: c.TZ, Every: c.Every, At: c.At, Verb: c.Verb,
		EndpointID: c.Endpoint, Data: data, Window: c.Window}
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	res, err := sendControl(e, &c.natsFlags, "schedule.add", c.Actor, body, c.Timeout)
	if err != nil {
		return err
	}
	return reportSchedule(e, format, res, func(out handlers.ScheduleOutput) string {
		next := "-"
		if out.Next != nil {
			next = out.Next.UTC().Format(time.RFC3339)
		}
		return fmt.Sprintf("%s; next firing %s", res.Detail, next)
	})
}

// seal seals data's secret fields to proxbus's key (--seal-public-key, else the keys bucket).
// Without a key anywhere data goes as it is, and proxbus refuses it 422 secret_not_sealed
// naming the fields.
func (c *scheduleAddCmd) seal(e *cliEnv, data json.RawMessage) (json.RawMessage, error) {
	if len(seal.PlainSecrets(data)) == 0 {
		return data, nil
	}
	conn, err := e.connectNATS(&c.natsFlags, app.InboxCLI)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	key, err := sendTrustFlags{SealPublicKey: c.SealPublicKey}.sealKey(conn.ctx, conn.js, events.NewSubjects(c.SubjectPrefix))
	switch {
	case errors.Is(err, seal.ErrNoPublicKey):
		return data, nil
	case err != nil:
		return nil, err
	}
	sealed, err := seal.SealData(data, key)
	if err != nil {
		return nil, fmt.Errorf("--seal-public-key: %w", err)
	}
	return sealed, nil
}

// scheduleRemoveCmd is `proxbus schedule remove NAME`: it publishes schedule.remove and waits
// for its answer.
type scheduleRemoveCmd struct {
	Name    string        `arg:"" help:"The schedule's name (proxbus schedule list shows them)."`
	Actor   string        `name:"actor" help:"Who removes it (default proxbus)."`
	Timeout time.Duration `name:"timeout" default:"1m" help:"How long to wait for the answer."`
	natsFlags
	outputFlags
}

// Run publishes schedule.remove and waits for its answer.
func (c *scheduleRemoveCmd) Run(e *cliEnv) error {
	format, err := outputOf(&c.Output)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(handlers.ScheduleRemoveInput{Name: c.Name})
	res, err := sendControl(e, &c.natsFlags, "schedule.remove", c.Actor, body, c.Timeout)
	if err != nil {
		return err
	}
	return reportSchedule(e, format, res, func(out handlers.ScheduleOutput) string {
		return "removed schedule " + out.Name
	})
}

// sendControl publishes a control command of verb with body as actor and returns its result.
func sendControl(e *cliEnv, nf *natsFlags, verb, actor string, body []byte, timeout time.Duration) (events.Result, error) {
	client, err := e.connectNATS(nf, app.InboxCLI)
	if err != nil {
		return events.Result{}, err
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(client.ctx, timeout)
	defer cancel()
	cmd := events.Command{ID: newCLICommandID(), Source: defaultSource, Verb: verb, Time: time.Now().UTC(), Actor: actor, Data: body}
	res, err := app.SendCommand(ctx, client.js, events.NewSubjects(nf.SubjectPrefix), cmd, app.SendOptions{})
	if err != nil {
		return events.Result{}, client.explain(err)
	}
	return res, nil
}

// reportSchedule prints a schedule verb's result: the document with --output json, else line
// of its output; a refusal is an error naming the fields at fault.
func reportSchedule(e *cliEnv, format outputFormat, res events.Result, line func(handlers.ScheduleOutput) string) error {
	if format == outputJSON {
		if err := writeJSONLine(e.stdout, res); err != nil {
			return err
		}
	}
	if res.Status >= 400 {
		fields := ""
		if len(res.Fields) > 0 {
			fields = " (" + strings.Join(res.Fields, ", ") + ")"
		}
		return fmt.Errorf("%w: %d %s%s: %s", errScheduleRefused, res.Status, res.Reason, fields, res.Detail)
	}
	if format == outputText {
		var out handlers.ScheduleOutput
		_ = json.Unmarshal(res.Output, &out)
		fmt.Fprintln(e.stdout, line(out))
	}
	return nil
}

// scheduleListCmd is `proxbus schedule list`: every schedule with its pattern, what it fires,
// its next firing (as nats-server will fire it) and its last firing with that command's state
// and result, from the commands stream and the store the replicas use. Without --nats-url and
// --redis-url it reads a running `proxbus dev`'s.
type scheduleListCmd struct {
	natsFlags
	storeFlags
	outputFlags
}

// ScheduleView is one line of `proxbus schedule list`.
type ScheduleView struct {
	Name       string          `json:"name"`
	Pattern    string          `json:"pattern"`
	TZ         string          `json:"tz,omitempty"`
	Verb       string          `json:"verb"`
	EndpointID int64           `json:"endpoint_id"`
	Data       json.RawMessage `json:"data,omitempty"`
	Window     string          `json:"window"`
	Actor      string          `json:"actor,omitempty"`
	Next       *time.Time      `json:"next,omitempty"`
	LastID     string          `json:"last_id,omitempty"`
	LastAt     *time.Time      `json:"last_at,omitempty"`
	LastState  string          `json:"last_state,omitempty"`
	LastResult *events.Result  `json:"last_result,omitempty"`
}

// Run prints the schedules.
func (c *scheduleListCmd) Run(e *cliEnv) error {
	format, err := outputOf(&c.Output)
	if err != nil {
		return err
	}
	client, st, closeBoth, err := e.connectServed(&c.natsFlags, &c.storeFlags)
	if err != nil {
		return err
	}
	defer closeBoth()
	views, err := listSchedules(client.ctx, client, events.NewSubjects(c.SubjectPrefix), st, time.Now())
	if err != nil {
		return client.explain(err)
	}
	if format == outputJSON {
		for _, v := range views {
			if err := writeJSONLine(e.stdout, v); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tWHEN\tVERB\tENDPOINT\tNEXT\tLAST\tLAST RESULT")
	for _, v := range views {
		when := v.Pattern
		if v.TZ != "" {
			when += " (" + v.TZ + ")"
		}
		next, last, result := "-", "-", "-"
		if v.Next != nil {
			next = v.Next.UTC().Format(time.RFC3339)
		}
		if v.LastID != "" {
			last = v.LastID
		}
		if v.LastState != "" {
			result = v.LastState
		}
		if r := v.LastResult; r != nil {
			result = strings.TrimSpace(fmt.Sprintf("%d %s %s", r.Status, r.Result, r.Reason))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", v.Name, when, v.Verb, v.EndpointID, next, last, result)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%d schedules (proxbus status ID --source urn:proxbus:schedule:NAME shows a firing)\n", len(views))
	return nil
}

// listSchedules lists the schedules schedule.add recorded in the store, each with its next
// firing (none once its @at fired, or when the commands stream no longer holds it) and its
// last firing with that command's state, then the schedules the commands stream holds without
// a record. It reads the commands stream's information but no
// message of it, so the cli user needs no right to read queued commands.
func listSchedules(ctx context.Context, client *natsClient, subjects events.Subjects, st *store.Store, now time.Time) ([]ScheduleView, error) {
	inStream, err := consumer.Schedules{JS: client.js, Subjects: subjects}.Names(ctx)
	if err != nil {
		return nil, err
	}
	recs, err := st.Schedules(ctx)
	if err != nil {
		return nil, err
	}
	views := make([]ScheduleView, 0, len(recs))
	for _, rec := range recs {
		v := ScheduleView{Name: rec.Name, Pattern: rec.Pattern, TZ: rec.TZ, Verb: rec.Verb, EndpointID: rec.EndpointID,
			Window: rec.Window.String(), Actor: rec.Actor}
		if len(rec.Data) > 0 {
			v.Data = rec.Data
		}
		sc := events.Schedule{Name: rec.Name, TZ: rec.TZ}
		if inStream[rec.Name] && sc.SetPattern(rec.Pattern) == nil {
			if next, ok := schedule.NextFiring(sc, rec.MadeAt, now); ok {
				if rec.Next.After(now) {
					next = rec.Next // what nats-server announced with the last firing
				}
				v.Next = &next
			}
		}
		if rec.LastID != "" {
			v.LastID, v.LastAt = rec.LastID, &rec.LastAt
			status, err := app.CommandStatus(ctx, client.js, subjects, st, store.CommandKey{Source: events.ScheduleSource(rec.Name), ID: rec.LastID})
			switch {
			case errors.Is(err, app.ErrCommandUnknown):
			case err != nil:
				return nil, err
			default:
				v.LastState, v.LastResult = string(status.State), status.Result
			}
		}
		views = append(views, v)
		delete(inStream, rec.Name)
	}
	// A schedule in the stream without a record (made by hand under proxbus.schedule.>, or
	// whose record Redis lost): its firings are refused 403; proxbus schedule remove removes it.
	for _, name := range slices.Sorted(maps.Keys(inStream)) {
		views = append(views, ScheduleView{Name: name, Pattern: "?", LastState: "no record: its firings are refused 403 (remove it, then add it again)"})
	}
	return views, nil
}
