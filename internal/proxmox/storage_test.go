package proxmox_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// TestStorages pins GET /storage decoding: every demo storage, PVE types flattened to
// strings (shared "1"), no sensitive keys.
func TestStorages(t *testing.T) {
	t.Parallel()
	sim, url := startSim(t, simpve.ScenarioDemo)
	sim.AddStorage(proxmox.StorageConfig{"storage": "pbs0", "type": "pbs", "server": "x", "datastore": "d", "port": "8007", "password": "p", "encryption-key": "k"})
	got, err := demoClient(t, url).Storages(testCtx(t))
	if err != nil {
		t.Fatalf("Storages: %v", err)
	}
	byID := map[string]proxmox.StorageConfig{}
	for _, s := range got {
		byID[s["storage"]] = s
	}
	for _, id := range []string{"local", "local-lvm", "ceph", "images", "pbs0"} {
		if _, ok := byID[id]; !ok {
			t.Errorf("storage %q missing from %v", id, got)
		}
	}
	if byID["ceph"]["type"] != "rbd" || byID["ceph"]["shared"] != "1" {
		t.Errorf("ceph = %v, want rbd shared=1", byID["ceph"])
	}
	if byID["images"]["content"] != "import,iso" {
		t.Errorf("images content = %q", byID["images"]["content"])
	}
	if byID["pbs0"]["port"] != "8007" {
		t.Errorf("pbs0 port = %q, want the JSON number as \"8007\"", byID["pbs0"]["port"])
	}
	for id, s := range byID {
		for _, k := range []string{"password", "encryption-key"} {
			if _, ok := s[k]; ok {
				t.Errorf("storage %s carries %s", id, k)
			}
		}
	}
}

// TestStorage pins GET /storage/{storage}: a found config, and PVE's 500 "does not exist"
// as an *APIError matching ErrNotFound.
func TestStorage(t *testing.T) {
	t.Parallel()
	_, url := startSim(t, simpve.ScenarioDemo)
	c := demoClient(t, url)
	got, err := c.Storage(testCtx(t), "local-lvm")
	if err != nil || got["type"] != "lvmthin" || got["storage"] != "local-lvm" {
		t.Fatalf("Storage(local-lvm) = %v, %v", got, err)
	}
	for _, id := range []string{"nope", ""} {
		_, err = c.Storage(testCtx(t), id)
		if !errors.Is(err, proxmox.ErrNotFound) {
			t.Fatalf("Storage(%q) = %v, want ErrNotFound", id, err)
		}
	}
	_, err = c.Storage(testCtx(t), "nope")
	var ae *proxmox.APIError
	if !errors.As(err, &ae) || ae.Status != 500 || ae.Message != "storage 'nope' does not exist" || ae.Path != "/storage/nope" {
		t.Errorf("error = %#v, want APIError 500 \"storage 'nope' does not exist\"", err)
	}
	if proxmox.IsTransient(err) {
		t.Error("a 500 'does not exist' must not be transient")
	}
}

// wire records what reached the simulator on the wire.
type wire struct {
	mu          sync.Mutex
	contentType []string
	bodies      []url.Values
}

// recordingServer serves sim behind a recorder of POST bodies and content types.
func recordingServer(t *testing.T, sim *simpve.Server) (*httptest.Server, *wire) {
	t.Helper()
	w := &wire{}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			vals, _ := url.ParseQuery(string(body))
			w.mu.Lock()
			w.contentType = append(w.contentType, r.Header.Get("Content-Type"))
			w.bodies = append(w.bodies, vals)
			w.mu.Unlock()
			r.Body = io.NopCloser(strings.NewReader(string(body)))
		}
		sim.Handler().ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	return srv, w
}

// TestCreatePBSStorageSends pins the exact form-encoded POST /storage: fixed type, content
// and prune-backups, optional fields only when set, nodes comma-joined; and what PVE then
// stores (never the password).
func TestCreatePBSStorageSends(t *testing.T) {
	t.Parallel()
	full := pbs("pbs-full")
	minimal := proxmox.PBSStorage{Storage: "pbs-min", Server: "10.0.0.9", Datastore: "ds1", Username: "u@pbs!t", Password: "pw-1234", Fingerprint: full.Fingerprint}
	tests := []struct {
		name string
		in   proxmox.PBSStorage
		want url.Values
	}{
		{name: "all fields", in: full, want: url.Values{
			"storage": {"pbs-full"}, "type": {"pbs"}, "content": {"backup"}, "prune-backups": {"keep-all=1"},
			"server": {"pbs.example.net"}, "port": {"8007"}, "datastore": {"store1"}, "namespace": {"lab/a"},
			"username": {"backup@pbs!pve"}, "password": {full.Password.Reveal()}, "fingerprint": {full.Fingerprint},
			"nodes": {"pve1,pve2"},
		}},
		{name: "optional fields unset", in: minimal, want: url.Values{
			"storage": {"pbs-min"}, "type": {"pbs"}, "content": {"backup"}, "prune-backups": {"keep-all=1"},
			"server": {"10.0.0.9"}, "datastore": {"ds1"}, "username": {"u@pbs!t"}, "password": {"pw-1234"},
			"fingerprint": {full.Fingerprint},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sim := simpve.New(simpve.Options{Scenario: simpve.ScenarioDemo})
			srv, w := recordingServer(t, sim)
			c := demoClient(t, srv.URL)
			if err := c.CreatePBSStorage(testCtx(t), tt.in); err != nil {
				t.Fatalf("CreatePBSStorage: %v", err)
			}
			if len(w.bodies) != 1 {
				t.Fatalf("%d POSTs reached the server, want 1", len(w.bodies))
			}
			if w.contentType[0] != "application/x-www-form-urlencoded" {
				t.Errorf("Content-Type = %q, want form encoding", w.contentType[0])
			}
			if got := w.bodies[0]; got.Encode() != tt.want.Encode() {
				t.Errorf("sent %v\nwant %v", got, tt.want)
			}
			for k := range tt.want {
				if !slices.Contains(proxmox.UsedAPI()[5].Params, k) {
					t.Errorf("sent %q, which UsedAPI does not declare for POST /storage", k)
				}
			}
			stored, ok := sim.StorageConfig(tt.in.Storage)
			if !ok {
				t.Fatal("storage not created")
			}
			if _, has := stored["password"]; has {
				t.Error("the simulator stored the password; PVE keeps it out of storage.cfg")
			}
			got, err := c.Storage(testCtx(t), tt.in.Storage)
			if err != nil {
				t.Fatalf("Storage: %v", err)
			}
			for k, v := range tt.want {
				if k == "password" {
					continue
				}
				if got[k] != v[0] {
					t.Errorf("read back %s = %q, want %q", k, got[k], v[0])
				}
			}
			if got["shared"] != "1" {
				t.Errorf("pbs storage shared = %q, want 1", got["shared"])
			}
		})
	}
}

// TestCreatePBSStorageRefusals pins how PVE's refusals come back: 403 for a token without
// Datastore.Allocate, 400 with the rejected parameter names (never values), 500 "already
// defined" as ErrAlreadyExists; none of them transient, none of them leaking the password.
func TestCreatePBSStorageRefusals(t *testing.T) {
	t.Parallel()
	badParams := pbs("pbs-bad")
	badParams.Fingerprint = "not-a-fingerprint-" + topSecret[:8]
	badParams.Port = 70000
	tests := []struct {
		name       string
		token      string
		in         proxmox.PBSStorage
		existing   bool
		status     int
		message    string
		params     []string
		sentinel   error
		notCreated bool
	}{
		{name: "audit token", token: simpve.AuditTokenID, in: pbs("pbs-a"), status: 403,
			message: "Permission check failed (/storage, Datastore.Allocate)", notCreated: true},
		{name: "parameter verification", token: simpve.DemoTokenID, in: badParams, status: 400,
			message: "Parameter verification failed.", params: []string{"fingerprint", "port"}, notCreated: true},
		{name: "already defined", token: simpve.DemoTokenID, in: pbs("pbs-dup"), existing: true, status: 500,
			message: "create storage failed: storage ID 'pbs-dup' already defined", sentinel: proxmox.ErrAlreadyExists},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sim, url := startSim(t, simpve.ScenarioDemo)
			if tt.existing {
				sim.AddStorage(proxmox.StorageConfig{"storage": tt.in.Storage, "type": "pbs", "server": "other", "datastore": "x"})
			}
			c := newClient(t, endpoint(tt.token, url), simpve.DemoSecret)
			err := c.CreatePBSStorage(testCtx(t), tt.in)
			var ae *proxmox.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("CreatePBSStorage = %v, want *APIError", err)
			}
			if ae.Status != tt.status || ae.Message != tt.message || ae.Method != "POST" || ae.Path != "/storage" {
				t.Errorf("APIError = %+v, want %d %q", ae, tt.status, tt.message)
			}
			if !slices.Equal(ae.ParamNames(), tt.params) {
				t.Errorf("ParamNames = %v, want %v", ae.ParamNames(), tt.params)
			}
			if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
				t.Errorf("error does not match %v", tt.sentinel)
			}
			if errors.Is(err, proxmox.ErrUnreachable) || errors.Is(err, proxmox.ErrAnswerLost) || proxmox.IsTransient(err) {
				t.Errorf("a refusal must be neither a transport error nor transient: %v", err)
			}
			text := err.Error()
			for _, leak := range []string{tt.in.Password.Reveal(), "not-a-fingerprint", "70000"} {
				if strings.Contains(text, leak) {
					t.Errorf("error text %q contains the value %q", text, leak)
				}
			}
			if _, ok := sim.StorageConfig(tt.in.Storage); tt.notCreated && ok {
				t.Error("a refused create left a storage behind")
			}
			if n := sim.Requests("POST", "/storage"); n != 1 {
				t.Errorf("%d POSTs, want exactly 1", n)
			}
		})
	}
}

// TestCreatePBSStorageAnswerLost pins the lost answer: the simulator applies the create and
// closes the connection; the client reports ErrAnswerLost (not transient for a write),
// sent exactly one POST, and the storage is there when read back.
func TestCreatePBSStorageAnswerLost(t *testing.T) {
	t.Parallel()
	sim, url := startSim(t, simpve.ScenarioDemo)
	sim.DropAnswerAfterApply("POST", "/storage", 1)
	c := demoClient(t, url)
	err := c.CreatePBSStorage(testCtx(t), pbs("pbs-lost"))
	if !errors.Is(err, proxmox.ErrAnswerLost) || errors.Is(err, proxmox.ErrUnreachable) {
		t.Fatalf("CreatePBSStorage = %v, want ErrAnswerLost only", err)
	}
	var te *proxmox.TransportError
	if !errors.As(err, &te) || !te.Sent || te.Method != "POST" || te.Path != "/storage" {
		t.Errorf("TransportError = %+v", te)
	}
	if proxmox.IsTransient(err) {
		t.Error("a lost write answer must not be transient")
	}
	if n := sim.Requests("POST", "/storage"); n != 1 {
		t.Errorf("%d POSTs, want exactly 1 (no retry)", n)
	}
	got, err := c.Storage(testCtx(t), "pbs-lost")
	if err != nil || got["datastore"] != "store1" {
		t.Errorf("Storage after lost answer = %v, %v; want the created storage", got, err)
	}
}

// TestCreatePBSStorageUnreachable pins ErrUnreachable when nothing could be sent: the
// simulator refusing connections, or a closed port. Nothing is created; it is transient.
func TestCreatePBSStorageUnreachable(t *testing.T) {
	t.Parallel()
	t.Run("sim unreachable", func(t *testing.T) {
		t.Parallel()
		sim, url := startSim(t, simpve.ScenarioDemo)
		sim.SetUnreachable(true)
		c := demoClient(t, url)
		err := c.CreatePBSStorage(testCtx(t), pbs("pbs-u"))
		if !errors.Is(err, proxmox.ErrUnreachable) || errors.Is(err, proxmox.ErrAnswerLost) {
			t.Fatalf("CreatePBSStorage = %v, want ErrUnreachable only", err)
		}
		if !proxmox.IsTransient(err) {
			t.Error("ErrUnreachable must be transient")
		}
		if _, ok := sim.StorageConfig("pbs-u"); ok || sim.Requests("POST", "/storage") != 0 {
			t.Error("an unreachable cluster received or applied the create")
		}
		sim.SetUnreachable(false)
		if err := c.CreatePBSStorage(testCtx(t), pbs("pbs-u")); err != nil {
			t.Fatalf("CreatePBSStorage after recovery: %v", err)
		}
	})
	t.Run("closed port", func(t *testing.T) {
		t.Parallel()
		c := demoClient(t, closedURL(t))
		err := c.CreatePBSStorage(testCtx(t), pbs("pbs-c"))
		if !errors.Is(err, proxmox.ErrUnreachable) {
			t.Fatalf("CreatePBSStorage = %v, want ErrUnreachable", err)
		}
		if strings.Contains(err.Error(), pbs("x").Password.Reveal()) || strings.Contains(err.Error(), simpve.DemoSecret) {
			t.Errorf("error leaks a secret: %v", err)
		}
	})
}

// TestCreatePBSStorageNoRetry pins that a 503 on POST is returned after exactly one POST.
func TestCreatePBSStorageNoRetry(t *testing.T) {
	t.Parallel()
	sim, url := startSim(t, simpve.ScenarioDemo)
	sim.FailNext("POST", "/storage", 1, 503, "Service Unavailable")
	err := demoClient(t, url).CreatePBSStorage(testCtx(t), pbs("pbs-503"))
	var ae *proxmox.APIError
	if !errors.As(err, &ae) || ae.Status != 503 {
		t.Fatalf("CreatePBSStorage = %v, want APIError 503", err)
	}
	if !proxmox.IsTransient(err) {
		t.Error("503 must be transient")
	}
	if n := sim.Requests("POST", "/storage"); n != 1 {
		t.Errorf("%d POSTs, want exactly 1", n)
	}
	if _, ok := sim.StorageConfig("pbs-503"); ok {
		t.Error("a failed request created the storage")
	}
}

// TestErrorsScrubSecrets pins that a PVE message echoing the password or the token secret
// reaches the caller with the values cut out.
func TestErrorsScrubSecrets(t *testing.T) {
	t.Parallel()
	sim, url := startSim(t, simpve.ScenarioDemo)
	p := pbs("pbs-echo")
	sim.FailNext("POST", "/storage", 1, 500, "cannot log in with '"+p.Password.Reveal()+"' token "+simpve.DemoSecret)
	err := demoClient(t, url).CreatePBSStorage(testCtx(t), p)
	if err == nil {
		t.Fatal("want an error")
	}
	if strings.Contains(err.Error(), p.Password.Reveal()) || strings.Contains(err.Error(), simpve.DemoSecret) {
		t.Errorf("error leaks a secret: %v", err)
	}
	if !strings.Contains(err.Error(), "[redacted]") {
		t.Errorf("error %q lost the placeholder", err)
	}
}

// TestUnauthorized pins 401 handling: a wrong secret or an unknown token is ErrUnauthorized,
// with PVE's reason, and the secret is not in the error.
func TestUnauthorized(t *testing.T) {
	t.Parallel()
	_, url := startSim(t, simpve.ScenarioDemo)
	tests := []struct{ name, token, secret, message string }{
		{name: "wrong secret", token: simpve.DemoTokenID, secret: "wrong-secret-value", message: "invalid token value!"},
		{name: "unknown token", token: "nobody@pve!x", secret: simpve.DemoSecret, message: "no such token 'x' for user 'nobody@pve'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := newClient(t, endpoint(tt.token, url), tt.secret).Nodes(testCtx(t))
			var ae *proxmox.APIError
			if !errors.Is(err, proxmox.ErrUnauthorized) || !errors.As(err, &ae) || ae.Status != 401 || ae.Message != tt.message {
				t.Fatalf("Nodes = %v, want 401 %q", err, tt.message)
			}
			if strings.Contains(err.Error(), tt.secret) {
				t.Errorf("error leaks the secret: %v", err)
			}
		})
	}
}
