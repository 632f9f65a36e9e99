package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/proxbus/proxbus/internal/embedded"
	"github.com/proxbus/proxbus/internal/proxmox"
	simnetbox "github.com/proxbus/proxbus/internal/sim/netbox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
	"github.com/proxbus/proxbus/store"
)

// Demo credentials accepted by the simulators' demo scenario (contract §10).
const (
	DemoPVETokenID     = "proxbus@pve!demo"
	DemoPVEAuditToken  = "proxbus@pve!audit"
	DemoPVESecret      = "demo-secret"
	DemoNetBoxToken    = "0123456789abcdef0123456789abcdef01234567"
	demoSecretVariable = "PROXBUS_DEMO_SECRET"
)

// DefaultDevNATSPort is the port [StartDev] tries first for the embedded NATS.
const DefaultDevNATSPort = 4222

// deleteRunKeys removes this run's keys from the Redis given by URL: no later run uses its
// prefix, and they would otherwise stay there up to their TTLs (a day for finished commands).
func (e *DevEnv) deleteRunKeys() {
	rdb, err := RedisClient(e.RedisURL, Security{})
	if err != nil {
		return
	}
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	iter := rdb.Scan(ctx, 0, e.RedisKeyPrefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}

// DevOptions configures [StartDev]. The zero value of every field means its default.
type DevOptions struct {
	// RedisURL is a real Redis to use; empty starts the embedded, non-durable one.
	RedisURL string
	// NATSPort is tried first for the embedded NATS (default DefaultDevNATSPort); a free port
	// when it is taken (DevEnv.NATSPortTaken then says so), or when it is -1.
	NATSPort int
	// Logger receives the simulators' logs.
	Logger *slog.Logger
	// TaskDuration is how long each simulated Proxmox task runs (0: the simulator's default;
	// see simpve.Options.TaskDuration).
	TaskDuration time.Duration
}

// DevEnv is the infrastructure of `proxbus dev`: embedded NATS JetStream, a store, and both
// simulators with the demo cluster. JetStream keeps its files in a new temporary directory
// that Close removes.
type DevEnv struct {
	NATSURL   string
	RedisURL  string
	PVEURL    string
	NetBoxURL string
	// RedisEmbedded is true when the non-durable embedded Redis is in use.
	RedisEmbedded bool
	// RedisKeyPrefix is the prefix of this run's keys: in a Redis given by URL it is new each
	// run (proxbus-dev-<start time>), since a run's streams and simulators are new too and an
	// earlier run's leftovers (a guest lease of a command killed with it) must not hold this
	// one back.
	RedisKeyPrefix string
	// NATSPortTaken is the port asked for when it was taken and NATS listens on another one
	// (the port of NATSURL); 0 otherwise.
	NATSPortTaken int
	PVE           *simpve.Server
	NetBox        *simnetbox.Server
	// Images serves a demo cloud image on loopback for vm.provision's image source.
	Images DemoImage

	nats    *server.Server
	natsDir string // JetStream's temporary store directory, removed by Close
	redis   *miniredis.Miniredis
	stop    context.CancelFunc
	wg      sync.WaitGroup
	closer  []io.Closer
}

// StartDev starts the dev infrastructure. Close stops all of it.
func StartDev(opts DevOptions) (*DevEnv, error) {
	env := &DevEnv{}
	ok := false
	defer func() {
		if !ok {
			env.Close()
		}
	}()
	port := opts.NATSPort
	if port == 0 {
		port = DefaultDevNATSPort
	}
	if port > 0 && !embedded.PortFree("127.0.0.1", port) {
		env.NATSPortTaken, port = port, -1
	}
	dir, err := os.MkdirTemp("", "proxbus-nats-*")
	if err != nil {
		return nil, fmt.Errorf("embedded nats: store dir: %w", err)
	}
	env.natsDir = dir
	ns, err := embedded.StartNATS(embedded.NATSOptions{Port: port, StoreDir: dir})
	if err != nil {
		return nil, err
	}
	env.nats, env.NATSURL = ns, ns.ClientURL()

	if opts.RedisURL != "" {
		env.RedisURL = opts.RedisURL
		env.RedisKeyPrefix = fmt.Sprintf("proxbus-dev-%d", time.Now().UnixNano())
	} else {
		m, err := embedded.StartRedis()
		if err != nil {
			return nil, err
		}
		env.redis, env.RedisURL, env.RedisEmbedded = m, "redis://"+m.Addr(), true
		ctx, cancel := context.WithCancel(context.Background())
		env.stop = cancel
		env.wg.Add(1)
		go func() { // the embedded Redis expires keys only when its clock is advanced
			defer env.wg.Done()
			runRedisClock(ctx, m)
		}()
	}

	env.PVE = simpve.New(simpve.Options{Scenario: "demo", Logger: opts.Logger, TaskDuration: opts.TaskDuration})
	if env.PVEURL, err = env.PVE.Start("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("pve simulator: %w", err)
	}
	env.closer = append(env.closer, env.PVE)
	env.NetBox = simnetbox.New(simnetbox.Options{Scenario: "demo", Logger: opts.Logger})
	if env.NetBoxURL, err = env.NetBox.Start("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("netbox simulator: %w", err)
	}
	env.closer = append(env.closer, env.NetBox)
	if env.Images, err = startImageServer(&env.closer); err != nil {
		return nil, err
	}
	ok = true
	return env, nil
}

// DemoImage is a cloud image the dev environment serves, with its checksum.
type DemoImage struct {
	URL    string
	SHA256 string
}

// startImageServer serves a small qcow2-looking image at /images/demo-cloudimg-amd64.img.
func startImageServer(closers *[]io.Closer) (DemoImage, error) {
	body := []byte("QFI\xfb" + strings.Repeat("proxbus demo cloud image ", 4096))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return DemoImage{}, fmt.Errorf("image server: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /images/demo-cloudimg-amd64.img", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }() // ended by srv.Close, which *closers holds
	*closers = append(*closers, srv)
	sum := sha256.Sum256(body)
	return DemoImage{URL: "http://" + ln.Addr().String() + "/images/demo-cloudimg-amd64.img", SHA256: hex.EncodeToString(sum[:])}, nil
}

func runRedisClock(ctx context.Context, m *miniredis.Miniredis) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			m.FastForward(now.Sub(last))
			last = now
		}
	}
}

// DemoApprovalVerbs are the verbs whose commands on the demo's endpoint 1 wait for a second
// person's approval (contract §4b).
var DemoApprovalVerbs = []string{"vm.delete", "node.reboot"}

// Endpoints is the endpoints file of the demo cluster: endpoint 1 (writes allowed in NetBox;
// vm.delete and node.reboot need approval) and endpoint 2 (read-only in NetBox), both on the
// PVE simulator with the demo token.
func (e *DevEnv) Endpoints() []proxmox.EndpointConfig {
	ep := func(id int64, name string) proxmox.EndpointConfig {
		return proxmox.EndpointConfig{ID: id, Name: name, URLs: []string{e.PVEURL}, TokenID: DemoPVETokenID,
			TokenSecretEnv: demoSecretVariable, MaxParallel: 8, Timeout: 10 * time.Second}
	}
	lab := ep(1, "lab")
	lab.Approval.Verbs = slices.Clone(DemoApprovalVerbs)
	return []proxmox.EndpointConfig{lab, ep(2, "lab-readonly")}
}

// ServeConfig is the [Config] that runs proxbus against this environment.
func (e *DevEnv) ServeConfig() Config {
	return Config{
		NATSURL: e.NATSURL, RedisURL: e.RedisURL, NetBoxURL: e.NetBoxURL, NetBoxToken: DemoNetBoxToken,
		Endpoints: e.Endpoints(), Store: store.Options{Prefix: e.RedisKeyPrefix},
		Getenv: func(name string) string {
			if name == demoSecretVariable {
				return DemoPVESecret
			}
			return ""
		},
	}
}

// Close stops everything StartDev started, removes JetStream's temporary directory and, in a
// Redis given by URL, this run's keys.
func (e *DevEnv) Close() {
	for i := len(e.closer) - 1; i >= 0; i-- {
		_ = e.closer[i].Close()
	}
	if !e.RedisEmbedded && e.RedisKeyPrefix != "" {
		e.deleteRunKeys()
	}
	if e.stop != nil {
		e.stop()
	}
	e.wg.Wait()
	if e.redis != nil {
		e.redis.Close()
	}
	if e.nats != nil {
		e.nats.Shutdown()
		e.nats.WaitForShutdown()
	}
	if e.natsDir != "" {
		_ = os.RemoveAll(e.natsDir)
	}
}
