package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
)

// demoCase is one scripted command of the tour and the outcome it must have.
type demoCase struct {
	title          string
	verb           string
	endpoint       int64 // 0: no endpointid
	idempotencyKey string
	data           string
	wantStatus     int
	wantResult     string
	wantReason     string
	wantReplayed   bool
	// dryRun sends the command as a dry run (contract §4a).
	dryRun bool
	// decision, "command.approve" or "command.reject", is sent by demoApprover once the
	// command awaits approval (contract §4b).
	decision string
	// keep names the result kept for later cases; dataFrom, when set, makes the data from the
	// kept results instead of data (a restore of the backup an earlier case made).
	keep     string
	dataFrom func(kept map[string]events.Result) string
}

// demoBackupVolID is the volume id of the backup the kept result name made ("" when none).
func demoBackupVolID(kept map[string]events.Result, name string) string {
	var out struct {
		VolID string `json:"volid"`
	}
	_ = json.Unmarshal(kept[name].Output, &out)
	return out.VolID
}

// demoApprover is the actor who decides on the tour's commands that need approval; the tour's
// own commands are the actor "demo"'s.
const demoApprover = "demo-approver"

const demoFingerprint = "AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89"

func pbsData(storage, datastore string) string {
	return fmt.Sprintf(`{"storage":%q,"server":"pbs.demo.lan","datastore":%q,"username":"backup@pbs!proxbus","password":"demo-pbs-secret","fingerprint":%q}`,
		storage, datastore, demoFingerprint)
}

// demoTour is every implemented verb's main paths.
func demoTour(run string, image DemoImage) []demoCase {
	key := "demo-key-" + run
	return []demoCase{
		{title: "create a PBS storage", verb: "storage.pbs.create", endpoint: 1, idempotencyKey: key,
			data: pbsData("pbs-"+run, "store1"), wantStatus: 201, wantResult: "created"},
		{title: "replay with the same Idempotency-Key", verb: "storage.pbs.create", endpoint: 1, idempotencyKey: key,
			data: pbsData("pbs-"+run, "store1"), wantStatus: 201, wantResult: "created", wantReplayed: true},
		{title: "same key, different body", verb: "storage.pbs.create", endpoint: 1, idempotencyKey: key,
			data: pbsData("pbs-"+run, "store2"), wantStatus: 422, wantResult: "refused", wantReason: "idempotency_key_reused"},
		{title: "create it again without a key", verb: "storage.pbs.create", endpoint: 1,
			data: pbsData("pbs-"+run, "store1"), wantStatus: 200, wantResult: "already_present"},
		{title: "same id, different datastore", verb: "storage.pbs.create", endpoint: 1,
			data: pbsData("pbs-"+run, "store9"), wantStatus: 409, wantResult: "refused", wantReason: "storage_conflict"},
		{title: "read-only endpoint", verb: "storage.pbs.create", endpoint: 2,
			data: pbsData("pbs-ro-"+run, "store1"), wantStatus: 403, wantResult: "refused", wantReason: "endpoint_writes_disabled"},
		{title: "no endpoint", verb: "storage.pbs.create",
			data: pbsData("pbs-x-"+run, "store1"), wantStatus: 403, wantResult: "refused", wantReason: "endpoint_id_required"},
		{title: "invalid body", verb: "storage.pbs.create", endpoint: 1,
			data: `{"storage":"1bad","server":"pbs.demo.lan","password":"demo-pbs-secret"}`, wantStatus: 422, wantResult: "refused", wantReason: "invalid_body"},

		{title: "list the guests", verb: "vm.list", endpoint: 1, data: `{}`, wantStatus: 200, wantResult: "ok"},
		{title: "read a VM's configuration", verb: "vm.config.get", endpoint: 1, data: `{"vm":"db-01"}`, wantStatus: 200, wantResult: "ok"},
		{title: "start a stopped VM by name", verb: "vm.start", endpoint: 1, data: `{"vm":"db-01"}`, wantStatus: 200, wantResult: "ok"},
		{title: "start a running VM", verb: "vm.start", endpoint: 1, data: `{"vm":100}`, wantStatus: 200, wantResult: "already_running"},
		{title: "stop a stopped container", verb: "vm.stop", endpoint: 1, data: `{"vm":"201"}`, wantStatus: 200, wantResult: "already_stopped"},
		{title: "suspend and resume a VM", verb: "vm.suspend", endpoint: 1, data: `{"vm":"web-01"}`, wantStatus: 200, wantResult: "ok"},
		{title: "resume it", verb: "vm.resume", endpoint: 1, data: `{"vm":"web-01"}`, wantStatus: 200, wantResult: "ok"},
		{title: "force-reboot a container (stop + start)", verb: "vm.reboot", endpoint: 1, data: `{"vm":200,"force":true}`, wantStatus: 200, wantResult: "ok"},
		{title: "suspend a container", verb: "vm.suspend", endpoint: 1, data: `{"vm":200}`, wantStatus: 409, wantResult: "refused", wantReason: "unsupported_for_container"},
		{title: "reboot a stopped VM", verb: "vm.reboot", endpoint: 1, data: `{"vm":103}`, wantStatus: 409, wantResult: "refused", wantReason: "vm_not_running"},
		{title: "a name two guests share", verb: "vm.start", endpoint: 1, data: `{"vm":"dup"}`, wantStatus: 409, wantResult: "refused", wantReason: "vm_ambiguous"},
		{title: "an unknown guest", verb: "vm.stop", endpoint: 1, data: `{"vm":"nope"}`, wantStatus: 404, wantResult: "refused", wantReason: "vm_not_found"},
		{title: "list a container's snapshots", verb: "vm.snapshot.list", endpoint: 1, data: `{"vm":200}`, wantStatus: 200, wantResult: "ok"},
		{title: "take a snapshot", verb: "vm.snapshot.create", endpoint: 1, data: `{"vm":200,"snapshot":"demo","description":"from the tour"}`, wantStatus: 201, wantResult: "created"},
		{title: "roll back to it", verb: "vm.snapshot.rollback", endpoint: 1, data: `{"vm":200,"snapshot":"demo"}`, wantStatus: 200, wantResult: "ok"},
		{title: "delete it", verb: "vm.snapshot.delete", endpoint: 1, data: `{"vm":200,"snapshot":"demo"}`, wantStatus: 200, wantResult: "ok"},
		{title: "the reserved snapshot name", verb: "vm.snapshot.create", endpoint: 1, data: `{"vm":200,"snapshot":"current"}`, wantStatus: 422, wantResult: "refused", wantReason: "reserved_snapshot_name"},
		{title: "back up a VM to the PBS storage created above", verb: "vm.backup", endpoint: 1, keep: "backup",
			data: `{"vm":"web-01","storage":"pbs-` + run + `","notes_template":"{{guestname}}, from the tour"}`, wantStatus: 201, wantResult: "created"},
		{title: "back up to a storage without content backup", verb: "vm.backup", endpoint: 1, data: `{"vm":100,"storage":"local-lvm"}`,
			wantStatus: 409, wantResult: "refused", wantReason: "backup_storage_unavailable"},
		{title: "list the PBS storage's backups", verb: "vm.backup.list", endpoint: 1, data: `{"storage":"pbs-` + run + `"}`,
			wantStatus: 200, wantResult: "ok"},
		{title: "restore the VM backed up above into a new vmid", verb: "vm.restore", endpoint: 1,
			dataFrom: func(kept map[string]events.Result) string {
				return fmt.Sprintf(`{"archive":%q,"vmid":320,"target_node":"pve1","storage":"local-lvm"}`, demoBackupVolID(kept, "backup"))
			}, wantStatus: 201, wantResult: "created"},
		{title: "restore it again into the same vmid, without force", verb: "vm.restore", endpoint: 1,
			dataFrom: func(kept map[string]events.Result) string {
				return fmt.Sprintf(`{"archive":%q,"vmid":320,"target_node":"pve1","storage":"local-lvm"}`, demoBackupVolID(kept, "backup"))
			}, wantStatus: 409, wantResult: "refused", wantReason: "vm_exists"},
		{title: "restore a backup that does not exist", verb: "vm.restore", endpoint: 1,
			data:       `{"archive":"local:backup/vzdump-qemu-100-2020_01_01-00_00_00.vma.zst","vmid":321,"target_node":"pve1"}`,
			wantStatus: 404, wantResult: "refused", wantReason: "backup_not_found"},
		{title: "delete a protected backup", verb: "vm.backup.delete", endpoint: 1,
			data:       `{"volid":"local:backup/vzdump-lxc-200-2026_11_30-02_10_00.tar.zst"}`,
			wantStatus: 409, wantResult: "refused", wantReason: "backup_protected"},
		{title: "delete the backup the tour made", verb: "vm.backup.delete", endpoint: 1,
			dataFrom: func(kept map[string]events.Result) string {
				return fmt.Sprintf(`{"volid":%q}`, demoBackupVolID(kept, "backup"))
			}, wantStatus: 200, wantResult: "ok"},
		{title: "delete it again", verb: "vm.backup.delete", endpoint: 1,
			dataFrom: func(kept map[string]events.Result) string {
				return fmt.Sprintf(`{"volid":%q}`, demoBackupVolID(kept, "backup"))
			}, wantStatus: 200, wantResult: "already_absent"},
		{title: "plan the provision below (a dry run: nothing is written)", verb: "vm.provision", endpoint: 1, dryRun: true,
			data:       `{"source":{"template_vmid":8000},"new_vmid":310,"new_name":"demo-310","target_node":"pve2","storage":"local-lvm","memory_mb":2048}`,
			wantStatus: 200, wantResult: "planned"},
		{title: "provision across nodes: clone from the shared template, relocate the disk to local storage", verb: "vm.provision", endpoint: 1,
			data: `{"source":{"template_vmid":8000},"new_vmid":310,"new_name":"demo-310","target_node":"pve2","storage":"local-lvm","memory_mb":2048,"cores":2,"disk_gb":10,` +
				`"cloud_init":{"user":"ops","password":"demo-ci-secret","ssh_keys":["ssh-ed25519 AAAAC3Nza demo@proxbus"],"ipconfig0":"ip=dhcp"},"extra_networks":[{"index":1,"bridge":"vmbr1","vlan_tag":20}]}`,
			wantStatus: 201, wantResult: "created"},
		{title: "provision from a cloud image downloaded by Proxmox", verb: "vm.provision", endpoint: 1,
			data:       fmt.Sprintf(`{"source":{"image":{"url":%q,"checksum":%q,"checksum_algorithm":"sha256"}},"new_vmid":311,"new_name":"demo-311","target_node":"pve2","storage":"local-lvm"}`, image.URL, image.SHA256),
			wantStatus: 201, wantResult: "created"},
		{title: "provision a container from the Debian template: nesting, a root password, two NICs, started", verb: "ct.provision", endpoint: 1,
			data: `{"new_vmid":330,"hostname":"demo-ct-330","target_node":"pve2","ostemplate":"local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",` +
				`"storage":"local-lvm","rootfs_gb":8,"memory_mb":1024,"nesting":true,"password":"demo-ct-secret","ssh_keys":["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDemo demo@proxbus"],` +
				`"net":[{"index":0,"bridge":"vmbr0","ip":"dhcp"},{"index":1,"bridge":"vmbr1","vlan_tag":20,"ip":"10.20.0.50/24","gw":"10.20.0.1"}]}`,
			wantStatus: 201, wantResult: "created"},
		{title: "a container from a template the node does not have", verb: "ct.provision", endpoint: 1,
			data:       `{"new_vmid":331,"hostname":"demo-ct-331","target_node":"pve2","ostemplate":"local:vztmpl/alpine-3.20-default_20240908_amd64.tar.xz","storage":"local-lvm","rootfs_gb":2}`,
			wantStatus: 404, wantResult: "refused", wantReason: "template_not_found"},
		{title: "extra NICs while the cloud network is enforced", verb: "vm.provision", endpoint: 1,
			data:       `{"source":{"template_vmid":9000},"new_vmid":312,"new_name":"demo-312","target_node":"pve1","enforce_cloud_network":true,"extra_networks":[{"index":1,"bridge":"vmbr1"}]}`,
			wantStatus: 422, wantResult: "refused", wantReason: "extra_networks_locked"},
		{title: "migrate a VM whose disk is on local storage, without with_local_disks (by vmid: the restored copy shares its name)", verb: "vm.migrate", endpoint: 1,
			data: `{"vm":100,"target_node":"pve2"}`, wantStatus: 409, wantResult: "refused", wantReason: "migration_precondition_failed"},
		{title: "migrate a VM with PCI passthrough", verb: "vm.migrate", endpoint: 1,
			data: `{"vm":"db-01","target_node":"pve1","with_local_disks":true}`, wantStatus: 409, wantResult: "refused", wantReason: "migration_precondition_failed"},
		{title: "live-migrate a running VM off the node about to reboot", verb: "vm.migrate", endpoint: 1,
			data: `{"vm":"app-01","target_node":"pve1"}`, wantStatus: 200, wantResult: "ok"},
		{title: "migrate it there again", verb: "vm.migrate", endpoint: 1,
			data: `{"vm":"app-01","target_node":"pve1"}`, wantStatus: 200, wantResult: "already_present"},
		{title: "reboot a node: it needs approval, and a second person rejects it", verb: "node.reboot", endpoint: 1, data: `{"node":"pve3"}`,
			decision: "command.reject", wantStatus: 403, wantResult: "refused", wantReason: "approval_rejected"},
		{title: "delete a protected VM (protection: 1), even with stop_first, once approved", verb: "vm.delete", endpoint: 1, data: `{"vm":"db-01","stop_first":true}`,
			decision: "command.approve", wantStatus: 409, wantResult: "refused", wantReason: "vm_protected"},
		{title: "delete the VM the tour cloned (running), approved by a second person: a hard stop, then the delete", verb: "vm.delete", endpoint: 1,
			data: `{"vm":310,"stop_first":true}`, decision: "command.approve", wantStatus: 200, wantResult: "ok"},
		{title: "delete it again, approved", verb: "vm.delete", endpoint: 1, data: `{"vm":310}`, decision: "command.approve",
			wantStatus: 200, wantResult: "already_absent"},
		{title: "rotate the PBS storage's token: a new token id and its secret", verb: "storage.pbs.update", endpoint: 1,
			data: `{"storage":"pbs-` + run + `","username":"backup@pbs!rotated","password":"demo-pbs-rotated-secret"}`, wantStatus: 200, wantResult: "ok"},
		{title: "the token id it has now, without a secret", verb: "storage.pbs.update", endpoint: 1,
			data: `{"storage":"pbs-` + run + `","username":"backup@pbs!rotated"}`, wantStatus: 200, wantResult: "already_present"},
		{title: "retire the PBS storage (the backups on the PBS stay)", verb: "storage.pbs.delete", endpoint: 1,
			data: `{"storage":"pbs-` + run + `"}`, wantStatus: 200, wantResult: "ok"},
		{title: "retire it again", verb: "storage.pbs.delete", endpoint: 1, data: `{"storage":"pbs-` + run + `"}`, wantStatus: 200, wantResult: "already_absent"},
		{title: "rotate a storage that is not PBS", verb: "storage.pbs.update", endpoint: 1,
			data: `{"storage":"local-lvm","fingerprint":"` + demoFingerprint + `"}`, wantStatus: 404, wantResult: "refused", wantReason: "storage_not_found"},
	}
}

// demoDecide sends decision (command.approve or command.reject) on cmd as demoApprover and
// prints its answer.
func demoDecide(ctx context.Context, js jetstream.JetStream, subjects events.Subjects, decision string, cmd events.Command, w io.Writer) {
	data, _ := json.Marshal(map[string]string{"command_id": cmd.ID, "command_source": cmd.Source})
	d := events.Command{ID: cmd.ID + "-decision", Source: cmd.Source, Verb: decision, Actor: demoApprover, Data: data}
	res, err := Send(ctx, js, subjects, d, false, nil)
	if err != nil {
		fmt.Fprintf(w, "  %s by %s: no answer: %v\n", decision, demoApprover, err)
		return
	}
	fmt.Fprintf(w, "  %s by %s: %d %s %s\n", decision, demoApprover, res.Status, res.Result, res.Reason)
}

// printPlan prints a dry run's plan: the writes it would send and what it expects.
func printPlan(w io.Writer, res events.Result) {
	var out struct {
		Plan struct {
			Outcome *struct {
				Status int    `json:"status"`
				Result string `json:"result"`
			} `json:"outcome"`
			Writes []struct {
				Method string `json:"method"`
				Path   string `json:"path"`
			} `json:"writes"`
			Stopped string `json:"stopped"`
		} `json:"plan"`
	}
	if json.Unmarshal(res.Output, &out) != nil {
		return
	}
	for _, wr := range out.Plan.Writes {
		fmt.Fprintf(w, "  plan: %s %s\n", wr.Method, wr.Path)
	}
	if o := out.Plan.Outcome; o != nil {
		fmt.Fprintf(w, "  plan: expects %d %s\n", o.Status, o.Result)
	}
	if out.Plan.Stopped != "" {
		fmt.Fprintf(w, "  plan: %s\n", out.Plan.Stopped)
	}
}

// RunDemo plays the scripted tour against a running proxbus, printing every step and result to
// w. It returns an error naming each case whose outcome was not the expected one.
func RunDemo(ctx context.Context, js jetstream.JetStream, subjects events.Subjects, image DemoImage, w io.Writer) error {
	w = &lockedWriter{w: w} // the approver's goroutine prints while the command's steps do
	run := fmt.Sprint(time.Now().Unix())
	var failed []string
	kept := map[string]events.Result{}
	for i, c := range demoTour(run, image) {
		if c.dataFrom != nil {
			c.data = c.dataFrom(kept)
		}
		cmd := events.Command{
			ID: fmt.Sprintf("demo-%s-%02d", run, i+1), Source: "urn:proxbus:demo", Type: "proxbus." + c.verb, Verb: c.verb,
			EndpointID: c.endpoint, HasEndpointID: c.endpoint != 0, IdempotencyKey: c.idempotencyKey,
			Actor: "demo", DryRun: c.dryRun, Data: json.RawMessage(c.data),
		}
		fmt.Fprintf(w, "\n▶ %s (%s)\n", c.title, c.verb)
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		var decided sync.WaitGroup
		var decideOnce sync.Once
		res, err := Send(cctx, js, subjects, cmd, false, func(st events.Step) {
			fmt.Fprintf(w, "  step %d %s %s %s\n", st.Seq, st.Step, st.Status, st.Detail)
			if c.decision != "" && st.Status == events.StepWaiting && st.Detail == "awaiting approval" {
				decideOnce.Do(func() { decided.Go(func() { demoDecide(cctx, js, subjects, c.decision, cmd, w) }) })
			}
		})
		decided.Wait()
		cancel()
		if err != nil {
			fmt.Fprintf(w, "  ✗ no result: %v\n", err)
			failed = append(failed, c.title)
			continue
		}
		out, _ := json.Marshal(res)
		fmt.Fprintf(w, "  result %s\n", out)
		if c.dryRun {
			printPlan(w, res)
		}
		if res.Status != c.wantStatus || res.Result != c.wantResult || res.Reason != c.wantReason || res.Replayed != c.wantReplayed {
			fmt.Fprintf(w, "  ✗ expected status %d result %q reason %q replayed %v\n", c.wantStatus, c.wantResult, c.wantReason, c.wantReplayed)
			failed = append(failed, c.title)
			continue
		}
		if c.keep != "" {
			kept[c.keep] = res
		}
		fmt.Fprintf(w, "  ✓ %d %s\n", res.Status, res.Result)
	}
	if len(failed) > 0 {
		return fmt.Errorf("demo: %d case(s) did not match: %s", len(failed), strings.Join(failed, "; "))
	}
	fmt.Fprintln(w, "\ndemo: every outcome matched")
	return nil
}

// lockedWriter serialises the writes of several goroutines to one writer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
