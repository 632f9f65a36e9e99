package simpve_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

const demoAuth = "PVEAPIToken=" + simpve.DemoTokenID + "=" + simpve.DemoSecret

// start runs a simulator on a free port for the test.
func start(t *testing.T, scenario string) (*simpve.Server, string) {
	t.Helper()
	sim := simpve.New(simpve.Options{Scenario: scenario})
	base, err := sim.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	return sim, base
}

// reply is a decoded response.
type reply struct {
	status  int
	reason  string // status line without the code
	ctype   string
	data    json.RawMessage
	message string
	errors  map[string]string
	raw     string
}

// do sends one request with a fresh connection.
func do(t *testing.T, method, target, auth, contentType, body string) (reply, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	r := reply{status: res.StatusCode, ctype: res.Header.Get("Content-Type"), raw: string(raw)}
	_, r.reason, _ = strings.Cut(res.Status, " ")
	if len(raw) > 0 {
		var env struct {
			Data    json.RawMessage   `json:"data"`
			Message string            `json:"message"`
			Errors  map[string]string `json:"errors"`
		}
		if err := json.Unmarshal(raw, &env); err != nil {
			t.Fatalf("answer is not a JSON envelope: %q", raw)
		}
		r.data, r.message, r.errors = env.Data, env.Message, env.Errors
	}
	return r, nil
}

// mustDo is do that fails the test on a transport error.
func mustDo(t *testing.T, method, target, auth, contentType, body string) reply {
	t.Helper()
	r, err := do(t, method, target, auth, contentType, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	return r
}

const fp = "AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89"

func pbsForm(id string) url.Values {
	return url.Values{
		"storage": {id}, "type": {"pbs"}, "server": {"pbs.example.net"}, "datastore": {"store1"},
		"username": {"u@pbs!t"}, "password": {"the-pbs-password"}, "fingerprint": {fp},
		"content": {"backup"}, "prune-backups": {"keep-all=1"},
	}
}

// TestEnvelope pins the wire format of a success: the {"data":…} envelope, PVE's content
// type, numbers for integers and booleans.
func TestEnvelope(t *testing.T) {
	t.Parallel()
	sim, base := start(t, simpve.ScenarioDemo)
	sim.AddStorage(proxmox.StorageConfig{"storage": "pbs0", "type": "pbs", "server": "s", "datastore": "d", "port": "8007"})
	r := mustDo(t, "GET", base+"/api2/json/version", demoAuth, "", "")
	if r.status != 200 || r.ctype != "application/json;charset=UTF-8" || !strings.Contains(string(r.data), `"release":"9.2"`) {
		t.Errorf("GET /version = %d %q %s", r.status, r.ctype, r.raw)
	}
	r = mustDo(t, "GET", base+"/api2/json/storage/pbs0", demoAuth, "", "")
	if !strings.Contains(string(r.data), `"port":8007`) || !strings.Contains(string(r.data), `"shared":1`) || !strings.Contains(string(r.data), `"digest":"`) {
		t.Errorf("GET /storage/pbs0 data = %s, want port and shared as numbers and a digest", r.data)
	}
}

// TestAuth pins authentication: no header, a wrong secret, an unknown token → 401 with
// PVE's reason in the status line; the audit token lacks Datastore.Allocate.
func TestAuth(t *testing.T) {
	t.Parallel()
	_, base := start(t, simpve.ScenarioDemo)
	tests := []struct {
		name, method, path, auth string
		status                   int
		reason                   string
	}{
		{name: "no header", method: "GET", path: "/nodes", status: 401, reason: "No ticket"},
		{name: "wrong secret", method: "GET", path: "/nodes", auth: "PVEAPIToken=" + simpve.DemoTokenID + "=nope", status: 401, reason: "invalid token value!"},
		{name: "unknown token", method: "GET", path: "/nodes", auth: "PVEAPIToken=x@pve!y=" + simpve.DemoSecret, status: 401, reason: "no such token 'y' for user 'x@pve'"},
		{name: "ticket cookie only", method: "GET", path: "/nodes", auth: "Bearer abc", status: 401, reason: "No ticket"},
		{name: "demo token", method: "GET", path: "/nodes", auth: demoAuth, status: 200, reason: "OK"},
		{name: "audit reads list", method: "GET", path: "/storage", auth: "PVEAPIToken=" + simpve.AuditTokenID + "=" + simpve.DemoSecret, status: 200, reason: "OK"},
		{name: "audit reads config", method: "GET", path: "/storage/local", auth: "PVEAPIToken=" + simpve.AuditTokenID + "=" + simpve.DemoSecret, status: 403, reason: "Permission check failed (/storage/local, Datastore.Allocate)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := mustDo(t, tt.method, base+"/api2/json"+tt.path, tt.auth, "", "")
			if r.status != tt.status || r.reason != tt.reason {
				t.Errorf("%s %s = %d %q, want %d %q", tt.method, tt.path, r.status, r.reason, tt.status, tt.reason)
			}
		})
	}
}

// TestRequestChecking pins that only proxmox.UsedAPI is served: undeclared parameters are
// refused per parameter, other paths and methods answer 501.
func TestRequestChecking(t *testing.T) {
	t.Parallel()
	_, base := start(t, simpve.ScenarioDemo)
	r := mustDo(t, "GET", base+"/api2/json/storage?type=dir&foo=1", demoAuth, "", "")
	want := "property is not defined in schema and the schema does not allow additional properties\n"
	if r.status != 400 || r.reason != "Parameter verification failed." || r.errors["foo"] != want || r.errors["type"] != want {
		t.Errorf("undeclared params = %d %q %v", r.status, r.reason, r.errors)
	}
	form := pbsForm("pbs1")
	form.Set("encryption-key", "autogen")
	r = mustDo(t, "POST", base+"/api2/json/storage", demoAuth, "application/x-www-form-urlencoded", form.Encode())
	if r.status != 400 || len(r.errors) != 1 || r.errors["encryption-key"] != want {
		t.Errorf("undeclared POST param = %d %v", r.status, r.errors)
	}
	for _, tt := range []struct{ method, path, msg string }{
		{"GET", "/xyz", "Method 'GET /xyz' not implemented\n"},
		{"DELETE", "/access/users/root@pam", "Method 'DELETE /access/users/root@pam' not implemented\n"},
		{"PUT", "/cluster/options", "Method 'PUT /cluster/options' not implemented\n"},
	} {
		r = mustDo(t, tt.method, base+"/api2/json"+tt.path, demoAuth, "", "")
		if r.status != 501 || r.message != tt.msg {
			t.Errorf("%s %s = %d %q, want 501 %q", tt.method, tt.path, r.status, r.message, tt.msg)
		}
	}
}

// TestCreateStorageValidation pins POST /storage as PVE validates it: schema errors are
// 400 per parameter, plugin errors 500, an existing id 500 "already defined"; JSON bodies are
// accepted like form bodies; the password is never stored or logged.
func TestCreateStorageValidation(t *testing.T) {
	t.Parallel()
	sim, base := start(t, simpve.ScenarioDemo)
	edit := func(id string, f func(url.Values)) string {
		v := pbsForm(id)
		f(v)
		return v.Encode()
	}
	tests := []struct {
		name    string
		body    string
		ctype   string
		status  int
		errors  []string
		message string
	}{
		{name: "created", body: pbsForm("pbs-ok").Encode(), status: 200},
		{name: "json body", ctype: "application/json", status: 200,
			body: `{"storage":"pbs-json","type":"pbs","server":"10.1.1.1","datastore":"d","port":8007,"fingerprint":"` + fp + `"}`},
		{name: "already defined", body: pbsForm("local").Encode(), status: 500, message: "create storage failed: storage ID 'local' already defined\n"},
		{name: "bad id", body: edit("9bad", func(url.Values) {}), status: 400, errors: []string{"storage"}},
		{name: "bad fingerprint and port", body: edit("p2", func(v url.Values) { v.Set("fingerprint", "AB:CD"); v.Set("port", "0") }), status: 400, errors: []string{"fingerprint", "port"}},
		{name: "bad server and nodes", body: edit("p3", func(v url.Values) { v.Set("server", "bad host!"); v.Set("nodes", "pve1,pve_2") }), status: 400, errors: []string{"nodes", "server"}},
		{name: "bad type and prune", body: edit("p4", func(v url.Values) { v.Set("type", "tape"); v.Set("prune-backups", "keep-all=1,keep-last=3") }), status: 400, errors: []string{"prune-backups", "type"}},
		{name: "missing storage and type", body: "server=a&datastore=b", status: 400, errors: []string{"storage", "type"}},
		{name: "missing datastore", body: edit("p5", func(v url.Values) { v.Del("datastore") }), status: 500, message: "missing value for required option 'datastore'\n"},
		{name: "missing server", body: edit("p6", func(v url.Values) { v.Del("server") }), status: 500, message: "missing value for required option 'server'\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ct := tt.ctype
			if ct == "" {
				ct = "application/x-www-form-urlencoded"
			}
			r := mustDo(t, "POST", base+"/api2/json/storage", demoAuth, ct, tt.body)
			if r.status != tt.status {
				t.Fatalf("status %d (%s), want %d", r.status, r.raw, tt.status)
			}
			if tt.message != "" && (r.message != tt.message || r.reason != strings.TrimSpace(tt.message)) {
				t.Errorf("message %q / reason %q, want %q", r.message, r.reason, tt.message)
			}
			var names []string
			for k := range r.errors {
				names = append(names, k)
			}
			if len(tt.errors) > 0 && strings.Join(sortStrings(names), ",") != strings.Join(tt.errors, ",") {
				t.Errorf("errors %v, want %v", r.errors, tt.errors)
			}
			if tt.status == 200 && !strings.Contains(string(r.data), `"type":"pbs"`) {
				t.Errorf("create answer %s", r.data)
			}
		})
	}
	t.Cleanup(func() {
		cfg, ok := sim.StorageConfig("pbs-ok")
		if !ok || cfg["content"] != "backup" || cfg["prune-backups"] != "keep-all=1" || cfg["shared"] != "1" {
			t.Errorf("created storage = %v", cfg)
		}
		if _, has := cfg["password"]; has {
			t.Error("password stored")
		}
		if cfg, ok := sim.StorageConfig("pbs-json"); !ok || cfg["port"] != "8007" {
			t.Errorf("JSON-created storage = %v", cfg)
		}
		for _, rec := range sim.RequestLog() {
			if strings.Contains(rec.Params.Encode(), "the-pbs-password") {
				t.Errorf("request log holds the password: %v", rec.Params)
			}
		}
	})
}

func sortStrings(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

// TestFailNext pins that exactly n matching requests (by schema or concrete path) fail
// with the given status and message, and that nothing is applied meanwhile.
func TestFailNext(t *testing.T) {
	t.Parallel()
	sim, base := start(t, simpve.ScenarioDemo)
	sim.FailNext("GET", "/storage/{storage}", 2, 503, "too busy")
	sim.FailNext("POST", "/storage", 1, 502, "")
	for i := 0; i < 2; i++ {
		r := mustDo(t, "GET", base+"/api2/json/storage/local", demoAuth, "", "")
		if r.status != 503 || r.reason != "too busy" {
			t.Errorf("request %d = %d %q, want 503 too busy", i, r.status, r.reason)
		}
	}
	if r := mustDo(t, "GET", base+"/api2/json/storage/local", demoAuth, "", ""); r.status != 200 {
		t.Errorf("third request = %d, want 200", r.status)
	}
	r := mustDo(t, "POST", base+"/api2/json/storage", demoAuth, "application/x-www-form-urlencoded", pbsForm("pbs-f").Encode())
	if r.status != 502 {
		t.Errorf("POST = %d, want 502", r.status)
	}
	if _, ok := sim.StorageConfig("pbs-f"); ok {
		t.Error("a failed POST was applied")
	}
	if n := sim.Requests("GET", "/storage/local"); n != 3 {
		t.Errorf("Requests(GET /storage/local) = %d, want 3", n)
	}
}

// TestRejectNext pins the injected parameter refusal: PVE's 400 with per-parameter errors,
// nothing applied, the rule consumed.
func TestRejectNext(t *testing.T) {
	t.Parallel()
	sim, base := start(t, simpve.ScenarioDemo)
	sim.RejectNext("POST", "/storage", 1, map[string]string{"server": "bad server", "datastore": "bad datastore"})
	r := mustDo(t, "POST", base+"/api2/json/storage", demoAuth, "application/x-www-form-urlencoded", pbsForm("pbs-r").Encode())
	if r.status != 400 || r.errors["server"] == "" || r.errors["datastore"] == "" || r.message != "Parameter verification failed.\n" {
		t.Errorf("POST = %d %q %v, want 400 with both parameter errors", r.status, r.message, r.errors)
	}
	if _, ok := sim.StorageConfig("pbs-r"); ok {
		t.Error("a refused POST was applied")
	}
	if r := mustDo(t, "POST", base+"/api2/json/storage", demoAuth, "application/x-www-form-urlencoded", pbsForm("pbs-r").Encode()); r.status != 200 {
		t.Errorf("next POST = %d, want 200 (rule consumed)", r.status)
	}
}

// TestDropAnswerAfterApply pins the lost answer: the change is applied, the connection
// closed without a response, the log marks it dropped and the password redacted.
func TestDropAnswerAfterApply(t *testing.T) {
	t.Parallel()
	sim, base := start(t, simpve.ScenarioDemo)
	sim.DropAnswerAfterApply("POST", "/storage", 1)
	_, err := do(t, "POST", base+"/api2/json/storage", demoAuth, "application/x-www-form-urlencoded", pbsForm("pbs-d").Encode())
	if err == nil {
		t.Fatal("the answer was not dropped")
	}
	if _, ok := sim.StorageConfig("pbs-d"); !ok {
		t.Error("the change was not applied")
	}
	log := sim.RequestLog()
	if len(log) != 1 || !log[0].Dropped || log[0].Status != 200 || log[0].Path != "/storage" || log[0].Params.Get("password") != "[redacted]" || log[0].Params.Get("datastore") != "store1" {
		t.Errorf("RequestLog = %+v", log)
	}
	r := mustDo(t, "POST", base+"/api2/json/storage", demoAuth, "application/x-www-form-urlencoded", pbsForm("pbs-d2").Encode())
	if r.status != 200 {
		t.Errorf("next POST = %d, want 200 (rule consumed)", r.status)
	}
}

// TestSetUnreachable pins unreachability: a started simulator refuses connections (nothing
// read, nothing applied) and serves again on the same address afterwards; mounted as a
// handler it closes connections without reading them.
func TestSetUnreachable(t *testing.T) {
	t.Parallel()
	t.Run("started", func(t *testing.T) {
		t.Parallel()
		sim, base := start(t, simpve.ScenarioDemo)
		sim.SetUnreachable(true)
		_, err := do(t, "POST", base+"/api2/json/storage", demoAuth, "application/x-www-form-urlencoded", pbsForm("pbs-u").Encode())
		var op *net.OpError
		if !errors.As(err, &op) || op.Op != "dial" {
			t.Fatalf("request while unreachable = %v, want a dial error", err)
		}
		sim.SetUnreachable(false)
		if r := mustDo(t, "GET", base+"/api2/json/version", demoAuth, "", ""); r.status != 200 {
			t.Errorf("after recovery = %d", r.status)
		}
		if _, ok := sim.StorageConfig("pbs-u"); ok || sim.Requests("POST", "/storage") != 0 {
			t.Error("an unreachable simulator read or applied the request")
		}
	})
	t.Run("handler", func(t *testing.T) {
		t.Parallel()
		sim := simpve.New(simpve.Options{Scenario: simpve.ScenarioDemo})
		srv := httptest.NewServer(sim.Handler())
		t.Cleanup(srv.Close)
		sim.SetUnreachable(true)
		if _, err := do(t, "GET", srv.URL+"/api2/json/version", demoAuth, "", ""); err == nil {
			t.Fatal("request answered while unreachable")
		}
		if n := sim.Requests("GET", "/version"); n != 0 {
			t.Errorf("Requests = %d, want 0", n)
		}
	})
}

// TestLatency pins that latency delays answers: a client deadline shorter than it expires,
// and after SetLatency(0) requests are answered again.
func TestLatency(t *testing.T) {
	t.Parallel()
	sim, base := start(t, simpve.ScenarioDemo)
	sim.SetLatency(time.Hour) // the waiting handler ends with the client's connection
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/api2/json/version", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", demoAuth)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if _, err := client.Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("request under latency = %v, want the client deadline", err)
	}
	sim.SetLatency(0)
	if r := mustDo(t, "GET", base+"/api2/json/version", demoAuth, "", ""); r.status != 200 {
		t.Errorf("without latency = %d", r.status)
	}
}

// TestScenarios pins the two scenarios: demo storages, and the empty cluster with the same
// nodes and tokens; an unknown name falls back to empty.
func TestScenarios(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		scenario string
		storages int
	}{{simpve.ScenarioDemo, 4}, {simpve.ScenarioEmpty, 0}, {"nonsense", 0}} {
		t.Run(tt.scenario, func(t *testing.T) {
			t.Parallel()
			_, base := start(t, tt.scenario)
			r := mustDo(t, "GET", base+"/api2/json/storage", demoAuth, "", "")
			var list []map[string]any
			_ = json.Unmarshal(r.data, &list)
			if len(list) != tt.storages {
				t.Errorf("%d storages, want %d", len(list), tt.storages)
			}
			r = mustDo(t, "GET", base+"/api2/json/nodes", demoAuth, "", "")
			if !strings.Contains(string(r.data), `"node":"pve3"`) {
				t.Errorf("nodes = %s", r.data)
			}
		})
	}
}

// TestAddStorage pins direct seeding: sensitive keys are dropped, GET returns the rest.
func TestAddStorage(t *testing.T) {
	t.Parallel()
	sim, base := start(t, simpve.ScenarioEmpty)
	sim.AddStorage(proxmox.StorageConfig{"storage": "nfs1", "type": "nfs", "server": "n", "export": "/e", "password": "x", "keyring": "k"})
	cfg, ok := sim.StorageConfig("nfs1")
	if !ok || cfg["shared"] != "1" || cfg["export"] != "/e" {
		t.Fatalf("StorageConfig = %v, %v", cfg, ok)
	}
	for _, k := range []string{"password", "keyring"} {
		if _, has := cfg[k]; has {
			t.Errorf("%s kept", k)
		}
	}
	if r := mustDo(t, "GET", base+"/api2/json/storage/nfs1", demoAuth, "", ""); r.status != 200 || strings.Contains(r.raw, "password") {
		t.Errorf("GET = %d %s", r.status, r.raw)
	}
	if r := mustDo(t, "GET", base+"/api2/json/storage/gone", demoAuth, "", ""); r.status != 500 || r.reason != "storage 'gone' does not exist" {
		t.Errorf("missing storage = %d %q", r.status, r.reason)
	}
}
