package simpve_test

import (
	"net/url"
	"strings"
	"testing"

	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// TestCreateContainerRefusals pins what POST /nodes/{node}/lxc refuses as pve-container's
// create_vm does before its worker, and the vzcreate task that fails on a template the node
// does not have; a good create lists the template and makes the container.
func TestCreateContainerRefusals(t *testing.T) {
	t.Parallel()
	sim, base := start(t, simpve.ScenarioDemo)
	sim.SetTaskDuration(-1) // tasks end at once
	api := base + "/api2/json"
	form := func(edits map[string]string) string {
		f := url.Values{"vmid": {"330"}, "ostemplate": {simpve.DemoCTTemplate}, "storage": {"local-lvm"}, "rootfs": {"local-lvm:4"},
			"hostname": {"ct-330"}, "net0": {"name=eth0,bridge=vmbr0,ip=dhcp"}}
		for k, v := range edits {
			if v == "" {
				f.Del(k)
				continue
			}
			f.Set(k, v)
		}
		return f.Encode()
	}
	for _, tt := range []struct {
		name    string
		edits   map[string]string
		status  int
		message string // contained in the message or the parameter's error
	}{
		{"vmid in use", map[string]string{"vmid": "200"}, 500, "CT 200 already exists on node 'pve1'"},
		{"password too short", map[string]string{"password": "abc"}, 400, "value must be at least 5 characters long"},
		{"not a template", map[string]string{"ostemplate": "local:iso/debian.iso"}, 500, "content type needs to be 'vztmpl'"},
		{"template storage missing", map[string]string{"ostemplate": "nowhere:vztmpl/x.tar.zst"}, 500, "storage 'nowhere' does not exist"},
		{"storage without rootdir", map[string]string{"rootfs": "images:4"}, 400, "does not support container directories"},
		{"privileged nesting", map[string]string{"unprivileged": "0", "features": "nesting=1"}, 403, "only allowed for root@pam"},
		{"bad ssh key", map[string]string{"ssh-public-keys": "not a key"}, 500, "SSH public key validation error"},
		{"bad nameserver", map[string]string{"nameserver": "dns.example"}, 400, "valid IP address"},
	} {
		r := mustDo(t, "POST", api+"/nodes/pve2/lxc", demoAuth, formType, form(tt.edits))
		text := r.message
		for _, e := range r.errors {
			text += " " + e
		}
		if r.status != tt.status || !strings.Contains(text, tt.message) {
			t.Errorf("%s: %d %s, want %d with %q", tt.name, r.status, r.raw, tt.status, tt.message)
		}
	}
	if _, found := sim.Guest(330); found {
		t.Fatal("a refused create made the container")
	}

	u := upidOf(t, mustDo(t, "POST", api+"/nodes/pve2/lxc", demoAuth, formType, form(map[string]string{"ostemplate": "local:vztmpl/none.tar.zst"})))
	if st := taskStatus(t, api, u); st["exitstatus"] != "unable to create CT 330 - can't find file 'local:vztmpl/none.tar.zst'" {
		t.Errorf("missing template's task: %v", st)
	}
	if _, found := sim.Guest(330); found {
		t.Fatal("a failed create left the container")
	}

	list := mustDo(t, "GET", api+"/nodes/pve2/storage/local/content?content=vztmpl", demoAuth, "", "")
	if !strings.Contains(string(list.data), simpve.DemoCTTemplate) {
		t.Errorf("vztmpl listing %s lacks the demo template", list.data)
	}
	u = upidOf(t, mustDo(t, "POST", api+"/nodes/pve2/lxc", demoAuth, formType, form(nil)))
	if st := taskStatus(t, api, u); st["exitstatus"] != "OK" {
		t.Fatalf("create task: %v", st)
	}
	g, found := sim.Guest(330)
	if !found || g.Config["rootfs"] != "local-lvm:vm-330-disk-0,size=4G" || g.Config["unprivileged"] != "1" ||
		!strings.Contains(g.Config["net0"], "hwaddr=") || g.Config["memory"] != "512" {
		t.Errorf("container %+v", g)
	}
}
