package simpve_test

import (
	"net/url"
	"strings"
	"testing"

	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// TestParametersCheckedBeforeHandlers pins that every request passes PVE's parameter
// checks (pveparam) before its method runs, answered as pveproxy does: 400 "Parameter
// verification failed." with PVE's message per parameter, and nothing started.
func TestParametersCheckedBeforeHandlers(t *testing.T) {
	t.Parallel()
	sim, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: -1})
	addPBS(sim, "pbs1")
	refused := []struct {
		name, method, path, body string
		errors                   map[string]string
	}{
		{"boolean true", "POST", "/nodes/pve1/qemu/100/snapshot", "snapname=s1&vmstate=true",
			map[string]string{"vmstate": "type check ('boolean') failed - got 'true'\n"}},
		{"boolean on in a query", "GET", "/nodes/pve1/qemu/100/config?current=on", "",
			map[string]string{"current": "type check ('boolean') failed - got 'on'\n"}},
		{"vmid with a leading zero", "POST", "/nodes/pve1/qemu/0100/status/start", "",
			map[string]string{"vmid": "invalid format - value does not look like a valid VM ID\n"}},
		{"snapshot name in the path", "DELETE", "/nodes/pve1/qemu/100/snapshot/1st", "",
			map[string]string{"snapname": "invalid format - invalid configuration ID '1st'\n"}},
		{"snapshot name of one character", "POST", "/nodes/pve1/lxc/200/snapshot", "snapname=a",
			map[string]string{"snapname": "invalid format - invalid configuration ID 'a'\n"}},
		{"empty required value", "POST", "/nodes/pve1/qemu/100/snapshot", "snapname=",
			map[string]string{"snapname": "property is missing and it is not optional\n"}},
		{"net32", "POST", "/nodes/pve1/qemu/100/config", "net32=virtio",
			map[string]string{"net32": "property is not defined in schema and the schema does not allow additional properties\n"}},
		{"ipconfig gateway without address", "POST", "/nodes/pve1/qemu/100/config", url.Values{"ipconfig0": {"gw=192.0.2.1"}}.Encode(),
			map[string]string{"ipconfig0": "invalid format - format error\nipconfig0.ip: missing property required by 'ipconfig0.gw'\n"}},
		{"password of 257 characters", "POST", "/storage", url.Values{"storage": {"pbs9"}, "type": {"pbs"}, "password": {strings.Repeat("é", 257)}}.Encode(),
			map[string]string{"password": "value may only be 256 characters long\n"}},
		{"server in brackets", "POST", "/storage", url.Values{"storage": {"pbs9"}, "type": {"pbs"}, "server": {"[fe80::1]"}}.Encode(),
			map[string]string{"server": "invalid format - value does not look like a valid server name or IP address\n"}},
		{"notes with an unknown variable", "POST", "/nodes/pve1/vzdump", url.Values{"vmid": {"100"}, "storage": {"pbs1"}, "notes-template": {"{{foo}} on {{node}}"}}.Encode(),
			map[string]string{"notes-template": "found unknown: variable 'foo' at char 4\n"}},
		{"unknown task", "GET", "/nodes/pve1/tasks/" + url.PathEscape("UPID:pve1:0000ABCD:00123456:6745A0B1:qmstart:100:root@pam:") + "/status", "",
			map[string]string{"upid": "no such task\n"}},
	}
	for _, tt := range refused {
		r := mustDo(t, tt.method, api+tt.path, demoAuth, formType, tt.body)
		if r.status != 400 || r.reason != "Parameter verification failed." || r.message != "Parameter verification failed.\n" {
			t.Errorf("%s: %d %q, want 400 Parameter verification failed.", tt.name, r.status, r.reason)
			continue
		}
		if len(r.errors) != len(tt.errors) {
			t.Errorf("%s: errors %q, want %q", tt.name, r.errors, tt.errors)
		}
		for k, want := range tt.errors {
			if r.errors[k] != want {
				t.Errorf("%s: %s = %q, want %q", tt.name, k, r.errors[k], want)
			}
		}
	}
	if n := len(sim.Tasks()); n != 0 {
		t.Errorf("%d tasks started by refused requests", n)
	}

	accepted := []struct{ name, method, path, body, ctype string }{
		{"snapshot name with a dash", "POST", "/nodes/pve1/qemu/100/snapshot", "snapname=snap-1&vmstate=0", formType},
		{"JSON boolean", "POST", "/nodes/pve1/lxc/200/snapshot", `{"snapname":"snap-2","description":"x"}`, "application/json"},
		{"empty optional value is absent", "GET", "/nodes/pve1/qemu/100/config?current=", "", ""},
		{"password of 256 characters", "POST", "/storage", url.Values{"storage": {"pbs8"}, "type": {"pbs"}, "server": {"pbs.lan"}, "datastore": {"d"}, "password": {strings.Repeat("é", 256)}}.Encode(), formType},
	}
	for _, tt := range accepted {
		if r := mustDo(t, tt.method, api+tt.path, demoAuth, tt.ctype, tt.body); r.status != 200 {
			t.Errorf("%s: %d %s, want 200", tt.name, r.status, r.raw)
		}
	}
}

// TestUndecodableBody: a JSON body pveproxy cannot decode (an empty one included: decode_json
// dies on it) is its 500, before the permission check; nothing runs.
func TestUndecodableBody(t *testing.T) {
	t.Parallel()
	sim, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: -1})
	audit := "PVEAPIToken=" + simpve.AuditTokenID + "=" + simpve.DemoSecret
	for _, tt := range []struct{ auth, body string }{{demoAuth, ""}, {demoAuth, `{"snapname":`}, {audit, "[1]"}} {
		r := mustDo(t, "POST", api+"/nodes/pve1/qemu/100/snapshot", tt.auth, "application/json", tt.body)
		if r.status != 500 || !strings.Contains(r.message, "unable to parse request body") {
			t.Errorf("JSON body %q = %d %q, want 500 unable to parse request body", tt.body, r.status, r.message)
		}
	}
	if n := len(sim.Tasks()); n != 0 {
		t.Errorf("%d tasks started", n)
	}
}

// TestCheckOrder pins rest_handler's order: parameters contradicting the path (400), the
// permission check (403), the node the method is proxied to (500), then the parameter checks.
func TestCheckOrder(t *testing.T) {
	t.Parallel()
	sim, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: -1})
	audit := "PVEAPIToken=" + simpve.AuditTokenID + "=" + simpve.DemoSecret
	for _, tt := range []struct {
		name, auth, path, body string
		status                 int
		reason                 string
		errors                 map[string]string
	}{
		{"a body vmid other than the path's", demoAuth, "/nodes/pve1/qemu/100/snapshot", "snapname=s1&vmid=101", 400, "Parameter verification failed.",
			map[string]string{"vmid": "duplicate parameter (already defined in URI) with conflicting values!\n"}},
		{"the same vmid in the body", demoAuth, "/nodes/pve1/qemu/100/snapshot", "snapname=s1&vmid=100", 200, "OK", nil},
		{"permission before parameters", audit, "/nodes/pve1/qemu/100/snapshot", "snapname=s1&vmstate=true", 403, "Permission check failed (/vms/100, VM.Snapshot)", nil},
		{"unknown node before parameters", demoAuth, "/nodes/pve9/qemu/100/snapshot", "snapname=s1&vmstate=true", 500,
			"hostname lookup 'pve9' failed - failed to get address info for: pve9: Name or service not known", nil},
	} {
		r := mustDo(t, "POST", api+tt.path, tt.auth, formType, tt.body)
		if r.status != tt.status || r.reason != tt.reason {
			t.Errorf("%s: %d %q, want %d %q", tt.name, r.status, r.reason, tt.status, tt.reason)
		}
		for k, want := range tt.errors {
			if r.errors[k] != want {
				t.Errorf("%s: %s = %q, want %q", tt.name, k, r.errors[k], want)
			}
		}
	}
	if n := len(sim.Tasks()); n != 1 {
		t.Errorf("%d tasks started, want the one accepted snapshot", n)
	}
}
