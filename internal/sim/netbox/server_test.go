package simnetbox_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	simnetbox "github.com/proxbus/proxbus/internal/sim/netbox"
)

// newSim returns a demo simulator served by httptest.
func newSim(t *testing.T) (*simnetbox.Server, string) {
	t.Helper()
	sim := simnetbox.New(simnetbox.Options{Scenario: simnetbox.ScenarioDemo})
	ts := httptest.NewServer(sim.Handler())
	t.Cleanup(ts.Close)
	return sim, ts.URL
}

// call sends one request and returns the status and decoded JSON body (nil when not JSON).
func call(t *testing.T, method, url, auth, body string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out
}

const v1 = "Token " + simnetbox.TokenV1

// TestAuth pins NetBox 4.5's answers to each kind of credential.
func TestAuth(t *testing.T) {
	t.Parallel()
	_, base := newSim(t)
	tests := []struct {
		name, auth string
		status     int
		detail     string
	}{
		{"v1 token", "Token " + simnetbox.TokenV1, 200, ""},
		{"v2 bearer", "Bearer " + simnetbox.TokenV2, 200, ""},
		{"missing", "", 403, "Authentication credentials were not provided."},
		{"wrong v1", "Token 0000000000000000000000000000000000000000", 403, "Invalid v1 token"},
		{"wrong v2", "Bearer nbt_demo00000000.wrong", 403, "Invalid v2 token"},
		{"v2 sent as Token", "Token " + simnetbox.TokenV2, 403, "Invalid v1 token"},
		{"unknown scheme", "Basic Zm9vOmJhcg==", 403, "Authentication credentials were not provided."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			status, body := call(t, "GET", base+"/api/status/", tc.auth, "")
			if status != tc.status {
				t.Fatalf("status = %d, want %d", status, tc.status)
			}
			if tc.detail != "" && body["detail"] != tc.detail {
				t.Fatalf("detail = %v, want %q", body["detail"], tc.detail)
			}
			if tc.status == 200 && body["netbox-version"] != simnetbox.Version {
				t.Fatalf("status body = %v", body)
			}
		})
	}
}

// TestEndpoints pins the demo scenario's ProxmoxEndpoints and the 404 shape.
func TestEndpoints(t *testing.T) {
	t.Parallel()
	sim, base := newSim(t)
	tests := []struct {
		id     string
		status int
		name   string
		allow  any
	}{
		{"1", 200, "lab", true},
		{"2", 200, "lab-readonly", false},
		{"3", 404, "", nil},
		{"abc", 404, "", nil},
	}
	for _, tc := range tests {
		status, body := call(t, "GET", base+"/api/plugins/proxbox/endpoints/proxmox/"+tc.id+"/", v1, "")
		if status != tc.status {
			t.Fatalf("endpoint %s: status %d, want %d", tc.id, status, tc.status)
		}
		if status == 404 {
			if body["detail"] != "Not found." {
				t.Fatalf("404 body = %v", body)
			}
			continue
		}
		if body["name"] != tc.name || body["allow_writes"] != tc.allow {
			t.Fatalf("endpoint %s = %v", tc.id, body)
		}
		if _, leaked := body["token_value"]; leaked {
			t.Fatal("token_value is write-only and must not be rendered")
		}
	}
	sim.SetAllowWrites(2, true)
	if _, body := call(t, "GET", base+"/api/plugins/proxbox/endpoints/proxmox/2/", v1, ""); body["allow_writes"] != true {
		t.Fatalf("SetAllowWrites not applied: %v", body)
	}
	// Like Django's APPEND_SLASH, a GET without the trailing slash is redirected.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("GET", base+"/api/plugins/proxbox/endpoints/proxmox/2", nil)
	req.Header.Set("Authorization", v1)
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 3 || !strings.HasSuffix(resp.Header.Get("Location"), "/proxmox/2/") {
		t.Fatalf("route without trailing slash answered %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	empty := simnetbox.New(simnetbox.Options{})
	ts := httptest.NewServer(empty.Handler())
	t.Cleanup(ts.Close)
	if status, _ := call(t, "GET", ts.URL+"/api/plugins/proxbox/endpoints/proxmox/1/", v1, ""); status != 404 {
		t.Fatalf("empty scenario has endpoint 1 (status %d)", status)
	}
}

// TestJournalValidation pins the 400 answers: field name → messages, as NetBox's serializer.
func TestJournalValidation(t *testing.T) {
	t.Parallel()
	sim, base := newSim(t)
	tests := []struct {
		name   string
		body   string
		fields []string
	}{
		{"missing everything", `{}`, []string{"assigned_object_id", "assigned_object_type", "comments"}},
		{"bad type form", `{"assigned_object_type":"proxmoxendpoint","assigned_object_id":1,"comments":"x"}`, []string{"assigned_object_type"}},
		{"unknown type", `{"assigned_object_type":"dcim.cable","assigned_object_id":1,"comments":"x"}`, []string{"assigned_object_type"}},
		{"bad kind", `{"assigned_object_type":"dcim.device","assigned_object_id":1,"comments":"x","kind":"fatal"}`, []string{"kind"}},
		{"blank comments", `{"assigned_object_type":"dcim.device","assigned_object_id":1,"comments":"  "}`, []string{"comments"}},
		{"id not integer", `{"assigned_object_type":"dcim.device","assigned_object_id":"x","comments":"c"}`, []string{"assigned_object_id"}},
		{"unknown endpoint", `{"assigned_object_type":"netbox_proxbox.proxmoxendpoint","assigned_object_id":99,"comments":"c"}`, []string{"non_field_errors"}},
		{"unknown vm", `{"assigned_object_type":"virtualization.virtualmachine","assigned_object_id":5,"comments":"c"}`, []string{"non_field_errors"}},
		{"not an object", `[1]`, []string{"non_field_errors"}},
		{"not json", `{`, []string{"detail"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := call(t, "POST", base+"/api/extras/journal-entries/", v1, tc.body)
			if status != 400 {
				t.Fatalf("status = %d, want 400", status)
			}
			if len(body) != len(tc.fields) {
				t.Fatalf("body = %v, want fields %v", body, tc.fields)
			}
			for _, f := range tc.fields {
				if _, ok := body[f]; !ok {
					t.Fatalf("body = %v, missing field %s", body, f)
				}
				if f != "detail" {
					if msgs, ok := body[f].([]any); !ok || len(msgs) == 0 {
						t.Fatalf("field %s messages = %v, want a list", f, body[f])
					}
				}
			}
		})
	}
	if n := len(sim.JournalEntries()); n != 0 {
		t.Fatalf("rejected requests stored %d entries", n)
	}
}

// TestJournalLifecycle pins create (201, defaults, stored as sent), PATCH, GET and list filters.
func TestJournalLifecycle(t *testing.T) {
	t.Parallel()
	sim, base := newSim(t)
	sim.AddVM(7, "web1", 101, 3)
	status, body := call(t, "POST", base+"/api/extras/journal-entries/", v1,
		`{"assigned_object_type":"netbox_proxbox.proxmoxendpoint","assigned_object_id":1,"comments":"- verb: x"}`)
	if status != 201 {
		t.Fatalf("create status %d: %v", status, body)
	}
	if body["url"] != base+"/api/extras/journal-entries/1/" || body["kind"].(map[string]any)["value"] != "info" {
		t.Fatalf("create body = %v", body)
	}
	if ao, ok := body["assigned_object"].(map[string]any); !ok || ao["name"] != "lab" {
		t.Fatalf("assigned_object = %v", body["assigned_object"])
	}
	if status, _ := call(t, "POST", base+"/api/extras/journal-entries/", "Bearer "+simnetbox.TokenV2,
		`{"assigned_object_type":"virtualization.virtualmachine","assigned_object_id":7,"kind":"warning","comments":"vm"}`); status != 201 {
		t.Fatalf("vm entry status %d", status)
	}

	status, body = call(t, "PATCH", base+"/api/extras/journal-entries/1/", v1, `{"kind":"success","comments":"done"}`)
	if status != 200 || body["comments"] != "done" {
		t.Fatalf("patch %d %v", status, body)
	}
	e, ok := sim.JournalEntry(1)
	if !ok || e.Kind != "success" || e.Comments != "done" || e.Patches != 1 || e.ObjectType != "netbox_proxbox.proxmoxendpoint" || e.ObjectID != 1 {
		t.Fatalf("stored entry = %+v", e)
	}
	if status, _ := call(t, "PATCH", base+"/api/extras/journal-entries/1/", v1, `{"kind":"nope"}`); status != 400 {
		t.Fatalf("bad patch status %d", status)
	}
	if status, _ := call(t, "PATCH", base+"/api/extras/journal-entries/42/", v1, `{"comments":"x"}`); status != 404 {
		t.Fatalf("patch of a missing entry answered %d", status)
	}

	status, body = call(t, "GET", base+"/api/extras/journal-entries/?assigned_object_type=netbox_proxbox.proxmoxendpoint&assigned_object_id=1", v1, "")
	if status != 200 || body["count"] != float64(1) {
		t.Fatalf("filtered list %d %v", status, body)
	}
	if _, body = call(t, "GET", base+"/api/extras/journal-entries/", v1, ""); body["count"] != float64(2) {
		t.Fatalf("full list %v", body)
	}
	if status, _ := call(t, "GET", base+"/api/extras/journal-entries/?assigned_object_id=x", v1, ""); status != 400 {
		t.Fatalf("bad filter answered %d", status)
	}
	if got := sim.JournalEntries(); len(got) != 2 || got[0].ID != 1 || got[1].ID != 2 || got[1].Kind != "warning" {
		t.Fatalf("JournalEntries = %+v", got)
	}
	if n := sim.Requests("PATCH", "/api/extras/journal-entries/"); n != 3 {
		t.Fatalf("Requests(PATCH) = %d, want 3", n)
	}
}

// TestVMs pins the VM list filter by custom field and its empty answer.
func TestVMs(t *testing.T) {
	t.Parallel()
	sim, base := newSim(t)
	// The demo scenario mirrors PVE's VM 100 as NetBox VM 1.
	_, body := call(t, "GET", base+"/api/virtualization/virtual-machines/?cf_proxmox_vm_id=100", v1, "")
	if body["count"] != float64(1) {
		t.Fatalf("demo VM 100 = %v", body)
	}
	_, body = call(t, "GET", base+"/api/virtualization/virtual-machines/?cf_proxmox_vm_id=700", v1, "")
	if body["count"] != float64(0) || len(body["results"].([]any)) != 0 {
		t.Fatalf("empty list = %v", body)
	}
	sim.AddVM(11, "web1", 700, 4)
	sim.AddVM(12, "web2", 701, 4)
	_, body = call(t, "GET", base+"/api/virtualization/virtual-machines/?cf_proxmox_vm_id=700", v1, "")
	res := body["results"].([]any)
	if len(res) != 1 {
		t.Fatalf("filtered = %v", body)
	}
	vm := res[0].(map[string]any)
	if vm["name"] != "web1" || vm["cluster"].(map[string]any)["id"] != float64(4) ||
		vm["custom_fields"].(map[string]any)["proxmox_vm_id"] != float64(700) {
		t.Fatalf("vm = %v", vm)
	}
}

// TestFaults pins FailRequests, FailPatches, SetDown and SetLatency.
func TestFaults(t *testing.T) {
	t.Parallel()
	sim, base := newSim(t)
	create := `{"assigned_object_type":"netbox_proxbox.proxmoxendpoint","assigned_object_id":1,"comments":"c"}`

	sim.FailRequests(2, 502)
	for i := range 2 {
		if status, _ := call(t, "GET", base+"/api/status/", "", ""); status != 502 {
			t.Fatalf("failed request %d answered %d", i, status)
		}
	}
	if status, _ := call(t, "GET", base+"/api/status/", v1, ""); status != 200 {
		t.Fatalf("after the faults: %d", status)
	}

	if status, _ := call(t, "POST", base+"/api/extras/journal-entries/", v1, create); status != 201 {
		t.Fatal("create failed")
	}
	sim.FailPatches(1, 503)
	if status, _ := call(t, "PATCH", base+"/api/extras/journal-entries/1/", v1, `{"comments":"one"}`); status != 503 {
		t.Fatalf("failing patch answered %d", status)
	}
	if e, _ := sim.JournalEntry(1); e.Comments != "c" || e.Patches != 0 {
		t.Fatalf("failed patch was applied: %+v", e)
	}
	if status, _ := call(t, "POST", base+"/api/extras/journal-entries/", v1, create); status != 201 {
		t.Fatal("FailPatches must not fail POSTs")
	}
	if status, _ := call(t, "PATCH", base+"/api/extras/journal-entries/1/", v1, `{"comments":"two"}`); status != 200 {
		t.Fatalf("second patch answered %d", status)
	}

	sim.SetDown(true)
	if status, _ := call(t, "GET", base+"/api/plugins/proxbox/endpoints/proxmox/1/", v1, ""); status != 503 {
		t.Fatalf("down answered %d", status)
	}
	sim.SetDown(false)
	if status, _ := call(t, "GET", base+"/api/plugins/proxbox/endpoints/proxmox/1/", v1, ""); status != 200 {
		t.Fatalf("up again answered %d", status)
	}

	// Latency: a client that gives up first sees a timeout; the request is still counted.
	sim.SetLatency(time.Minute)
	client := &http.Client{Timeout: 50 * time.Millisecond}
	before := sim.Requests("GET", "/api/status/")
	if _, err := client.Get(base + "/api/status/"); err == nil {
		t.Fatal("request through a minute of latency did not time out")
	}
	if got := sim.Requests("GET", "/api/status/"); got != before+1 {
		t.Fatalf("Requests = %d, want %d", got, before+1)
	}
	sim.SetLatency(0)
}

// TestConcurrentFaults checks that FailRequests(n) fails exactly n of many concurrent requests.
func TestConcurrentFaults(t *testing.T) {
	t.Parallel()
	sim, base := newSim(t)
	sim.FailRequests(5, 500)
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for range 20 {
		wg.Go(func() {
			req, _ := http.NewRequest("GET", base+"/api/status/", nil)
			req.Header.Set("Authorization", v1)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			resp.Body.Close()
			if resp.StatusCode == 500 {
				mu.Lock()
				failed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if failed != 5 {
		t.Fatalf("%d requests failed, want 5", failed)
	}
}

// TestStartClose checks the listener lifecycle and that Start returns a usable base URL.
func TestStartClose(t *testing.T) {
	t.Parallel()
	sim := simnetbox.New(simnetbox.Options{Scenario: "demo"})
	base, err := sim.Start("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Start(""); err == nil {
		t.Fatal("second Start succeeded")
	}
	if status, _ := call(t, "GET", base+"/api/status/", v1, ""); status != 200 {
		t.Fatalf("status %d", status)
	}
	if err := sim.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(base + "/api/status/"); err == nil {
		t.Fatal("server still answers after Close")
	}
	if err := sim.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := simnetbox.CheckScenario("nope"); err == nil {
		t.Fatal("unknown scenario accepted")
	}
}
