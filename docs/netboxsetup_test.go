package docs_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/handlers"
	"github.com/proxbus/proxbus/internal/ingress"
)

// TestNetBoxSetupRules loads the rules file of docs/netbox-setup.md as proxbus would and maps
// NetBox 4.7 webhook bodies with it: the backup request becomes a vm.backup, the activated
// backup server a storage.pbs.create, each with data the verb accepts; a change that is not a
// request makes no command.
func TestNetBoxSetupRules(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("netbox-setup.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```yaml\n(rules:\n.*?)```").FindSubmatch(raw)
	if m == nil {
		t.Fatal("netbox-setup.md has no rules file")
	}
	rules, err := ingress.ParseRules(m[1])
	if err != nil {
		t.Fatalf("the documented rules do not load: %v", err)
	}
	const fp = "AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89"
	vm := func(requested, before string) string {
		return `{"event":"updated","timestamp":"2026-12-01T10:00:00.1+00:00","object_type":"virtualization.virtualmachine",` +
			`"request":{"id":"r1","user":"alice"},"data":{"id":42,"name":"web-01","status":{"value":"active"},` +
			`"custom_fields":{"proxmox_vm_id":100,"proxmox_endpoint_id":1,"proxbus_backup_requested":` + requested + `}},` +
			`"snapshots":{"prechange":{"custom_fields":{"proxbus_backup_requested":` + before + `}},"postchange":{}}}`
	}
	restore := func(requested, before string) string {
		return `{"event":"updated","timestamp":"2026-12-01T10:00:00.3+00:00","object_type":"virtualization.virtualmachine",` +
			`"request":{"id":"r3","user":"alice"},"data":{"id":42,"name":"web-01","status":{"value":"active"},` +
			`"custom_fields":{"proxmox_vm_id":100,"proxmox_endpoint_id":1,"proxbus_restore_requested":` + requested + `,` +
			`"proxbus_restore_archive":"pbs1:backup/vm/100/2026-12-01T02:00:00Z","proxbus_restore_vmid":420,"proxbus_restore_node":"pve1"}},` +
			`"snapshots":{"prechange":{"custom_fields":{"proxbus_restore_requested":` + before + `}},"postchange":{}}}`
	}
	device := func(status, before string) string {
		return `{"event":"updated","timestamp":"2026-12-01T10:00:00.2+00:00","object_type":"dcim.device",` +
			`"request":{"id":"r2","user":"alice"},"data":{"id":7,"name":"pbs-a","role":{"slug":"backup-server"},"status":{"value":"` + status + `"},` +
			`"custom_fields":{"proxmox_endpoint_id":1,"pbs_storage":"pbs1","pbs_server":"pbs.lan","pbs_datastore":"store1",` +
			`"pbs_token_id":"backup@pbs!proxbus","pbs_fingerprint":"` + fp + `"}},` +
			`"snapshots":{"prechange":{"status":"` + before + `"},"postchange":{}}}`
	}
	tests := []struct {
		name     string
		body     string
		wantVerb string // "": no command
	}{
		{"backup requested", vm("true", "false"), "vm.backup"},
		{"backup still requested", vm("true", "true"), ""},
		{"backup not requested", vm("false", "false"), ""},
		{"restore requested", restore("true", "false"), "vm.restore"},
		{"restore still requested", restore("true", "true"), ""},
		{"backup server activated", device("active", "planned"), "storage.pbs.create"},
		{"backup server already active", device("active", "active"), ""},
	}
	registry := handlers.NewRegistry(handlers.Builtin()...)
	for _, tt := range tests {
		w, err := ingress.ParseWebhook([]byte(tt.body))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		got, ok, err := rules.Map(w)
		switch {
		case err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.wantVerb == "" && ok:
			t.Errorf("%s: rule %s made %s, want no command", tt.name, got.Rule, got.Verb)
		case tt.wantVerb != "" && (!ok || got.Verb != tt.wantVerb || !got.HasEndpointID || got.EndpointID != 1):
			t.Errorf("%s: %+v (matched %v), want %s on endpoint 1", tt.name, got, ok, tt.wantVerb)
		case ok:
			if res, err := registry.Check(got.Verb, got.Data); err != nil || !res.Valid() {
				t.Errorf("%s: %s refuses the rule's data %s: %+v %v", tt.name, got.Verb, strings.ReplaceAll(string(got.Data), "REPLACE", "…"), res, err)
			}
		}
	}
}
