package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/proxbus/proxbus/bench/internal/harness"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis topologies of --redis.
const (
	redisSingle   = "single"
	redisSentinel = "sentinel"
	redisCluster  = "cluster"
)

// sentinelMaster is the name the soak's Sentinels monitor the primary under.
const sentinelMaster = "soak"

// clusterTag is the hash tag of every proxbus key on the soak's Redis Cluster (the default
// prefix there): its slot's primary is the one the Redis fault kills.
const clusterTag = "{proxbus}"

// redisNode is one redis-server process: a data node or a Sentinel.
type redisNode struct {
	proc *proc
	port int
}

func (n *redisNode) addr() string { return "127.0.0.1:" + strconv.Itoa(n.port) }

// redisSet is the soak's Redis: one server (single), a primary with two replicas watched by
// three Sentinels (sentinel), or three primaries with a replica each (cluster). Every data node
// keeps an append-only file synced on every write, as operators should run it, so a node
// restarted before a failover never comes back empty.
type redisSet struct {
	mode      string
	bin       string
	dir       string
	nodes     []*redisNode // data nodes; for sentinel nodes[0] is the first primary
	sentinels []*redisNode
}

// newRedisSet prepares (does not start) the processes of mode in dir.
func newRedisSet(mode, bin, dir string, ephemeral bool) (*redisSet, error) {
	r := &redisSet{mode: mode, bin: bin, dir: dir}
	data := map[string]int{redisSingle: 1, redisSentinel: 3, redisCluster: 6}[mode]
	for i := range data {
		port, err := harness.FreePort()
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("redis-%d", i+1)
		if mode == redisSingle {
			name = "redis-server"
		}
		nodeDir := filepath.Join(dir, name)
		if err := os.MkdirAll(nodeDir, 0o700); err != nil {
			return nil, err
		}
		conf := []string{"port " + strconv.Itoa(port), "bind 127.0.0.1", "dir " + nodeDir, `save ""`,
			"appendonly yes", "appendfsync always"}
		if ephemeral {
			conf = []string{"port " + strconv.Itoa(port), "bind 127.0.0.1", "dir " + nodeDir, `save ""`, "appendonly no"}
		}
		switch {
		case mode == redisSentinel && i > 0:
			conf = append(conf, "replicaof 127.0.0.1 "+strconv.Itoa(r.nodes[0].port))
		case mode == redisCluster:
			conf = append(conf, "cluster-enabled yes", "cluster-config-file nodes.conf", "cluster-node-timeout 2000")
		}
		path := filepath.Join(nodeDir, "redis.conf") // a file: Sentinel rewrites it on a failover
		if err := os.WriteFile(path, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
			return nil, err
		}
		r.nodes = append(r.nodes, &redisNode{port: port, proc: &proc{name: name, path: bin, logPath: filepath.Join(dir, name+".log"), args: []string{path}}})
	}
	if mode == redisSentinel {
		sentinelBin, args := bin, []string{"--sentinel"}
		if p, err := exec.LookPath("redis-sentinel"); err == nil {
			sentinelBin, args = p, nil
		}
		for i := range 3 {
			port, err := harness.FreePort()
			if err != nil {
				return nil, err
			}
			name := fmt.Sprintf("sentinel-%d", i+1)
			conf := []string{"port " + strconv.Itoa(port), "bind 127.0.0.1", "dir " + dir, "sentinel resolve-hostnames no",
				"sentinel monitor " + sentinelMaster + " 127.0.0.1 " + strconv.Itoa(r.nodes[0].port) + " 2",
				"sentinel down-after-milliseconds " + sentinelMaster + " 1000",
				"sentinel failover-timeout " + sentinelMaster + " 5000",
				"sentinel parallel-syncs " + sentinelMaster + " 1"}
			path := filepath.Join(dir, name+".conf")
			if err := os.WriteFile(path, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
				return nil, err
			}
			r.sentinels = append(r.sentinels, &redisNode{port: port, proc: &proc{name: name, path: sentinelBin, logPath: filepath.Join(dir, name+".log"), args: append([]string{path}, args...)}})
		}
	}
	return r, nil
}

// all is every process of the set.
func (r *redisSet) all() []*redisNode {
	return append(append([]*redisNode(nil), r.nodes...), r.sentinels...)
}

// start starts every process and waits until the set serves: the cluster created and its
// state ok, the Sentinels agreeing on the primary with both replicas attached.
func (r *redisSet) start(ctx context.Context) error {
	for _, n := range r.all() {
		if err := n.proc.start(); err != nil {
			return err
		}
	}
	for _, n := range r.all() {
		if err := harness.WaitPort(ctx, n.port, 15*time.Second); err != nil {
			return fmt.Errorf("%s: %w", n.proc.name, err)
		}
	}
	switch r.mode {
	case redisCluster:
		args := []string{"--cluster", "create"}
		for _, n := range r.nodes {
			args = append(args, n.addr())
		}
		args = append(args, "--cluster-replicas", "1", "--cluster-yes")
		if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("redis-cli --cluster create: %w: %s", err, out)
		}
		return r.waitHealthy(ctx, 60*time.Second)
	case redisSentinel:
		return r.waitHealthy(ctx, 60*time.Second)
	}
	return nil
}

// url is the --redis-url of the replicas.
func (r *redisSet) url() string {
	switch r.mode {
	case redisSentinel:
		addrs := make([]string, len(r.sentinels))
		for i, s := range r.sentinels {
			addrs[i] = s.addr()
		}
		return "redis+sentinel://" + strings.Join(addrs, ",") + "/" + sentinelMaster
	case redisCluster:
		addrs := make([]string, len(r.nodes))
		for i, n := range r.nodes {
			addrs[i] = n.addr()
		}
		return "redis+cluster://" + strings.Join(addrs, ",")
	}
	return "redis://" + r.nodes[0].addr() + "/0"
}

// client is a client of the set's current primary (primaries, for a cluster).
func (r *redisSet) client() redis.UniversalClient {
	switch r.mode {
	case redisSentinel:
		addrs := make([]string, len(r.sentinels))
		for i, s := range r.sentinels {
			addrs[i] = s.addr()
		}
		return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: sentinelMaster, SentinelAddrs: addrs})
	case redisCluster:
		addrs := make([]string, len(r.nodes))
		for i, n := range r.nodes {
			addrs[i] = n.addr()
		}
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	}
	return redis.NewClient(&redis.Options{Addr: r.nodes[0].addr()})
}

// primary is the data node that holds proxbus's keys now.
func (r *redisSet) primary(ctx context.Context) (*redisNode, error) {
	var addr string
	switch r.mode {
	case redisSingle:
		return r.nodes[0], nil
	case redisSentinel:
		for _, s := range r.sentinels {
			c := redis.NewSentinelClient(&redis.Options{Addr: s.addr()})
			got, err := c.GetMasterAddrByName(ctx, sentinelMaster).Result()
			_ = c.Close()
			if err == nil && len(got) == 2 {
				addr = got[0] + ":" + got[1]
				break
			}
		}
	case redisCluster:
		cc := r.client().(*redis.ClusterClient) // a new one: it learns the slots as they are now
		m, err := cc.MasterForKey(ctx, clusterTag)
		if err == nil {
			addr = m.Options().Addr
		}
		_ = cc.Close()
	}
	for _, n := range r.nodes {
		if n.addr() == addr {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no primary known (answer %q)", addr)
}

// role is what INFO replication says a node is ("master", "slave") and, for a primary, how
// many replicas are attached.
func role(ctx context.Context, n *redisNode) (string, int, error) {
	c := redis.NewClient(&redis.Options{Addr: n.addr(), DialTimeout: time.Second, ReadTimeout: time.Second})
	defer c.Close()
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return "", 0, err
	}
	var r string
	replicas := 0
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "role:"); ok {
			r = v
		}
		if v, ok := strings.CutPrefix(line, "connected_slaves:"); ok {
			replicas, _ = strconv.Atoi(v)
		}
	}
	return r, replicas, nil
}

// waitHealthy waits until proxbus's keys have a writable primary with its replicas attached
// (two for sentinel, one for cluster) and, for a cluster, cluster_state:ok on every node.
func (r *redisSet) waitHealthy(ctx context.Context, limit time.Duration) error {
	want := map[string]int{redisSentinel: 2, redisCluster: 1}[r.mode]
	deadline := time.Now().Add(limit)
	why := ""
	for time.Now().Before(deadline) {
		why = r.unhealthy(ctx, want)
		if why == "" {
			return nil
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
	return fmt.Errorf("redis %s not healthy after %s: %s", r.mode, limit, why)
}

// unhealthy says why the set is not healthy, "" when it is.
func (r *redisSet) unhealthy(ctx context.Context, replicas int) string {
	p, err := r.primary(ctx)
	if err != nil {
		return err.Error()
	}
	if ro, n, err := role(ctx, p); err != nil || ro != "master" || n < replicas {
		return fmt.Sprintf("%s: role %q with %d replicas (%v)", p.addr(), ro, n, err)
	}
	if r.mode == redisCluster {
		for _, n := range r.nodes {
			c := redis.NewClient(&redis.Options{Addr: n.addr(), DialTimeout: time.Second})
			info, err := c.ClusterInfo(ctx).Result()
			_ = c.Close()
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				return n.addr() + ": cluster state not ok"
			}
		}
	}
	return ""
}

// failover SIGKILLs the primary holding proxbus's keys, waits until another node serves them
// (Sentinel's or the cluster's failover), then starts the killed node again, which comes back
// as a replica, and waits until the set is whole.
func (r *redisSet) failover(ctx context.Context, logf func(string, ...any)) error {
	old, err := r.primary(ctx)
	if err != nil {
		return err
	}
	logf("fault: SIGKILL the Redis primary %s (%s)", old.proc.name, r.mode)
	start := time.Now()
	if err := old.proc.kill(); err != nil && !errors.Is(err, errNotRunning) {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if p, err := r.primary(ctx); err == nil && p != old {
			if ro, _, err := role(ctx, p); err == nil && ro == "master" {
				logf("fault: %s is the primary %s after the kill", p.proc.name, time.Since(start).Round(100*time.Millisecond))
				break
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("no failover within 60s of killing %s", old.proc.name)
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
	if err := old.proc.start(); err != nil {
		return err
	}
	if err := harness.WaitPort(ctx, old.port, 15*time.Second); err != nil {
		return err
	}
	if err := r.waitHealthy(ctx, 60*time.Second); err != nil {
		return err
	}
	if ro, _, err := role(ctx, old); err != nil || ro != "slave" {
		return fmt.Errorf("%s came back as %q, not a replica (%v)", old.proc.name, ro, err)
	}
	logf("fault: %s is back as a replica", old.proc.name)
	return nil
}

// heal starts every process of the set that is not running.
func (r *redisSet) heal() {
	for _, n := range r.all() {
		if !n.proc.running() {
			_ = n.proc.start()
		}
	}
}

// stop stops every process.
func (r *redisSet) stop() {
	for _, n := range r.all() {
		_ = n.proc.stop(5 * time.Second)
	}
}
