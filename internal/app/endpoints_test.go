package app

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/endpointset"
	"github.com/proxbus/proxbus/internal/ingress"
	simnetbox "github.com/proxbus/proxbus/internal/sim/netbox"
)

// netboxEndpointsEnv is a serve environment whose endpoints come from the NetBox simulator:
// the Proxmox simulator behind TLS, its certificate's CA in a file, a secrets file.
type netboxEndpointsEnv struct {
	*serveEnv
	host    string
	port    int
	secrets string
	cfg     Config
}

const endpointsWebhookSecret = "endpoints-webhook-secret-0123456789"

func newNetBoxEndpointsEnv(t *testing.T, interval time.Duration) *netboxEndpointsEnv {
	t.Helper()
	e := &netboxEndpointsEnv{serveEnv: newServeEnv(t)}
	tlsPVE := httptest.NewTLSServer(e.pve.Handler())
	t.Cleanup(tlsPVE.Close)
	host, port, _ := net.SplitHostPort(tlsPVE.Listener.Addr().String())
	e.host, e.port = host, mustAtoi(t, port)
	dir := t.TempDir()
	ca := filepath.Join(dir, "pve-ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsPVE.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	e.secrets = filepath.Join(dir, "endpoint-secrets.env")
	e.writeSecrets(t, 1)
	e.netbox.DeleteEndpoint(2)
	e.cfg = e.serveEnv.cfg
	e.cfg.Endpoints, e.cfg.EndpointsFromNetBox = nil, true
	e.cfg.EndpointSecretsFile, e.cfg.EndpointCAFile, e.cfg.EndpointsReloadInterval = e.secrets, ca, interval
	e.cfg.Getenv = func(string) string { return "" }
	e.cfg.Ingress = Ingress{WebhookSecret: endpointsWebhookSecret}
	// Commands waiting for their endpoint stay pending in JetStream: room for others beside them.
	e.cfg.Consumer.Concurrency, e.cfg.Consumer.MaxAckPending = 4, 16
	return e
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// writeSecrets writes the secrets file with the demo token secret for ids.
func (e *netboxEndpointsEnv) writeSecrets(t *testing.T, ids ...int64) {
	t.Helper()
	var b strings.Builder
	b.WriteString("# token secrets of the endpoints read from NetBox\n")
	for _, id := range ids {
		b.WriteString(endpointset.SecretVar(id) + "=" + DemoPVESecret + "\n")
	}
	if err := os.WriteFile(e.secrets, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// putEndpoint creates or changes ProxmoxEndpoint id in NetBox, on the Proxmox simulator at
// port, verified with the CA file.
func (e *netboxEndpointsEnv) putEndpoint(id int64, name string, port int) {
	e.netbox.PutEndpoint(simnetbox.EndpointSpec{ID: id, Name: name, AllowWrites: true, Domain: e.host, Port: port,
		VerifySSL: true, Username: "proxbus@pve", TokenName: "demo"})
}

// webhook posts NetBox's webhook for a change of ProxmoxEndpoint id, signed.
func (e *netboxEndpointsEnv) webhook(t *testing.T, s *served, id int64) {
	t.Helper()
	body := []byte(`{"event":"updated","timestamp":"` + time.Now().UTC().Format(time.RFC3339Nano) + `","object_type":"netbox_proxbox.proxmoxendpoint",` +
		`"model":"proxmoxendpoint","username":"admin","request_id":"4f1c","data":{"id":` + strconv.FormatInt(id, 10) + `},"snapshots":{}}`)
	req, _ := http.NewRequest(http.MethodPost, s.base+ingress.EndpointsWebhookPath, bytes.NewReader(body))
	req.Header.Set(ingress.SignatureHeader, ingress.Sign(endpointsWebhookSecret, body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("endpoints webhook: %d", resp.StatusCode)
	}
}

// listCommand is a vm.list command on endpoint id.
func listCommand(id string, endpoint int64) events.Command {
	return events.Command{ID: id, Source: "/test/app", Type: "proxbus.vm.list", Verb: "vm.list",
		EndpointID: endpoint, HasEndpointID: true, Actor: "tester", Data: json.RawMessage(`{}`)}
}

// watch sends cmd and returns a channel closed at its first step that has, in its detail, the
// text want, and a function waiting for its result and steps.
func watch(t *testing.T, e *netboxEndpointsEnv, cmd events.Command, want string) (<-chan struct{}, func() (events.Result, []events.Step)) {
	t.Helper()
	seen := make(chan struct{})
	var once sync.Once
	wait := sendAsyncFunc(t, e.nats, e.cfg.Consumer.Subjects, cmd, func(st events.Step) {
		if strings.Contains(st.Detail, want) {
			once.Do(func() { close(seen) })
		}
	})
	return seen, wait
}

// waitFor waits for ch, failing the test after 30s.
func waitFor(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("never: %s", what)
	}
}

// TestServeEndpointsFromNetBoxWebhook: with the endpoints read from NetBox, an endpoint moved
// in NetBox, one whose secret was missing and one added are served after NetBox's webhook,
// without a restart; meanwhile the endpoint without a secret makes only its own commands wait, with a
// step naming it and the variable to set; no token secret is ever logged.
func TestServeEndpointsFromNetBoxWebhook(t *testing.T) {
	t.Parallel()
	e := newNetBoxEndpointsEnv(t, time.Hour) // no periodic re-read within the test
	_, closed := freeAddr(t)
	e.putEndpoint(1, "lab", closed) // a wrong port: its commands wait for Proxmox
	e.putEndpoint(3, "lab3", e.port)
	e.netbox.PutEndpoint(simnetbox.EndpointSpec{ID: 4, Name: "lab4", AllowWrites: true, Domain: e.host, Port: e.port,
		VerifySSL: true, Username: "proxbus@pve", TokenName: "demo"})
	e.writeSecrets(t, 1, 4) // none for 3
	s := serve(t, e.cfg)
	s.waitReady()

	// Endpoint 4 is served; 3 has no secret; 1 is unreachable.
	if res, _ := sendAsync(t, e.nats, e.cfg.Consumer.Subjects, listCommand("nbe-4", 4))(); res.Status != 200 {
		t.Fatalf("endpoint 4: %+v", res)
	}
	noSecret, wait3 := watch(t, e, listCommand("nbe-3", 3), "endpoint 3 (lab3)")
	unreachable, wait1 := watch(t, e, listCommand("nbe-1", 1), "Proxmox")
	waitFor(t, "a step naming endpoint 3", noSecret)
	waitFor(t, "endpoint 1 waiting for Proxmox", unreachable)
	if res, _ := sendAsync(t, e.nats, e.cfg.Consumer.Subjects, listCommand("nbe-4b", 4))(); res.Status != 200 {
		t.Fatalf("endpoint 4 while 1 and 3 wait: %+v", res)
	}
	code, body := s.readyz()
	if code != http.StatusOK || !strings.Contains(body.Checks["endpoints"], "endpoint 3 (lab3)") {
		t.Errorf("readyz %d %+v: want ready, the endpoints check naming endpoint 3", code, body)
	}

	e.putEndpoint(1, "lab", e.port)
	e.writeSecrets(t, 1, 3, 4)
	e.webhook(t, s, 1)
	for _, tc := range []struct {
		name string
		wait func() (events.Result, []events.Step)
		want string
	}{
		{"endpoint 1", wait1, ""},
		{"endpoint 3", wait3, "its token secret is missing; set " + endpointset.SecretVar(3) + " in " + e.secrets},
	} {
		res, steps := tc.wait()
		if res.Status != 200 {
			t.Errorf("%s after the webhook: %+v", tc.name, res)
		}
		if tc.want == "" {
			continue
		}
		var named bool
		for _, st := range steps {
			named = named || (st.Step == "gate" && st.Status == events.StepRetrying && strings.Contains(st.Detail, tc.want))
		}
		if !named {
			t.Errorf("%s: no retrying gate step saying %q among %+v", tc.name, tc.want, steps)
		}
	}
	// An endpoint added in NetBox, with its line in the secrets file, is served.
	e.writeSecrets(t, 1, 3, 4, 5)
	e.putEndpoint(5, "lab5", e.port)
	e.webhook(t, s, 5)
	if res, _ := sendAsync(t, e.nats, e.cfg.Consumer.Subjects, listCommand("nbe-5", 5))(); res.Status != 200 {
		t.Errorf("endpoint 5 added in NetBox: %+v", res)
	}
	if strings.Contains(e.logs.String(), DemoPVESecret) {
		t.Errorf("a token secret is in the logs")
	}
	if !strings.Contains(e.logs.String(), "endpoint changed in NetBox") {
		t.Errorf("no log line of the changed endpoint")
	}
}

// TestServeEndpointsFromNetBoxPeriodic: an endpoint changed in NetBox is served after the
// periodic re-read, with no webhook; one NetBox does not have is refused endpoint_not_found,
// naming it.
func TestServeEndpointsFromNetBoxPeriodic(t *testing.T) {
	t.Parallel()
	e := newNetBoxEndpointsEnv(t, 50*time.Millisecond)
	_, closed := freeAddr(t)
	e.putEndpoint(1, "lab", closed)
	s := serve(t, e.cfg)
	s.waitReady()
	unreachable, wait1 := watch(t, e, listCommand("nbp-1", 1), "Proxmox")
	waitFor(t, "endpoint 1 waiting for Proxmox", unreachable)
	e.putEndpoint(1, "lab", e.port)
	if res, _ := wait1(); res.Status != 200 {
		t.Errorf("endpoint 1 after the re-read: %+v", res)
	}
	res, _ := sendAsync(t, e.nats, e.cfg.Consumer.Subjects, listCommand("nbp-9", 9))()
	if res.Status != 403 || res.Reason != "endpoint_not_found" || !strings.Contains(res.Detail, "NetBox has no ProxmoxEndpoint 9") {
		t.Errorf("unknown endpoint: %+v", res)
	}
	if strings.Contains(e.logs.String(), DemoPVESecret) {
		t.Errorf("a token secret is in the logs")
	}
}

// TestConfigEndpointsFromNetBox: the endpoints come from one place; the settings of endpoints
// read from NetBox need them to be read from NetBox.
func TestConfigEndpointsFromNetBox(t *testing.T) {
	t.Parallel()
	base := Config{NetBoxURL: "http://netbox"}
	cases := []struct {
		name string
		mod  func(*Config)
		want string // "" means valid
	}{
		{"from NetBox", func(c *Config) { c.EndpointsFromNetBox = true; c.EndpointSecretsFile = "/s" }, ""},
		{"both", func(c *Config) { c.EndpointsFromNetBox = true; c.EndpointsFile = "e.yaml" }, "give one"},
		{"neither", func(*Config) {}, "PROXBUS_ENDPOINTS_FROM_NETBOX"},
		{"secrets file alone", func(c *Config) { c.EndpointsFile = "e.yaml"; c.EndpointSecretsFile = "/s" }, "PROXBUS_ENDPOINT_SECRETS_FILE"},
		{"negative interval", func(c *Config) { c.EndpointsFromNetBox = true; c.EndpointsReloadInterval = -time.Second }, "EndpointsReloadInterval"},
	}
	for _, tc := range cases {
		c := base
		tc.mod(&c)
		err := c.withDefaults().validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}
