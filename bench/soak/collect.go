package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/proxbus/proxbus/events"
)

// rawMsg is one stored stream message.
type rawMsg struct {
	subject string
	header  nats.Header
	data    []byte
}

// readStream returns every message the stream holds now, oldest first. Right after a cluster
// server's restart an ordered consumer may deliver nothing for a while, so a read that comes
// back short of the stream's message count is repeated, for up to 30 s.
func readStream(ctx context.Context, js jetstream.JetStream, name string) ([]rawMsg, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, want, err := readStreamOnce(ctx, js, name)
		if err == nil && uint64(len(out)) >= want {
			return out, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if err == nil {
				err = fmt.Errorf("stream %s: read %d of its %d messages", name, len(out), want)
			}
			return out, err
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// readStreamOnce reads the stream once with an ordered consumer; it returns what it read and
// how many messages the stream said it held.
func readStreamOnce(ctx context.Context, js jetstream.JetStream, name string) ([]rawMsg, uint64, error) {
	st, err := js.Stream(ctx, name)
	if err != nil {
		return nil, 0, fmt.Errorf("stream %s: %w", name, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("stream %s: %w", name, err)
	}
	last := info.State.LastSeq
	if info.State.Msgs == 0 {
		return nil, 0, nil
	}
	c, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return nil, 0, fmt.Errorf("stream %s: %w", name, err)
	}
	var out []rawMsg
	var seen uint64
	for {
		want := min(uint64(1000), last-seen)
		batch, err := c.Fetch(int(want), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return out, info.State.Msgs, fmt.Errorf("stream %s: %w", name, err)
		}
		n := 0
		var seq uint64
		for m := range batch.Messages() {
			n++
			out = append(out, rawMsg{subject: m.Subject(), header: m.Headers(), data: m.Data()})
			if md, err := m.Metadata(); err == nil {
				seq = md.Sequence.Stream
				seen = seq
			}
		}
		if seq >= last || n == 0 {
			return out, info.State.Msgs, nil
		}
	}
}

// resultEv is a result event as the soak reads it back.
type resultEv struct {
	eventID string
	at      time.Time
	res     events.Result
}

// powerSteps are the step names of the guest power verbs' writes (handlers/vm_power.go).
var powerSteps = map[string]bool{"start_vm": true, "stop_vm": true, "reboot_vm": true, "suspend_vm": true, "resume_vm": true}

// Step names of the other writes on a guest (handlers/vm_backup.go, vm_migrate.go,
// vm_delete.go; vm.delete's stop_first stop is stop_vm, a power step).
var (
	backupSteps  = map[string]bool{"backup_vm": true}
	migrateSteps = map[string]bool{"migrate_vm": true}
	deleteSteps  = map[string]bool{"stop_vm": true, "delete_vm": true}
)

// guestWriteSteps are the steps whose started events checkGuestWrites times writes by.
var guestWriteSteps = func() map[string]bool {
	out := map[string]bool{}
	for _, m := range []map[string]bool{powerSteps, backupSteps, migrateSteps, deleteSteps} {
		maps.Copy(out, m)
	}
	return out
}()

// stepLine is a step event, for the dump.
type stepLine struct {
	EventID, Command, Step, Status, UPID string
	At                                   time.Time
}

// collected is what the soak read back at the end.
type collected struct {
	results map[string][]resultEv  // command id → its result events
	started map[string][]time.Time // command id → when its guestWriteSteps started (status "started")
	steps   []stepLine
	upids   map[string]string // Proxmox task UPID → the command whose step or result names it
	// journaled maps a command id to when its journal entries were created (entryTimes): a
	// command on a guest writes its entry after it holds the guest, before its write.
	journaled map[string][]time.Time
	dlq       map[string][]string // command id (ce-id) → dead-letter reasons
	events    []rawMsg
	dlqMsgs   []rawMsg
	repairs   int // journal repaired events
}

func collect(ctx context.Context, js jetstream.JetStream, subjects events.Subjects) (*collected, error) {
	c := &collected{results: map[string][]resultEv{}, started: map[string][]time.Time{}, dlq: map[string][]string{}}
	var err error
	if c.events, err = readStream(ctx, js, subjects.EventsStream()); err != nil {
		return nil, err
	}
	for _, m := range c.events {
		switch {
		case strings.HasSuffix(m.subject, ".result"):
			ev, err := events.ParseEvent(m.data)
			if err != nil {
				continue
			}
			var r events.Result
			if json.Unmarshal(ev.Data, &r) != nil {
				continue
			}
			c.results[r.CommandID] = append(c.results[r.CommandID], resultEv{eventID: ev.ID, at: ev.Time, res: r})
		case strings.HasSuffix(m.subject, ".step"):
			ev, err := events.ParseEvent(m.data)
			if err != nil {
				continue
			}
			var st events.Step
			if json.Unmarshal(ev.Data, &st) != nil {
				continue
			}
			c.steps = append(c.steps, stepLine{EventID: ev.ID, Command: st.CommandID, Step: st.Step, Status: string(st.Status), UPID: st.UPID, At: st.At})
			if st.Status == events.StepStarted && guestWriteSteps[st.Step] {
				c.started[st.CommandID] = append(c.started[st.CommandID], st.At)
			}
		case strings.HasSuffix(m.subject, ".journal"):
			c.repairs++
		}
	}
	c.upids = taskOwners(c.steps, c.results)
	if c.dlqMsgs, err = readStream(ctx, js, subjects.DLQStream()); err != nil {
		return nil, err
	}
	for _, m := range c.dlqMsgs {
		id := dlqCommandID(m)
		c.dlq[id] = append(c.dlq[id], m.header.Get("Proxbus-Dlq-Reason"))
	}
	return c, nil
}

// leak is one place a canary was found.
type leak struct {
	where string
	what  string
}

func (l leak) String() string { return l.where + ": " + l.what }

// scanRedis returns every Redis key or value holding the canary.
func scanRedis(ctx context.Context, rdb redis.UniversalClient, canary string) (keys int, found []leak, err error) {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			n, f, err := scanRedis(ctx, c, canary)
			mu.Lock()
			defer mu.Unlock()
			keys += n
			found = append(found, f...)
			return err
		})
		return keys, found, err
	}
	iter := rdb.Scan(ctx, 0, "*", 500).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		keys++
		if strings.Contains(k, canary) {
			found = append(found, leak{"redis key", k})
		}
		typ, err := rdb.Type(ctx, k).Result()
		if err != nil {
			continue
		}
		var vals []string
		switch typ {
		case "string":
			v, _ := rdb.Get(ctx, k).Result()
			vals = []string{v}
		case "hash":
			m, _ := rdb.HGetAll(ctx, k).Result()
			for f, v := range m {
				vals = append(vals, f, v)
			}
		case "list":
			vals, _ = rdb.LRange(ctx, k, 0, -1).Result()
		case "set":
			vals, _ = rdb.SMembers(ctx, k).Result()
		case "zset":
			vals, _ = rdb.ZRange(ctx, k, 0, -1).Result()
		case "stream":
			xs, _ := rdb.XRange(ctx, k, "-", "+").Result()
			for _, x := range xs {
				for f, v := range x.Values {
					vals = append(vals, f, fmt.Sprint(v))
				}
			}
		}
		for _, v := range vals {
			if strings.Contains(v, canary) {
				found = append(found, leak{"redis value", k})
				break
			}
		}
	}
	return keys, found, iter.Err()
}

// scanMsgs returns the messages whose subject, headers or body hold the canary.
func scanMsgs(where string, msgs []rawMsg, canary string) []leak {
	var out []leak
	for _, m := range msgs {
		hit := strings.Contains(m.subject, canary) || strings.Contains(string(m.data), canary)
		for k, vs := range m.header {
			for _, v := range vs {
				hit = hit || strings.Contains(k, canary) || strings.Contains(v, canary)
			}
		}
		if hit {
			out = append(out, leak{where, m.subject})
		}
	}
	return out
}

// scanFile counts the lines of a log file holding the canary.
func scanFile(path, canary string) (lines int, found []leak, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, nil, fmt.Errorf("read %s: %w", path, err)
	}
	for i, line := range strings.Split(string(b), "\n") {
		if line != "" {
			lines++
		}
		if strings.Contains(line, canary) {
			found = append(found, leak{path, fmt.Sprintf("line %d", i+1)})
		}
	}
	return lines, found, nil
}

// taskOwners maps every Proxmox task UPID that a step event or a result names to its command:
// a step names its command's task; a first-hand result names its own command's tasks; a replay
// without an Idempotency-Key repeats its own record and names them too, unless a step or a
// first-hand result claimed them (a replay with a key may repeat its twin's output: skipped).
func taskOwners(steps []stepLine, results map[string][]resultEv) map[string]string {
	out := map[string]string{}
	for _, s := range steps {
		if s.UPID != "" {
			out[s.UPID] = s.Command
		}
	}
	ownReplays := map[string]string{}
	for id, rs := range results {
		for _, r := range rs {
			for _, upid := range upidsIn(r.res.Output) {
				switch {
				case !r.res.Replayed:
					out[upid] = id
				case r.res.IdempotencyKey == "":
					ownReplays[upid] = id
				}
			}
		}
	}
	for upid, id := range ownReplays {
		if _, ok := out[upid]; !ok {
			out[upid] = id
		}
	}
	return out
}

// upidsIn returns every Proxmox task UPID in a result's output (e.g. the power verbs'
// "upids", vm.provision's "clone_upid"), at any depth.
func upidsIn(output json.RawMessage) []string {
	var v any
	if len(output) == 0 || json.Unmarshal(output, &v) != nil {
		return nil
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			if strings.HasPrefix(x, "UPID:") {
				out = append(out, x)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

// dlqCommandID is the id of the command a dead letter copies: its ce-id header (binary mode),
// else its original Nats-Msg-Id (the soak's duplicates add "-dup"), else the "id" of a JSON
// body (structured mode; the CloudEvents SDK sends no header at all).
func dlqCommandID(m rawMsg) string {
	if id := m.header.Get("ce-id"); id != "" {
		return id
	}
	if id := m.header.Get("Proxbus-Dlq-Msg-Id"); id != "" {
		return strings.TrimSuffix(id, "-dup")
	}
	var body struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(m.data, &body) == nil {
		return body.ID
	}
	return ""
}
