package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
)

// soakSchedule is the schedule the cluster-mode soak keeps firing through its faults
// (contract §11): a vm.list every second on endpoint 1. A read writes nothing, so its firings
// leave the write and journal checks to the planned commands.
const soakSchedule = "soak-tick"

// scheduleControl publishes the control command verb (schedule.add or schedule.remove) with
// data and waits for its result.
func scheduleControl(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, subjects events.Subjects, verb, id, data string) (events.Result, error) {
	cmd := events.Command{ID: id, Source: "urn:proxbus:soak", Verb: verb, Actor: "soak", Time: time.Now().UTC(), Data: json.RawMessage(data)}
	sub, err := nc.SubscribeSync(subjects.Result(cmd.Ref()))
	if err != nil {
		return events.Result{}, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	m, err := events.EncodeBinary(subjects, cmd)
	if err != nil {
		return events.Result{}, err
	}
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = js.PublishMsg(pctx, m) // the same Nats-Msg-Id: a retry is deduplicated
		cancel()
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Second)
	}
	if err != nil {
		return events.Result{}, fmt.Errorf("%s: publish: %w", verb, err)
	}
	for {
		msg, err := sub.NextMsg(time.Minute)
		if err != nil {
			return events.Result{}, fmt.Errorf("%s: no result: %w", verb, err)
		}
		ev, err := events.ParseEvent(msg.Data)
		if err != nil {
			continue
		}
		var r events.Result
		if json.Unmarshal(ev.Data, &r) == nil {
			return r, nil
		}
	}
}

// startSchedule makes the soak's schedule.
func startSchedule(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, subjects events.Subjects, run string) error {
	r, err := scheduleControl(ctx, nc, js, subjects, "schedule.add", "schedule-add-"+run,
		`{"name":"`+soakSchedule+`","every":"1s","verb":"vm.list","endpoint_id":1,"data":{}}`)
	if err == nil && r.Status != 201 {
		err = fmt.Errorf("schedule.add: %d %s %s", r.Status, r.Reason, r.Detail)
	}
	return err
}

// stopSchedule removes the soak's schedule.
func stopSchedule(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, subjects events.Subjects, run string) error {
	r, err := scheduleControl(ctx, nc, js, subjects, "schedule.remove", "schedule-remove-"+run, `{"name":"`+soakSchedule+`"}`)
	if err == nil && r.Status != 200 {
		err = fmt.Errorf("schedule.remove: %d %s %s", r.Status, r.Reason, r.Detail)
	}
	return err
}

// scheduleReport is what became of the soak schedule's firings.
type scheduleReport struct {
	firings  int
	answered map[string]int // "status result reason" of the first-hand answers → count
	// notOne are firings without exactly one first-hand result (a firing run twice has two).
	notOne []string
	// gaps counts consecutive firings more than a second apart, longest the longest such gap.
	gaps    int
	longest time.Duration
	// first and last are the first and the last firing times.
	first, last time.Time
}

// checkSchedule reads the firings of the soak schedule from the collected results.
func checkSchedule(c *collected) scheduleReport {
	rep := scheduleReport{answered: map[string]int{}}
	prefix := soakSchedule + "."
	var times []time.Time
	for id, rs := range c.results {
		if !strings.HasPrefix(id, prefix) {
			continue
		}
		rep.firings++
		fh := firstHand(rs)
		if len(fh) != 1 {
			rep.notOne = append(rep.notOne, fmt.Sprintf("%s: %d first-hand results", id, len(fh)))
		}
		if len(fh) > 0 {
			r := fh[0].res
			rep.answered[strings.TrimSpace(fmt.Sprintf("%d %s %s", r.Status, r.Result, r.Reason))]++
		}
		if t, err := time.Parse(events.FiringTimeLayout, strings.TrimPrefix(id, prefix)); err == nil {
			times = append(times, t)
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	sort.Strings(rep.notOne)
	for i := 1; i < len(times); i++ {
		if d := times[i].Sub(times[i-1]); d > time.Second {
			rep.gaps++
			rep.longest = max(rep.longest, d)
		}
	}
	if len(times) > 0 {
		rep.first, rep.last = times[0], times[len(times)-1]
	}
	return rep
}

// failed reports whether a firing was not answered exactly once, or the schedule stopped
// firing before the last NATS leader kill was over (until stopped: when it was removed).
func (s scheduleReport) failed(until time.Time) bool {
	return len(s.notOne) > 0 || s.firings == 0 || s.last.Before(until)
}

func (s scheduleReport) print(w io.Writer, until time.Time) {
	fmt.Fprintf(w, "\n== scheduled commands (%s, every 1s) ==\n", soakSchedule)
	fmt.Fprintf(w, "  %d firings from %s to %s; %d gaps of more than a second (longest %s)\n", s.firings,
		s.first.Format("15:04:05"), s.last.Format("15:04:05"), s.gaps, s.longest)
	for _, k := range sortedKeys(s.answered) {
		fmt.Fprintf(w, "  %6d  %s\n", s.answered[k], k)
	}
	listSome(w, "firings not answered exactly once", s.notOne)
	if s.last.Before(until) {
		fmt.Fprintf(w, "  the schedule stopped firing at %s, before the faults ended at %s\n", s.last.Format("15:04:05"), until.Format("15:04:05"))
	}
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
