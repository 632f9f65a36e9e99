package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/deadletter"
	"github.com/proxbus/proxbus/internal/testenv"
)

// env is one test's JetStream with the proxbus streams and consumer provisioned.
type env struct {
	js  jetstream.JetStream
	cfg Config
	s   events.Subjects
}

// testConfig is a Config with intervals short enough for fast tests.
func testConfig() Config {
	return Config{
		Subjects:    events.NewSubjects("proxbus"),
		Concurrency: 4,
		FetchWait:   200 * time.Millisecond,
		AckWait:     2 * time.Second,
		Heartbeat:   300 * time.Millisecond,
		Instance:    "test",
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// newEnv starts an embedded JetStream and provisions it with testConfig changed by mutate.
func newEnv(t *testing.T, mutate func(*Config)) *env {
	t.Helper()
	n := testenv.StartNATS(t)
	return provisioned(t, n.JS, mutate)
}

func provisioned(t *testing.T, js jetstream.JetStream, mutate func(*Config)) *env {
	t.Helper()
	cfg := testConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	if err := Provision(ctxT(t), js, cfg); err != nil {
		t.Fatalf("provision: %v", err)
	}
	return &env{js: js, cfg: cfg, s: cfg.Subjects}
}

// newBigPayloadEnv is newEnv on a server whose max payload is 4 MiB, so messages over
// events.MaxCommandBytes can be published (the default server refuses them at the door).
func newBigPayloadEnv(t *testing.T, mutate func(*Config)) *env {
	t.Helper()
	srv, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		MaxPayload: 4 << 20, NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatalf("nats server: %v", err)
	}
	go srv.Start() // stopped and waited for by the cleanup below
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return provisioned(t, js, mutate)
}

// ctxT is a context that ends with the test.
func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// running is a Consumer running in the background.
type running struct {
	c      *Consumer
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// stop cancels Run and returns its error once it returned.
func (r *running) stop() error {
	r.once.Do(func() {
		r.cancel()
		r.err = <-r.done
	})
	return r.err
}

// start runs a Consumer with h until the test ends (or stop is called).
func (e *env) start(t *testing.T, h Handler) *running {
	t.Helper()
	c, err := New(e.js, e.cfg, h, NewPublisher(e.js, events.NewEmitter(e.s, "test")))
	if err != nil {
		t.Fatalf("new consumer: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{c: c, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx) }() // waited for by stop
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Errorf("run: %v", err)
		}
	})
	eventually(t, 10*time.Second, "consumer ready", c.Ready)
	return r
}

// eventually polls cond until it holds, failing the test after timeout. It is a wait, not a
// timing assertion: the timeout is far beyond what the behaviour needs.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// binaryCommand is a valid binary-mode command message.
func binaryCommand(s events.Subjects, verb, id string, data string) *nats.Msg {
	h := nats.Header{}
	h.Set("ce-specversion", "1.0")
	h.Set("ce-id", id)
	h.Set("ce-source", "/test")
	h.Set("ce-type", "proxbus."+verb)
	h.Set("Content-Type", "application/json")
	h.Set("Nats-Msg-Id", id)
	return &nats.Msg{Subject: s.Command(verb), Header: h, Data: []byte(data)}
}

// publish stores m on its stream and returns the stream sequence.
func (e *env) publish(t *testing.T, m *nats.Msg) uint64 {
	t.Helper()
	ack, err := e.js.PublishMsg(ctxT(t), m)
	if err != nil {
		t.Fatalf("publish %s: %v", m.Subject, err)
	}
	return ack.Sequence
}

// streamMsgs is the number of messages in a stream.
func (e *env) streamMsgs(t *testing.T, name string) uint64 {
	t.Helper()
	st, err := e.js.Stream(ctxT(t), name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	return st.CachedInfo().State.Msgs
}

// consumerInfo returns the durable's current info.
func (e *env) consumerInfo(t *testing.T) *jetstream.ConsumerInfo {
	t.Helper()
	c, err := e.js.Consumer(ctxT(t), e.s.CommandsStream(), e.cfg.WithDefaults().Durable)
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	return c.CachedInfo()
}

// resultsFor returns every result event stored for the command (source, id), decoded as the
// CloudEvent's data object.
func (e *env) resultsFor(t *testing.T, source, id string) []map[string]any {
	t.Helper()
	subject := e.s.Result(events.Ref(source, id))
	st, err := e.js.Stream(ctxT(t), e.s.EventsStream())
	if err != nil {
		t.Fatalf("events stream: %v", err)
	}
	var out []map[string]any
	seq := uint64(1)
	for {
		raw, err := st.GetMsg(ctxT(t), seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out
		}
		if err != nil {
			t.Fatalf("get result: %v", err)
		}
		var ev struct {
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(raw.Data, &ev); err != nil {
			t.Fatalf("result event is not JSON: %v: %s", err, raw.Data)
		}
		out = append(out, ev.Data)
		seq = raw.Sequence + 1
	}
}

// deadLetters lists the DLQ.
func (e *env) deadLetters(t *testing.T) []deadletter.DeadLetter {
	t.Helper()
	dl, err := deadletter.List(ctxT(t), e.js, e.s, 0)
	if err != nil {
		t.Fatalf("list dead letters: %v", err)
	}
	return dl
}

// recorder is a Handler that records what it saw and answers with a function of the
// delivery (Ack when answer is nil).
type recorder struct {
	mu         sync.Mutex
	cmds       []events.Command
	deliveries []events.Delivery
	answer     func(ctx context.Context, cmd events.Command, d events.Delivery) events.Disposition
}

func (r *recorder) Handle(ctx context.Context, cmd events.Command, d events.Delivery) events.Disposition {
	r.mu.Lock()
	r.cmds = append(r.cmds, cmd)
	r.deliveries = append(r.deliveries, d)
	r.mu.Unlock()
	if r.answer == nil {
		return events.Disposition{Action: events.Ack}
	}
	return r.answer(ctx, cmd, d)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.cmds)
}

func (r *recorder) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.cmds))
	for i, c := range r.cmds {
		out[i] = c.ID
	}
	return out
}

func (r *recorder) seen() []events.Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]events.Delivery(nil), r.deliveries...)
}

func natsConnect(url string) (*nats.Conn, error) { return nats.Connect(url) }

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
