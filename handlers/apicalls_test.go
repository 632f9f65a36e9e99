package handlers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/events"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// taskStatusRoute is the task status poll: how many a task costs depends on how long it runs
// and on the poll curve, so the polls are counted apart from a verb's requests.
const taskStatusRoute = "GET /nodes/{node}/tasks/{upid}/status"

// apiCallCase is one verb's happy path on the demo cluster and the Proxmox requests it sends
// (method and schema path, in order, task status polls left out) with the task status polls
// counted apart. docs/api-calls.md explains every row.
type apiCallCase struct {
	name, verb, data string
	status           int
	result           string
	calls            []string
	polls            int
}

// apiCallCases are the demo tour's happy paths (internal/app/demo.go), in its order, on one
// simulated cluster: the backup goes to the PBS storage the first case creates, the restore
// and the backup deletion use the demo cluster's backup of web-01 in local on pve1 (the tour
// restores and deletes the backup it made), the delete removes the VM the template provision
// made, and the node reboot comes last.
func apiCallCases(image, imageSHA256 string) []apiCallCase {
	const (
		resources   = "GET /cluster/resources?type=vm"
		storages    = "GET /cluster/resources?type=storage"
		qemuStatus  = "GET /nodes/{node}/qemu/{vmid}/status/current"
		qemuConfig  = "GET /nodes/{node}/qemu/{vmid}/config"
		lxcSnapshot = "GET /nodes/{node}/lxc/{vmid}/snapshot"
	)
	return []apiCallCase{
		{name: "storage.pbs.create", verb: "storage.pbs.create", data: pbsData("pbs-api"), status: 201, result: ResultCreated,
			calls: []string{"GET /storage", "POST /storage"}},
		{name: "vm.list", verb: "vm.list", data: `{}`, status: 200, result: ResultOK,
			calls: []string{resources}},
		{name: "vm.config.get", verb: "vm.config.get", data: `{"vm":"db-01"}`, status: 200, result: ResultOK,
			calls: []string{resources, qemuConfig}},
		{name: "vm.start (stopped VM)", verb: "vm.start", data: `{"vm":"db-01"}`, status: 200, result: ResultOK,
			calls: []string{resources, qemuStatus, "POST /nodes/{node}/qemu/{vmid}/status/start"}, polls: 1},
		{name: "vm.stop (running VM)", verb: "vm.stop", data: `{"vm":"db-01"}`, status: 200, result: ResultOK,
			calls: []string{resources, qemuStatus, "POST /nodes/{node}/qemu/{vmid}/status/shutdown"}, polls: 1},
		{name: "vm.suspend", verb: "vm.suspend", data: `{"vm":"web-01"}`, status: 200, result: ResultOK,
			calls: []string{resources, qemuStatus, "POST /nodes/{node}/qemu/{vmid}/status/suspend"}, polls: 1},
		{name: "vm.resume", verb: "vm.resume", data: `{"vm":"web-01"}`, status: 200, result: ResultOK,
			calls: []string{resources, qemuStatus, "POST /nodes/{node}/qemu/{vmid}/status/resume"}, polls: 1},
		{name: "vm.reboot (VM)", verb: "vm.reboot", data: `{"vm":"web-01"}`, status: 200, result: ResultOK,
			calls: []string{resources, qemuStatus, "POST /nodes/{node}/qemu/{vmid}/status/reboot"}, polls: 1},
		{name: "vm.reboot (container, force)", verb: "vm.reboot", data: `{"vm":200,"force":true}`, status: 200, result: ResultOK,
			calls: []string{resources, "GET /nodes/{node}/lxc/{vmid}/status/current",
				"POST /nodes/{node}/lxc/{vmid}/status/stop", "POST /nodes/{node}/lxc/{vmid}/status/start"}, polls: 2},
		{name: "vm.snapshot.list", verb: "vm.snapshot.list", data: `{"vm":200}`, status: 200, result: ResultOK,
			calls: []string{resources, lxcSnapshot}},
		{name: "vm.snapshot.create", verb: "vm.snapshot.create", data: `{"vm":200,"snapshot":"demo","description":"from the tour"}`,
			status: 201, result: ResultCreated,
			calls: []string{resources, lxcSnapshot, "POST /nodes/{node}/lxc/{vmid}/snapshot"}, polls: 1},
		{name: "vm.snapshot.rollback", verb: "vm.snapshot.rollback", data: `{"vm":200,"snapshot":"demo"}`, status: 200, result: ResultOK,
			calls: []string{resources, lxcSnapshot, "POST /nodes/{node}/lxc/{vmid}/snapshot/{snapname}/rollback"}, polls: 1},
		{name: "vm.snapshot.delete", verb: "vm.snapshot.delete", data: `{"vm":200,"snapshot":"demo"}`, status: 200, result: ResultOK,
			calls: []string{resources, lxcSnapshot, "DELETE /nodes/{node}/lxc/{vmid}/snapshot/{snapname}"}, polls: 1},
		{name: "vm.snapshot.create (running VM, include_memory)", verb: "vm.snapshot.create",
			data: `{"vm":"app-01","snapshot":"demoram","include_memory":true}`, status: 201, result: ResultCreated,
			calls: []string{resources, qemuStatus, "GET /nodes/{node}/qemu/{vmid}/snapshot", "POST /nodes/{node}/qemu/{vmid}/snapshot"}, polls: 1},
		{name: "vm.backup", verb: "vm.backup", data: `{"vm":"web-01","storage":"pbs-api","notes_template":"{{guestname}}, from the tour"}`,
			status: 201, result: ResultCreated,
			calls: []string{resources, storages, "GET /nodes/{node}/tasks", "POST /nodes/{node}/vzdump", "GET /nodes/{node}/tasks/{upid}/log", "GET /nodes/{node}/storage/{storage}/content"}, polls: 1},
		{name: "vm.backup.list", verb: "vm.backup.list", data: `{"storage":"pbs-api"}`, status: 200, result: ResultOK,
			calls: []string{storages, "GET /nodes/{node}/storage/{storage}/content"}},
		{name: "vm.restore (VM, new vmid)", verb: "vm.restore",
			data:   `{"archive":"` + simpve.DemoBackupWeb + `","vmid":320,"target_node":"pve1","storage":"local-lvm"}`,
			status: 201, result: ResultCreated,
			calls: []string{storages, "GET /nodes/{node}/storage/{storage}/content", storages, "GET /nodes/{node}/storage/{storage}/content",
				resources, "POST /nodes/{node}/qemu"}, polls: 1},
		{name: "vm.backup.delete", verb: "vm.backup.delete", data: `{"volid":"` + simpve.DemoBackupWeb + `"}`, status: 200, result: ResultOK,
			calls: []string{storages, "GET /nodes/{node}/storage/{storage}/content", storages, "GET /nodes/{node}/storage/{storage}/content",
				"DELETE /nodes/{node}/storage/{storage}/content/{volume}"}, polls: 1},
		{name: "vm.provision (template, across nodes)", verb: "vm.provision",
			data: `{"source":{"template_vmid":8000},"new_vmid":310,"new_name":"demo-310","target_node":"pve2","storage":"local-lvm","memory_mb":2048,"cores":2,"disk_gb":10,` +
				`"cloud_init":{"user":"ops","password":"demo-ci-secret","ssh_keys":["ssh-ed25519 AAAAC3Nza demo@proxbus"],"ipconfig0":"ip=dhcp"},"extra_networks":[{"index":1,"bridge":"vmbr1","vlan_tag":20}]}`,
			status: 201, result: ResultCreated,
			calls: []string{"GET /nodes/{node}/network", resources, storages, qemuConfig,
				"POST /nodes/{node}/qemu/{vmid}/clone", qemuConfig, "POST /nodes/{node}/qemu/{vmid}/move_disk",
				"POST /nodes/{node}/qemu/{vmid}/config", "PUT /nodes/{node}/qemu/{vmid}/resize",
				"POST /nodes/{node}/qemu/{vmid}/status/start"}, polls: 5},
		{name: "vm.provision (cloud image)", verb: "vm.provision",
			data: fmt.Sprintf(`{"source":{"image":{"url":%q,"checksum":%q,"checksum_algorithm":"sha256"}},"new_vmid":311,"new_name":"demo-311","target_node":"pve2","storage":"local-lvm"}`,
				image, imageSHA256),
			status: 201, result: ResultCreated,
			calls: []string{storages, "GET /nodes/{node}/storage/{storage}/content", "POST /nodes/{node}/storage/{storage}/download-url",
				"POST /nodes/{node}/qemu", qemuConfig,
				"POST /nodes/{node}/qemu/{vmid}/status/start"}, polls: 3},
		{name: "ct.provision (a container from a template, two NICs)", verb: "ct.provision",
			data: `{"new_vmid":321,"hostname":"demo-ct-321","target_node":"pve2","ostemplate":"local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",` +
				`"storage":"local-lvm","rootfs_gb":8,"memory_mb":1024,"nesting":true,"password":"demo-ct-secret",` +
				`"net":[{"index":0,"bridge":"vmbr0","ip":"dhcp"},{"index":1,"bridge":"vmbr1","vlan_tag":20,"ip":"10.20.0.50/24","gw":"10.20.0.1"}]}`,
			status: 201, result: ResultCreated,
			calls: []string{"GET /nodes/{node}/network", storages, "GET /nodes/{node}/storage/{storage}/content",
				"POST /nodes/{node}/lxc", "POST /nodes/{node}/lxc/{vmid}/status/start"}, polls: 2},
		{name: "vm.migrate (running VM, live)", verb: "vm.migrate", data: `{"vm":"app-01","target_node":"pve1"}`, status: 200, result: ResultOK,
			calls: []string{resources, "GET /nodes", "GET /nodes/{node}/qemu/{vmid}/migrate", "POST /nodes/{node}/qemu/{vmid}/migrate"}, polls: 1},
		{name: "vm.delete (running VM, stop_first)", verb: "vm.delete", data: `{"vm":310,"stop_first":true}`, status: 200, result: ResultOK,
			calls: []string{resources, resources, qemuStatus, qemuConfig, "POST /nodes/{node}/qemu/{vmid}/status/stop",
				"DELETE /nodes/{node}/qemu/{vmid}"}, polls: 2},
		{name: "storage.pbs.update (rotate the token secret)", verb: "storage.pbs.update",
			data: `{"storage":"pbs-api","password":"demo-rotated-secret","username":"backup@pbs!rotated"}`, status: 200, result: ResultOK,
			calls: []string{"GET /storage/{storage}", "PUT /storage/{storage}"}},
		{name: "storage.pbs.delete (retire the storage)", verb: "storage.pbs.delete", data: `{"storage":"pbs-api"}`, status: 200, result: ResultOK,
			calls: []string{"GET /storage/{storage}", "DELETE /storage/{storage}"}},
		{name: "node.reboot", verb: "node.reboot", data: `{"node":"pve3"}`, status: 200, result: ResultOK,
			calls: []string{"POST /nodes/{node}/status"}},
	}
}

// TestAPICallsPerVerb pins the Proxmox requests of every verb's happy path, on the demo
// cluster with tasks that end at once (each task costs exactly one status poll): a change that
// adds a request to a verb fails here, and its row in docs/api-calls.md must say why.
func TestAPICallsPerVerb(t *testing.T) {
	t.Parallel()
	image, sum := serveCloudImage(t, "api-cloudimg-amd64.img")

	e := newRTEnv(t) // TaskDuration -1, a fixed 1 ms task poll interval
	e.pve.SetNodeRebootDuration(-1)
	seen := 0
	for i, tc := range apiCallCases(image, sum) {
		runVerb(t, e, tc.verb, fmt.Sprintf("api-%02d", i+1), tc.data, tc.status, tc.result)
		log := e.pve.RequestLog()
		calls, polls := apiCalls(log[seen:])
		seen = len(log)
		t.Logf("%s: %d requests, %d task polls", tc.name, len(calls), polls)
		if !slices.Equal(calls, tc.calls) || polls != tc.polls {
			t.Errorf("%s: requests\n\t%s\n(%d task polls), want\n\t%s\n(%d task polls)", tc.name,
				strings.Join(calls, "\n\t"), polls, strings.Join(tc.calls, "\n\t"), tc.polls)
		}
	}
}

// serveCloudImage serves a small qcow2-looking image for vm.provision's cloud-image path for
// the test's life and returns its URL, ending in name, and its sha256 in hex.
func serveCloudImage(t *testing.T, name string) (url, sha256hex string) {
	t.Helper()
	body := []byte("QFI\xfb" + strings.Repeat("proxbus test cloud image ", 1024))
	img := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) }))
	t.Cleanup(img.Close)
	sum := sha256.Sum256(body)
	return img.URL + "/images/" + name, hex.EncodeToString(sum[:])
}

// runVerb handles cmd as its first delivery and checks its result; a write's journal entry
// must be finalized.
func runVerb(t *testing.T, e *rtEnv, verb, id, data string, status int, result string) {
	t.Helper()
	cmd := events.Command{ID: id, Source: "/test/apicalls", Type: events.TypePrefix + verb, Verb: verb,
		EndpointID: 1, HasEndpointID: true, Data: json.RawMessage(data)}
	if d := e.p.Handle(context.Background(), cmd, events.Delivery{Number: 1}); d.Action != events.Ack {
		t.Fatalf("%s %s: decision %+v, want done", verb, id, d)
	}
	res := e.pub.result(t, id)
	if res.Status != status || res.Result != result {
		t.Fatalf("%s %s: result %d %s %s (%s), want %d %s", verb, id, res.Status, res.Result, res.Reason, res.Detail, status, result)
	}
	if v, ok := e.p.cfg.Registry.Lookup(verb); ok && v.VerbAccess() == Write && !res.Finalized() {
		t.Fatalf("%s %s: journal entry not finalized", verb, id)
	}
}

// apiCalls renders requests as "METHOD /schema/path", task status polls counted apart.
func apiCalls(log []simpve.RequestRecord) (calls []string, polls int) {
	for _, r := range log {
		line := r.Method + " " + r.Route
		if typ := r.Params.Get("type"); r.Route == "/cluster/resources" && typ != "" {
			line += "?type=" + typ // which resources: guests or storages
		}
		if r.Route == "" {
			line = r.Method + " " + r.Path + " (not routed)"
		}
		if line == taskStatusRoute {
			polls++
			continue
		}
		calls = append(calls, line)
	}
	return calls, polls
}
