package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/testenv"
)

// haRedis is a replicated Redis for the failover tests: the URL replicas take, the key prefix
// they use, and how to SIGKILL the primary holding proxbus's keys and bring it back.
type haRedis struct {
	url, prefix string
	// kill SIGKILLs the primary; the function it returns waits until another one serves,
	// restarts the old one and waits until it is a replica again.
	kill func(ctx context.Context) (restore func(ctx context.Context))
}

func sentinelRedis(t *testing.T, prefix string) haRedis {
	t.Helper()
	s := testenv.StartSentinel(t, testenv.SentinelOptions{})
	return haRedis{
		url:    "redis+sentinel://" + strings.Join(s.SentinelAddrs, ",") + "/" + s.MasterName,
		prefix: prefix,
		kill: func(ctx context.Context) func(context.Context) {
			old := s.Primary(ctx)
			s.Kill(old)
			return func(ctx context.Context) {
				s.WaitFailover(ctx, old)
				s.Restart(old)
				s.WaitReplicas(ctx, 2)
			}
		},
	}
}

func clusterRedis(t *testing.T, prefix string) haRedis {
	t.Helper()
	c := testenv.StartRedisCluster(t, testenv.ClusterOptions{Primaries: 3, ReplicasPerPrimary: 1})
	tagged := "{" + prefix + "}"
	return haRedis{
		url:    "redis+cluster://" + strings.Join(c.Seeds(), ","),
		prefix: tagged,
		kill: func(ctx context.Context) func(context.Context) {
			old := c.PrimaryFor(ctx, tagged+":fence")
			c.Kill(old)
			return func(ctx context.Context) {
				c.WaitFailover(ctx, old)
				c.Restart(old)
			}
		},
	}
}

// onHA points a replica at r, waiting for one replica's acknowledgement of every change.
func onHA(r haRedis) tune {
	return func(c *app.Config) {
		c.RedisURL, c.Store.Prefix = r.url, r.prefix
		c.Store.MinReplicas, c.Store.ReplicaTimeout = 1, 500*time.Millisecond
	}
}

// TestRedisFailoverKeepsThePromises SIGKILLs the Redis primary in the middle of a load of
// write commands on two replicas, with Sentinel and with Redis Cluster, and sends the second
// half of the load while no primary serves (a failover takes over a second): the failover
// loses no command, writes no storage twice, gives each command one first-hand result, and
// leaves no journal entry in_progress; the commands that met it say they wait for the store,
// none blames Proxmox; the old primary comes back as a replica.
func TestRedisFailoverKeepsThePromises(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		start func(*testing.T, string) haRedis
	}{{"sentinel", sentinelRedis}, {"cluster", clusterRedis}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			r := tc.start(t, e.redis.Prefix)
			e.replica("r1", onHA(r))
			e.replica("r2", onHA(r))
			const n = 40
			cmds := make([]events.Command, n)
			for i := range cmds {
				cmds[i] = e.command(pbs(fmt.Sprintf("ha-%s-%d", tc.name, i)))
			}
			for _, c := range cmds[:n/2] {
				e.publish(c)
			}
			e.result(cmds[0]) // the load is under way
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			restore := r.kill(ctx)
			for _, c := range cmds[n/2:] { // the second half arrives while no primary serves
				e.publish(c)
			}
			restore(ctx)
			checkPromises(t, e, cmds)
			waited := 0
			for _, c := range cmds {
				steps := e.steps(c)
				for _, st := range steps {
					if strings.Contains(st.Detail, "Proxmox") {
						t.Errorf("%s: step %s %s %q blames Proxmox for the store's failover", c.ID, st.Step, st.Status, st.Detail)
					}
				}
				for _, st := range steps {
					if st.Step == "store" && st.Status == events.StepRetrying {
						waited++
						break
					}
				}
			}
			if waited == 0 {
				t.Error("no command waited for the store: none met the failover, so the test proves nothing")
			}
			t.Logf("%d of %d commands waited for the store during the failover", waited, n)
		})
	}
}

// checkPromises waits for every command's result and checks the soak's promises: each has
// exactly one first-hand result, 201 created; each storage was created by one POST; no
// journal entry is in_progress.
func checkPromises(t *testing.T, e *env, cmds []events.Command) {
	t.Helper()
	for _, c := range cmds {
		e.resultFor(c.Source, c.ID)
	}
	firstHand := map[string][]events.Result{}
	for _, raw := range e.streamMessages(e.subjects.EventsStream(), "") {
		ev, err := events.ParseEvent(raw.Data)
		if err != nil || !strings.HasSuffix(ev.Type, ".result") {
			continue
		}
		var res events.Result
		if err := json.Unmarshal(ev.Data, &res); err != nil {
			t.Fatal(err)
		}
		if !res.Replayed {
			firstHand[res.CommandID] = append(firstHand[res.CommandID], res)
		}
	}
	posts := map[string]int{}
	for _, rec := range e.pve.RequestLog() {
		if rec.Method == "POST" && rec.Path == "/storage" {
			posts[rec.Params.Get("storage")]++
		}
	}
	for _, c := range cmds {
		rs := firstHand[c.ID]
		if len(rs) != 1 {
			t.Errorf("%s: %d first-hand results, want 1", c.ID, len(rs))
			continue
		}
		if rs[0].Status != 201 {
			t.Errorf("%s: %d %s %s, want 201 created", c.ID, rs[0].Status, rs[0].Result, rs[0].Reason)
		}
		var data struct{ Storage string }
		_ = json.Unmarshal(c.Data, &data)
		if posts[data.Storage] != 1 {
			t.Errorf("storage %s: %d POST /storage, want 1", data.Storage, posts[data.Storage])
		}
	}
	for _, je := range e.netbox.JournalEntries() {
		if strings.Contains(je.Comments, "- result: in_progress") {
			t.Errorf("journal entry %d still in_progress", je.ID)
		}
	}
}

// TestReplicasAwayCommandsWait: while no Redis replica acknowledges the store's changes,
// write commands wait (a retrying store step, no attempt spent, nothing sent to Proxmox);
// when the replicas are back they run once each.
func TestReplicasAwayCommandsWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := testenv.StartSentinel(t, testenv.SentinelOptions{})
	r := haRedis{url: "redis+sentinel://" + strings.Join(s.SentinelAddrs, ",") + "/" + s.MasterName, prefix: e.redis.Prefix}
	e.replica("r1", onHA(r))
	warm := e.command(pbs("ha-warm"))
	if res := e.send(warm); res.Status != 201 {
		t.Fatalf("before: %d %s", res.Status, res.Reason)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	primary := s.Primary(ctx)
	var replicas []string
	for _, a := range s.Addrs() {
		if a != primary {
			replicas = append(replicas, a)
			s.Kill(a)
		}
	}
	cmds := []events.Command{e.command(pbs("ha-wait-1")), e.command(pbs("ha-wait-2"))}
	for _, c := range cmds {
		e.publish(c)
	}
	eventually(t, 20*time.Second, "a retrying store step of each waiting command", func() bool {
		for _, c := range cmds {
			found := false
			for _, st := range e.steps(c) {
				found = found || (st.Step == "store" && st.Status == events.StepRetrying)
			}
			if !found {
				return false
			}
		}
		return true
	})
	if n := e.pve.Requests("POST", "/storage"); n != 1 {
		t.Fatalf("%d POST /storage while no replica acknowledged, want only the warm-up's", n)
	}
	for _, a := range replicas {
		s.Restart(a)
	}
	s.WaitReplicas(ctx, 2)
	checkPromises(t, e, append(cmds, warm))
	for _, c := range cmds {
		for _, st := range e.steps(c) {
			if st.Attempt != 1 {
				t.Errorf("%s: step %s %s in attempt %d: waiting spent an attempt", c.ID, st.Step, st.Status, st.Attempt)
			}
		}
	}
}
