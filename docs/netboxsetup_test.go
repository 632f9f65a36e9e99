package docs_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/handlers"
	"github.com/proxbus/proxbus/internal/ingress"
)

// TestNetBoxSetupRules loads the rules file of docs/netbox-setup.md as proxbus would and maps
// NetBox 4.7 webhook bodies with it: the backup request becomes a vm.backup, setting or
// changing the backup cron field a schedule.add of a vm.backup, clearing it or deleting the VM
// a schedule.remove, the activated backup server a storage.pbs.create, each with data the verb
// (and the scheduled verb) accepts; a change that is not a request makes no command.
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
	vmCron := func(event, cron, before string) string {
		return `{"event":"` + event + `","timestamp":"2026-12-01T10:00:00.3+00:00","object_type":"virtualization.virtualmachine",` +
			`"request":{"id":"r3","user":"alice"},"data":{"id":42,"name":"web-01","status":{"value":"active"},` +
			`"custom_fields":{"proxmox_vm_id":100,"proxmox_endpoint_id":1,"proxbus_backup_cron":` + cron + `}},` +
			`"snapshots":{"prechange":{"custom_fields":{"proxbus_backup_cron":` + before + `}},"postchange":{}}}`
	}
	tests := []struct {
		name     string
		body     string
		wantVerb string // "": no command
	}{
		{"backup schedule set", vmCron("updated", `"0 0 2 * * *"`, `null`), "schedule.add"},
		{"backup schedule changed", vmCron("updated", `"0 30 1 * * *"`, `"0 0 2 * * *"`), "schedule.add"},
		{"backup schedule cleared", vmCron("updated", `null`, `"0 0 2 * * *"`), "schedule.remove"},
		{"VM without a schedule deleted", vmCron("deleted", `null`, `null`), ""},
		{"VM with a schedule deleted", vmCron("deleted", `"0 0 2 * * *"`, `"0 0 2 * * *"`), "schedule.remove"},
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
		case tt.wantVerb != "" && (!ok || got.Verb != tt.wantVerb):
			t.Errorf("%s: %+v (matched %v), want %s", tt.name, got, ok, tt.wantVerb)
		case ok && !strings.HasPrefix(tt.wantVerb, "schedule.") && (!got.HasEndpointID || got.EndpointID != 1):
			t.Errorf("%s: %+v, want endpoint 1", tt.name, got)
		case ok:
			if res, err := registry.Check(got.Verb, got.Data); err != nil || !res.Valid() {
				t.Errorf("%s: %s refuses the rule's data %s: %+v %v", tt.name, got.Verb, strings.ReplaceAll(string(got.Data), "REPLACE", "…"), res, err)
			}
			if got.Verb == "schedule.add" {
				var sc struct {
					Name, Verb string
					EndpointID int64           `json:"endpoint_id"`
					Data       json.RawMessage `json:"data"`
				}
				if err := json.Unmarshal(got.Data, &sc); err != nil || sc.Name != "backup-vm-42" || sc.Verb != "vm.backup" || sc.EndpointID != 1 {
					t.Errorf("%s: schedule %s (%v)", tt.name, got.Data, err)
				}
				if res, err := registry.Check(sc.Verb, sc.Data); err != nil || !res.Valid() {
					t.Errorf("%s: %s refuses the scheduled data %s: %+v %v", tt.name, sc.Verb, sc.Data, res, err)
				}
			}
		}
	}
}
