package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/internal/app"
)

// BaselineSteps is how many step events the baseline publishes per command: what proxbus
// publishes for a storage.pbs.create that creates (read_storage and create_storage, each
// started and done). TestRequestParity keeps the two in step.
const BaselineSteps = 4

// The baseline's two Redis round trips per command: one script claims the command identity
// and the Idempotency-Key, one stores the result record.
var (
	claimScript = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
  return 1
end
return 0`)
	completeScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0`)
)

// fetchLoop is the minimal JetStream worker pool both the raw loop and the baseline use, the
// same shape as proxbus's consumer: one message iterator keeping consumer.DefaultFetchBatch
// messages requested ahead (MaxAckPending is the concurrency here, as in proxbus's default), a
// message taken only for a free worker, one goroutine per message. It returns when
// ctx is done and every worker has finished.
func fetchLoop(ctx context.Context, cons jetstream.Consumer, concurrency int, work func(jetstream.Msg)) {
	slots := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	it, err := cons.Messages(jetstream.PullMaxMessages(consumer.DefaultFetchBatch))
	if err != nil {
		return
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		m, err := it.Next()
		if err != nil {
			<-slots
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			work(m)
		}()
	}
}

// runnerConn is the NATS connection of the baseline or the raw loop: its own, as proxbus has
// its own, never the driver's (Env.NC), which carries the collector's subscription to every
// event. On a shared connection one read would bring the runner's PubAck and the collector's
// copy of the event together, sparing the runner the wake-ups proxbus's connection has.
func runnerConn(e *Env, name string) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(e.NATSURL, nats.Name(name))
	if err != nil {
		return nil, nil, fmt.Errorf("nats connect: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	return nc, js, nil
}

// startLoop runs fetchLoop on the proxbus durable through js in a goroutine owned by the
// returned stop.
func startLoop(ctx context.Context, e *Env, js jetstream.JetStream, concurrency int, work func(jetstream.Msg)) (func() error, error) {
	cons, err := js.Consumer(ctx, e.Subjects.CommandsStream(), "proxbus")
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		fetchLoop(lctx, cons, concurrency, work)
	}()
	return func() error {
		cancel()
		<-done
		return nil
	}, nil
}

// Raw is the Runner of the raw JetStream rate: fetch and DoubleAck (the ack proxbus uses),
// nothing else; each ack is reported with c.Mark.
func Raw(ctx context.Context, e *Env, concurrency int, c *Collector) (func() error, error) {
	nc, js, err := runnerConn(e, "bench-raw")
	if err != nil {
		return nil, err
	}
	stop, err := startLoop(ctx, e, js, concurrency, func(m jetstream.Msg) {
		actx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.DoubleAck(actx); err != nil {
			return
		}
		c.Mark(m.Headers().Get("ce-id"), 200)
	})
	if err != nil {
		nc.Close()
		return nil, err
	}
	return func() error {
		err := stop()
		nc.Close()
		return err
	}, nil
}

// Baseline is the Runner of the practical limit: per command it does exactly the broker,
// Redis and HTTP operations proxbus does for a storage.pbs.create that creates, with no
// framework: fetch; 2 Redis scripts (claim, complete); NetBox journal POST and PATCH (the
// endpoint lookup once, then cached); Proxmox GET /storage and POST /storage; BaselineSteps
// step events and one result event, each published and acknowledged by the stream; DoubleAck.
// Like proxbus it consumes and publishes on one NATS connection of its own.
func Baseline(ctx context.Context, e *Env, concurrency int, _ *Collector) (func() error, error) {
	ropts, err := redis.ParseURL(e.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("redis url: %w", err)
	}
	nc, js, err := runnerConn(e, "bench-baseline")
	if err != nil {
		return nil, err
	}
	b := &baseline{
		e:     e,
		js:    js,
		rdb:   redis.NewClient(ropts),
		http:  &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024}, Timeout: 30 * time.Second},
		nbTok: "Token " + app.DemoNetBoxToken,
		pvTok: "PVEAPIToken=" + app.DemoPVETokenID + "=" + app.DemoPVESecret,
	}
	for _, sc := range []*redis.Script{claimScript, completeScript} { // as proxbus loads its scripts
		if err := sc.Load(ctx, b.rdb).Err(); err != nil {
			_ = b.rdb.Close()
			nc.Close()
			return nil, fmt.Errorf("script load: %w", err)
		}
	}
	// The endpoint lookup (allow_writes), cached like proxbus caches it.
	if _, err := b.do(ctx, "GET", e.NetBoxURL+"/api/plugins/proxbox/endpoints/proxmox/1/", b.nbTok, "", nil); err != nil {
		_ = b.rdb.Close()
		nc.Close()
		return nil, err
	}
	stop, err := startLoop(ctx, e, js, concurrency, b.handle)
	if err != nil {
		_ = b.rdb.Close()
		nc.Close()
		return nil, err
	}
	return func() error {
		err := stop()
		b.http.CloseIdleConnections()
		_ = b.rdb.Close()
		nc.Close()
		if n := b.failures.Load(); n > 0 {
			// Redelivered and finished: the results are complete, but say so.
			fmt.Fprintf(os.Stderr, "baseline: %d failed attempts were retried, the last: %v\n", n, b.lastErr.Load())
		}
		return err
	}, nil
}

type baseline struct {
	failures     atomic.Int64
	lastErr      atomic.Value
	e            *Env
	js           jetstream.JetStream
	rdb          *redis.Client
	http         *http.Client
	nbTok, pvTok string
}

type pbsData struct {
	Storage     string `json:"storage"`
	Server      string `json:"server"`
	Port        int    `json:"port"`
	Datastore   string `json:"datastore"`
	Username    string `json:"username"`
	Password    string `json:"password"`
	Fingerprint string `json:"fingerprint"`
}

func (b *baseline) handle(m jetstream.Msg) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.process(ctx, m); err != nil {
		b.failures.Add(1)
		b.lastErr.Store(err.Error())
		_ = m.NakWithDelay(time.Second)
		return
	}
	_ = m.DoubleAck(ctx)
}

func (b *baseline) process(ctx context.Context, m jetstream.Msg) error {
	h := m.Headers()
	id, source, key := h.Get("ce-id"), h.Get("ce-source"), h.Get("ce-idempotencykey")
	var in pbsData
	if err := json.Unmarshal(m.Data(), &in); err != nil {
		return err
	}
	if in.Port == 0 {
		in.Port = 8007
	}
	p := b.e.RedisPrefix + ":base:"
	owner := "bench:" + id
	if _, err := claimScript.Run(ctx, b.rdb, []string{p + "cmd:" + source + ":" + id, p + "idem:" + key},
		owner, 30000, id, 60000).Int64(); err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	comments := "- verb: storage.pbs.create\n- actor: bench\n- result: in_progress\n- command_id: " + id +
		"\n- idempotency_key: " + key + "\n- endpoint: 1 (lab)\n- dispatched_at: " + time.Now().UTC().Format(time.RFC3339) +
		"\n- storage: " + in.Storage + "\n- server: " + in.Server + "\n- port: " + strconv.Itoa(in.Port) +
		"\n- datastore: " + in.Datastore + "\n- username: " + in.Username + "\n- fingerprint: " + in.Fingerprint + "\n"
	entry, _ := json.Marshal(map[string]any{"assigned_object_type": "netbox_proxbox.proxmoxendpoint", "assigned_object_id": 1,
		"kind": "info", "comments": comments})
	var created struct {
		ID  int64  `json:"id"`
		URL string `json:"url"`
	}
	if err := b.json(ctx, "POST", b.e.NetBoxURL+"/api/extras/journal-entries/", b.nbTok, "application/json", entry, &created); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	seq := 0
	step := func(name, status string) error {
		seq++
		return b.event(ctx, id, ".step."+strconv.Itoa(seq), map[string]any{"command_id": id, "command_source": source,
			"verb": "storage.pbs.create", "actor": "bench", "endpoint_id": 1, "seq": seq, "step": name, "status": status, "attempt": 1, "at": time.Now().UTC()})
	}
	if err := step("read_storage", "started"); err != nil {
		return err
	}
	var storages struct {
		Data []map[string]any `json:"data"`
	}
	if err := b.json(ctx, "GET", b.e.PVEURL+"/api2/json/storage", b.pvTok, "", nil, &storages); err != nil {
		return fmt.Errorf("storages: %w", err)
	}
	exists := false
	for _, s := range storages.Data {
		exists = exists || s["storage"] == in.Storage // created by an earlier, failed attempt
	}
	if err := step("read_storage", "done"); err != nil {
		return err
	}
	if err := step("create_storage", "started"); err != nil {
		return err
	}
	form := url.Values{"storage": {in.Storage}, "type": {"pbs"}, "server": {in.Server}, "port": {strconv.Itoa(in.Port)},
		"datastore": {in.Datastore}, "username": {in.Username}, "password": {in.Password}, "fingerprint": {in.Fingerprint},
		"content": {"backup"}, "prune-backups": {"keep-all=1"}}
	if !exists {
		if _, err := b.do(ctx, "POST", b.e.PVEURL+"/api2/json/storage", b.pvTok, "application/x-www-form-urlencoded", []byte(form.Encode())); err != nil {
			return fmt.Errorf("create: %w", err)
		}
	}
	if err := step("create_storage", "done"); err != nil {
		return err
	}
	final, _ := json.Marshal(map[string]any{"kind": "success", "comments": strings.Replace(comments, "in_progress", "created", 1)})
	if _, err := b.do(ctx, "PATCH", b.e.NetBoxURL+"/api/extras/journal-entries/"+strconv.FormatInt(created.ID, 10)+"/", b.nbTok, "application/json", final); err != nil {
		return fmt.Errorf("finalize: %w", err)
	}
	// The output proxbus's verb returns: the storage as configured, without the password.
	output := map[string]any{"storage": in.Storage, "type": "pbs", "server": in.Server, "port": in.Port,
		"datastore": in.Datastore, "username": in.Username, "fingerprint": in.Fingerprint, "content": "backup"}
	result := map[string]any{"command_id": id, "command_source": source, "verb": "storage.pbs.create", "endpoint_id": 1, "actor": "bench",
		"status": 201, "result": "created", "journal_entry_url": created.URL, "journal_finalized": true, "replayed": false,
		"idempotency_key": key, "output": output}
	record, _ := json.Marshal(result)
	if _, err := completeScript.Run(ctx, b.rdb, []string{p + "cmd:" + source + ":" + id}, owner, record, 86400000).Int64(); err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	return b.event(ctx, id, ".result", result)
}

// event publishes a structured CloudEvent like proxbus's (id and Nats-Msg-Id "<command
// id><suffix>", suffix ".step.<seq>" or ".result") and waits for the stream's acknowledgement.
func (b *baseline) event(ctx context.Context, id, suffix string, data any) error {
	kind, subject := ".step", b.e.Subjects.Step(id)
	if suffix == ".result" {
		kind, subject = ".result", b.e.Subjects.Result(id)
	}
	ev, _ := json.Marshal(map[string]any{"specversion": "1.0", "id": id + suffix,
		"source": "urn:proxbus:bench", "type": "proxbus.storage.pbs.create" + kind, "time": time.Now().UTC(),
		"datacontenttype": "application/json", "data": data})
	m := nats.NewMsg(subject)
	m.Header.Set("Content-Type", "application/cloudevents+json")
	m.Header.Set(nats.MsgIdHdr, id+suffix)
	m.Data = ev
	if _, err := b.js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	return nil
}

func (b *baseline) json(ctx context.Context, method, u, auth, ctype string, body []byte, out any) error {
	raw, err := b.do(ctx, method, u, auth, ctype, body)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}

func (b *baseline) do(ctx context.Context, method, u, auth, ctype string, body []byte) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("Accept", "application/json")
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := b.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		return nil, fmt.Errorf("%s %s: %d %s", method, u, resp.StatusCode, raw)
	}
	return raw, nil
}
