package testenv

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// clusterWait bounds every wait of a [Cluster] (formation, elections, a restart catching up).
// It is a safety net against a hung test, not a timed assertion.
const clusterWait = 30 * time.Second

// Cluster is a JetStream cluster of in-process NATS servers on loopback, each with its own
// client port, cluster (route) port and store directory under the test's temporary directory.
// Stopped servers keep their ports and store, so [Cluster.Restart] brings the same server back,
// as an operator's restart would. All servers are shut down when the test ends.
type Cluster struct {
	t testing.TB
	// Name is the cluster's name (the routes' `cluster.name`).
	Name string
	// URL lists every server's client URL, comma-separated: nats.Connect accepts it and moves
	// to another server when the one it uses goes away.
	URL string

	mu      sync.Mutex
	servers []*server.Server // nil where stopped
	opts    []clusterNode
}

// clusterNode is what a server needs to be started again identically.
type clusterNode struct {
	name                    string
	clientPort, clusterPort int
	storeDir                string
	routes                  string
}

// StartCluster starts n (≥ 3 for a quorum that survives one loss) JetStream servers routed to
// each other and returns once every route is up, a JetStream meta leader is elected and it knows
// all n peers. The test fails when the cluster does not form.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("StartCluster: n = %d, want at least 1", n)
	}
	ports := freePorts(t, 2*n)
	routes := make([]string, n)
	for i := range n {
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", ports[n+i])
	}
	c := &Cluster{t: t, Name: "proxbus-test-" + randomHex(t, 3), servers: make([]*server.Server, n)}
	urls := make([]string, n)
	for i := range n {
		c.opts = append(c.opts, clusterNode{
			name: fmt.Sprintf("%s-n%d", c.Name, i), clientPort: ports[i], clusterPort: ports[n+i],
			storeDir: t.TempDir(), routes: strings.Join(routes, ","),
		})
		urls[i] = fmt.Sprintf("nats://127.0.0.1:%d", ports[i])
	}
	c.URL = strings.Join(urls, ",")
	t.Cleanup(c.shutdownAll)
	for i := range n {
		c.start(i)
	}
	c.waitFormed()
	return c
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

func (c *Cluster) start(i int) {
	c.t.Helper()
	o := c.opts[i]
	srv, err := server.NewServer(&server.Options{
		ServerName: o.name,
		Host:       "127.0.0.1",
		Port:       o.clientPort,
		JetStream:  true,
		StoreDir:   o.storeDir,
		MaxPayload: 4 << 20,
		NoLog:      true,
		NoSigs:     true,
		Cluster:    server.ClusterOpts{Name: c.Name, Host: "127.0.0.1", Port: o.clusterPort},
		Routes:     server.RoutesFromStr(o.routes),
	})
	if err != nil {
		c.t.Fatalf("cluster server %s: %v", o.name, err)
	}
	go srv.Start() // owned by srv: Shutdown stops it and WaitForShutdown waits for it.
	if !srv.ReadyForConnections(clusterWait) {
		srv.Shutdown()
		c.t.Fatalf("cluster server %s not ready for clients", o.name)
	}
	c.mu.Lock()
	c.servers[i] = srv
	c.mu.Unlock()
}

func (c *Cluster) shutdownAll() {
	for i := range c.opts {
		c.stop(i)
	}
}

func (c *Cluster) stop(i int) {
	c.mu.Lock()
	srv := c.servers[i]
	c.servers[i] = nil
	c.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// running returns the servers that are up, with their indexes.
func (c *Cluster) running() map[int]*server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[int]*server.Server, len(c.servers))
	for i, s := range c.servers {
		if s != nil {
			out[i] = s
		}
	}
	return out
}

// Server returns server i, or nil while it is stopped.
func (c *Cluster) Server(i int) *server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.servers[i]
}

// ServerName is server i's name, as JetStream reports peers and leaders.
func (c *Cluster) ServerName(i int) string { return c.opts[i].name }

// MetaLeader is the index of the running server that leads the JetStream meta group, or -1.
func (c *Cluster) MetaLeader() int {
	for i, s := range c.running() {
		if s.JetStreamIsLeader() {
			return i
		}
	}
	return -1
}

// StreamLeader is the index of the running server that leads stream (global account), or -1.
func (c *Cluster) StreamLeader(stream string) int {
	for i, s := range c.running() {
		if s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return i
		}
	}
	return -1
}

// WaitStreamLeader waits until stream has a leader among the running servers and returns its
// index; the test fails when none is elected.
func (c *Cluster) WaitStreamLeader(stream string) int {
	c.t.Helper()
	var leader int
	c.waitFor("a leader of stream "+stream, func() bool {
		leader = c.StreamLeader(stream)
		return leader >= 0
	})
	return leader
}

// WaitStreamCurrent waits until every running server's replica of stream is current with
// its leader (after a restart: caught up).
func (c *Cluster) WaitStreamCurrent(stream string) {
	c.t.Helper()
	c.waitFor("every replica of stream "+stream+" to be current", func() bool {
		if c.StreamLeader(stream) < 0 {
			return false
		}
		for _, s := range c.running() {
			if !s.JetStreamIsStreamCurrent(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
				return false
			}
		}
		return true
	})
}

// Stop shuts server i down (its port and store are kept for [Cluster.Restart]).
func (c *Cluster) Stop(i int) {
	c.t.Helper()
	if i < 0 || i >= len(c.opts) {
		c.t.Fatalf("Cluster.Stop(%d): no such server", i)
	}
	c.stop(i)
}

// Restart starts the stopped server i again with the same name, ports and store, and waits
// until the cluster has formed again with it.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if c.Server(i) != nil {
		c.t.Fatalf("Cluster.Restart(%d): the server is running", i)
	}
	c.start(i)
	c.waitFormed()
}

// Connect opens a client connection to the whole cluster (reconnecting forever, to any
// server) and its JetStream context, closed when the test ends.
func (c *Cluster) Connect() (*nats.Conn, jetstream.JetStream) {
	c.t.Helper()
	nc, err := nats.Connect(c.URL, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		c.t.Fatalf("connect cluster: %v", err)
	}
	c.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		c.t.Fatalf("jetstream: %v", err)
	}
	return nc, js
}

// waitFormed waits until every running server has a route to every other running server and
// is current with the meta group, whose leader knows every peer of the cluster.
func (c *Cluster) waitFormed() {
	c.t.Helper()
	c.waitFor("the cluster to form", func() bool {
		up := c.running()
		for _, s := range up {
			if s.NumRoutes() < len(up)-1 || !s.JetStreamIsCurrent() {
				return false
			}
		}
		l := c.MetaLeader()
		if l < 0 {
			return false
		}
		return len(up[l].JetStreamClusterPeers()) == len(c.opts)
	})
}

// waitFor polls cond until it holds; the test fails after clusterWait.
func (c *Cluster) waitFor(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(clusterWait)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("testenv cluster: timed out waiting for %s", what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}
