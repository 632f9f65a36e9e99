package handlers

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/redis/go-redis/v9"
)

// storeOutage is a go-redis hook that fails every command with a refused connection while it
// is down, as a client sees a Redis primary that was SIGKILLed.
type storeOutage struct{ down atomic.Bool }

// errRefused is what a dead Redis answers.
var errRefused = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

func (o *storeOutage) DialHook(next redis.DialHook) redis.DialHook { return next }

func (o *storeOutage) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if o.down.Load() {
			cmd.SetErr(errRefused)
			return errRefused
		}
		return next(ctx, cmd)
	}
}

func (o *storeOutage) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if o.down.Load() {
			for _, c := range cmds {
				c.SetErr(errRefused)
			}
			return errRefused
		}
		return next(ctx, cmds)
	}
}

// TestStoreDownAtTheDispatchMark: a Redis outage that begins after a write command's
// write-ahead journal entry, so that its write's dispatch cannot be marked, sends nothing to
// Proxmox; the command says it waits for the store (never that Proxmox is unavailable: it was
// not), spends no attempt, and when the store is back it writes once, reusing its journal
// entry, and is answered as without the outage.
func TestStoreDownAtTheDispatchMark(t *testing.T) {
	t.Parallel()
	e := newCrashEnv(t)
	tc := apiCallCase{verb: "storage.pbs.create", data: pbsData("pbs-outage")}
	cmd := crashCommand("outage-subject", tc)
	p := e.pipeline("r1", func(point string) {
		if strings.HasPrefix(point, crashJournaled+" ") {
			e.outage.down.Store(true) // the primary dies right after the entry is written
		}
	})
	p.cfg.After = func(d time.Duration) <-chan time.Time { // the pauses between its suspensions pass at once
		e.clock.Advance(d)
		ch := make(chan time.Time, 1)
		ch <- e.clock.Now()
		return ch
	}
	arrived := time.Now()
	d := p.Handle(context.Background(), cmd, events.Delivery{Number: 1, Stored: arrived, StreamSeq: 7})
	if !e.outage.down.Load() {
		t.Fatal("the command passed no journal crash point: the outage never began")
	}
	if d.Action != events.Redeliver {
		t.Fatalf("during the outage: %+v, want a redelivery", d)
	}
	if n := e.pve.Requests("POST", "/storage"); n != 0 {
		t.Fatalf("%d POST /storage although the dispatch was never marked", n)
	}
	steps := e.stream.stepsOf(cmd.Ref())
	last := steps[len(steps)-1]
	if last.Step != "store" || last.Status != events.StepRetrying || !strings.Contains(last.Detail, "the store is unavailable") {
		t.Errorf("last step %s %s %q, want store retrying: the store is unavailable", last.Step, last.Status, last.Detail)
	}
	for _, st := range steps {
		if strings.Contains(st.Detail, "Proxmox") {
			t.Errorf("step %s %s %q blames Proxmox for the store's outage", st.Step, st.Status, st.Detail)
		}
	}

	e.outage.down.Store(false)
	e.clock.Advance(time.Minute)
	if d := e.untilDone(e.pipeline("r2", nil), cmd, arrived, 2); d.Action != events.Ack {
		t.Fatalf("after the outage: %+v", d)
	}
	if n := e.pve.Requests("POST", "/storage"); n != 1 {
		t.Errorf("%d POST /storage, want 1", n)
	}
	res := e.stream.resultsOf(cmd.Ref())
	if len(res) != 1 || res[0].Status != 201 {
		t.Fatalf("results %+v, want one 201", res)
	}
	for _, st := range e.stream.stepsOf(cmd.Ref()) {
		if st.Attempt != 1 {
			t.Errorf("step %s %s in attempt %d: waiting for the store spent an attempt", st.Step, st.Status, st.Attempt)
		}
	}
	entries := e.observe(cmd, 0, d).entries
	if len(entries) != 1 || strings.Contains(entries[0].Comments, "in_progress") {
		t.Errorf("journal entries %+v, want one, finalized", entries)
	}
}
