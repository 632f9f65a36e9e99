package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/proxbus/proxbus/events"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// planned is one message the soak publishes (a duplicate publish reuses its command).
type planned struct {
	cmd    events.Command
	poison *poison // non-nil: a deliberately broken message
	// guest is the guest a power verb, vm.backup, vm.migrate or vm.delete acts on (0
	// otherwise); ops the most Proxmox writes it makes on it (see guestOps).
	guest int64
	ops   int
	dup   bool // publish it a second time (same id, new Nats-Msg-Id)
	// producer is who publishes it (producerNATSGo, producerSDKBinary, producerSDKStructured);
	// poison is always published with nats.go.
	producer string
	// expiresIn, when set, is the command's expires attribute, counted from its publication: a
	// command on a busy guest that may expire while it waits (answered 410, writing nothing).
	expiresIn time.Duration
	// decision, for a command.approve or command.reject of the soak's decider, is what it
	// decides (nil for every other command).
	decision *decisionRef
}

// producerName is p's producer ("natsgo" when none was drawn).
func (p *planned) producerName() string {
	if p.producer == "" || p.poison != nil {
		return producerNATSGo
	}
	return p.producer
}

// poison is a broken message: subject and headers as published, and the body.
type poison struct {
	kind    string
	subject string
	header  map[string]string
	body    []byte
}

// powerGuest is a demo guest the power verbs act on.
type powerGuest struct {
	vmid int64
	lxc  bool
}

// Guests of the demo cluster the soak shares between many commands (contract §10).
var (
	powerGuests = []powerGuest{{100, false}, {101, false}, {102, false}, {105, false}, {200, true}, {201, true}, {202, true}}
	snapGuests  = []int64{100, 102, 200, 202}
	powerVerbs  = []string{"vm.start", "vm.stop", "vm.reboot", "vm.suspend", "vm.resume"}
	// hotGuests are the two guests the --hot-share of the load acts on (a VM and a
	// container), so that commands queue for a busy guest's lease.
	hotGuests = []int64{102, 200}
	// hotMigrants are the hot guests the hot share also migrates between the nodes: VM 102,
	// whose disk and snapshots are on shared storage (ceph), so that Proxmox moves it, live
	// while it runs. (Container 200's root disk and snapshots are on local-lvm, which PVE
	// cannot migrate: "non-migratable snapshot exists".) Power, snapshot and backup commands
	// queued behind such a migration must act where the guest is then.
	hotMigrants = []int64{102}
	// hotHome is where each of hotMigrants starts in the demo scenario.
	hotHome = map[int64]string{102: "pve3"}
	// migrateGuests are the shared guests vm.migrate moves (besides the soak's own VMs): 103
	// and 104 (both named "dup", with local disks and no snapshots; no other verb of the mix
	// uses them, so no command of another verb can find them moved) and 101 (PCI and USB
	// passthrough and a local ISO: always refused 409 migration_precondition_failed).
	migrateGuests = []int64{101, 103, 104}
	// pveNodes are the demo cluster's nodes, vm.migrate's targets.
	pveNodes = []string{"pve1", "pve2", "pve3"}
)

const (
	soakSource    = "urn:proxbus:soak"
	fingerprintOK = "AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99"
	firstNewVMID  = 1000
	// ownVMAge is how many commands after its vm.provision a soak VM may be migrated or
	// deleted: the backlog is worked off roughly in order, so the provision has ended (and is
	// not suspended by a killed replica, whose lease another command could take) by then.
	ownVMAge = 40
)

// group is an Idempotency-Key shared by several commands with the same verb and resource.
type group struct {
	key  string
	at   int // the command number that created it
	verb string
	data string
	alt  string // same resource, a different body: reusing the key with it is refused
}

// generator builds the mixed load deterministically from a seed.
type generator struct {
	rnd    *rand.Rand
	run    string
	canary string
	n      int
	groups []group
	snaps  []snapRef // snapshots created so far, for deletes
	vmid   int64
	pbs    int
	// own are the soak's VMs provisioned so far (vm.migrate and vm.delete act on them);
	// deleted those a vm.delete was drawn for.
	own     []ownVM
	deleted map[int64]bool
	// reuseSpan is how many commands back an Idempotency-Key may be reused: well inside the
	// 60 s window, so that a reuse is a replay and not a legitimate re-execution.
	reuseSpan int
	// hotShare is the share of commands drawn as power and snapshot commands on hotGuests
	// (0: none; no random draw is made for it, so a single-mode plan is unchanged).
	hotShare float64
	// producers are drawn from uniformly with prnd (its own stream, so the choice of
	// producers does not change the commands); one producer means no draw.
	producers []string
	prnd      *rand.Rand
	// rots are the PBS storages the plan creates to rotate (storage.pbs.update) and retire
	// (storage.pbs.delete); no other command names them.
	rots []rotStorage
	// hotAt is the node each of hotMigrants is on once the migrations drawn so far ran in
	// order: a hot migration draws another node, so that it moves the guest.
	hotAt map[int64]string
	// twin is a second vm.backup of the guest and storage of the backup just drawn, with
	// another compression, published right after it: two backups of one guest within a second
	// (each must answer its own volume); nil when none is due.
	twin *events.Command
}

type snapRef struct {
	vmid int64
	name string
}

// rotStorage is a PBS storage the plan rotates and retires: its id, the number of its
// create command, and whether its delete was drawn.
type rotStorage struct {
	id      string
	at      int
	retired bool
}

// ownVM is a VM the plan provisions: its vmid and the number of its vm.provision command.
type ownVM struct {
	vmid int64
	at   int
}

func newGenerator(seed uint64, run, canary string, reuseSpan int) *generator {
	return &generator{rnd: rand.New(rand.NewPCG(seed, seed^0x5eed)), run: run, canary: canary, vmid: firstNewVMID,
		deleted: map[int64]bool{}, hotAt: maps.Clone(hotHome), reuseSpan: max(reuseSpan, 1), producers: []string{producerNATSGo}, prnd: rand.New(rand.NewPCG(seed^0x9d0c, seed))}
}

// withLoad sets the hot-guest share and the producers (nil: nats.go only) and returns g.
func (g *generator) withLoad(hotShare float64, producers []string) *generator {
	g.hotShare = hotShare
	if len(producers) > 0 {
		g.producers = producers
	}
	return g
}

// recentGroups are the groups whose key may still be reused.
func (g *generator) recentGroups() []group {
	i := len(g.groups)
	for i > 0 && g.n-g.groups[i-1].at <= g.reuseSpan {
		i--
	}
	return g.groups[i:]
}

// plan returns n messages: the verb mix of the soak, 5% duplicate publishes, 2% poison.
func (g *generator) plan(n int) []*planned {
	out := make([]*planned, 0, n)
	for range n {
		out = append(out, g.next())
	}
	return out
}

func (g *generator) next() *planned {
	g.n++
	id := fmt.Sprintf("soak-%s-%05d", g.run, g.n)
	p := &planned{}
	if g.twin != nil {
		p.cmd, g.twin = *g.twin, nil
		p.cmd.ID = id
		p.guest, p.ops = guestOps(p.cmd.Verb, string(p.cmd.Data))
		p.producer = g.producers[0]
		return p
	}
	r := g.rnd.Float64()
	switch {
	case r < 0.02:
		p.poison = g.poison(id)
		p.cmd = events.Command{ID: id, Source: soakSource}
		return p
	case r < 0.10 && len(g.recentGroups()) > 0: // reuse a recent Idempotency-Key
		recent := g.recentGroups()
		gr := recent[g.rnd.IntN(len(recent))]
		data := gr.data
		if gr.alt != "" && g.rnd.Float64() < 0.15 {
			data = gr.alt
		}
		p.cmd = g.command(id, gr.verb, data, gr.key)
		p.guest, p.ops = guestOps(gr.verb, data)
	case g.hotShare > 0 && g.rnd.Float64() < g.hotShare:
		g.hot(id, p)
	case r < 0.40:
		p.cmd, p.guest, p.ops = g.power(id)
	case r < 0.49:
		p.cmd = g.snapshotCreate(id)
	case r < 0.54:
		p.cmd = g.snapshotDelete(id)
	case r < 0.59:
		vm := snapGuests[g.rnd.IntN(len(snapGuests))]
		p.cmd = g.command(id, "vm.snapshot.list", fmt.Sprintf(`{"vm":%d}`, vm), "")
	case r < 0.66:
		vm := powerGuests[g.rnd.IntN(len(powerGuests))].vmid
		p.cmd = g.command(id, "vm.config.get", fmt.Sprintf(`{"vm":%d}`, vm), "")
	case r < 0.71:
		p.cmd = g.command(id, "vm.list", `{}`, "")
	case r < 0.82:
		p.cmd = g.pbsCreate(id)
	case r < 0.85:
		p.cmd = g.backup(id)
		p.guest, p.ops = guestOps(p.cmd.Verb, string(p.cmd.Data))
	case r < 0.89:
		p.cmd = g.migrate(id)
		p.guest, p.ops = guestOps(p.cmd.Verb, string(p.cmd.Data))
	case r < 0.91:
		p.cmd = g.delete(id)
		p.guest, p.ops = guestOps(p.cmd.Verb, string(p.cmd.Data))
	case r < 0.93:
		p.cmd = g.restore(id)
	case r < 0.945:
		p.cmd = g.ctProvision(id)
	case r < 0.96:
		p.cmd = g.rotation(id)
	default:
		p.cmd = g.provision(id)
	}
	p.dup = g.rnd.Float64() < 0.05
	p.producer = g.producers[0]
	if len(g.producers) > 1 {
		p.producer = g.producers[g.prnd.IntN(len(g.producers))]
	}
	return p
}

// hot fills p with a command on one of the hot guests: a power verb (60%), a snapshot create
// (18%), the delete of a snapshot made on a hot guest (10%, a create when there is none) or a
// migration of a hot migrant to another node (12%). One in five expires a second after its
// publication: bursts of expiries on a busy guest.
func (g *generator) hot(id string, p *planned) {
	vm := hotGuests[g.rnd.IntN(len(hotGuests))]
	if g.rnd.Float64() < 0.2 {
		p.expiresIn = time.Second
	}
	switch r := g.rnd.Float64(); {
	case r < 0.60:
		i := slices.IndexFunc(powerGuests, func(pg powerGuest) bool { return pg.vmid == vm })
		p.cmd, p.guest, p.ops = g.powerOn(id, powerGuests[i])
	case r < 0.78:
		p.cmd = g.snapshotCreateOn(id, vm)
	case r < 0.88:
		p.cmd = g.snapshotDeleteOf(id, func(s snapRef) bool { return slices.Contains(hotGuests, s.vmid) })
	default:
		p.cmd = g.hotMigrate(id)
		p.guest, p.ops = guestOps(p.cmd.Verb, string(p.cmd.Data))
	}
}

// hotMigrate migrates one of hotMigrants to a node other than the one the earlier
// migrations of the plan left it on (online, with_local_disks for the form: its disks are
// shared).
func (g *generator) hotMigrate(id string) events.Command {
	vm := hotMigrants[g.rnd.IntN(len(hotMigrants))]
	others := slices.DeleteFunc(slices.Clone(pveNodes), func(n string) bool { return n == g.hotAt[vm] })
	target := others[g.rnd.IntN(len(others))]
	g.hotAt[vm] = target
	data := fmt.Sprintf(`{"vm":%d,"target_node":%q,"with_local_disks":true}`, vm, target)
	return g.command(id, "vm.migrate", data, g.maybeGroup("vm.migrate", data, ""))
}

func (g *generator) command(id, verb, data, key string) events.Command {
	return events.Command{ID: id, Source: soakSource, Verb: verb, Type: "proxbus." + verb, EndpointID: 1, HasEndpointID: true,
		IdempotencyKey: key, Actor: "soak", Data: json.RawMessage(data)}
}

// maybeGroup gives a write a new Idempotency-Key half of the time and remembers it.
func (g *generator) maybeGroup(verb, data, alt string) string {
	if g.rnd.Float64() >= 0.5 {
		return ""
	}
	key := fmt.Sprintf("soak-%s-key-%d", g.run, len(g.groups)+1)
	g.groups = append(g.groups, group{key: key, at: g.n, verb: verb, data: data, alt: alt})
	return key
}

func (g *generator) power(id string) (events.Command, int64, int) {
	return g.powerOn(id, powerGuests[g.rnd.IntN(len(powerGuests))])
}

// powerOn is a random power verb on gst, with force half of the time where it applies.
func (g *generator) powerOn(id string, gst powerGuest) (events.Command, int64, int) {
	verb := powerVerbs[g.rnd.IntN(len(powerVerbs))]
	data := fmt.Sprintf(`{"vm":%d}`, gst.vmid)
	if (verb == "vm.stop" || verb == "vm.reboot") && g.rnd.Float64() < 0.5 {
		data = fmt.Sprintf(`{"vm":%d,"force":true}`, gst.vmid)
	}
	key := ""
	if g.rnd.Float64() < 0.4 {
		key = g.maybeGroup(verb, data, "")
	}
	vm, ops := guestOps(verb, data)
	return g.command(id, verb, data, key), vm, ops
}

// guestOps is the guest a command acts on and the most Proxmox writes it makes on it: a power
// verb one (a forced reboot of a container two: stop + start), vm.backup one (POST
// /nodes/{node}/vzdump), vm.migrate one (POST …/migrate), vm.delete one (the DELETE), two with
// stop_first (the hard stop of a running guest, then the DELETE); 0, 0 for other verbs.
func guestOps(verb, data string) (int64, int) {
	var d struct {
		VM        vmRef `json:"vm"`
		Force     bool  `json:"force"`
		StopFirst bool  `json:"stop_first"`
	}
	if json.Unmarshal([]byte(data), &d) != nil {
		return 0, 0
	}
	vm, err := d.VM.Int64()
	if err != nil {
		return 0, 0
	}
	switch {
	case isPowerVerb(verb):
		for _, gst := range powerGuests {
			if gst.vmid == vm && gst.lxc && verb == "vm.reboot" && d.Force {
				return vm, 2
			}
		}
		return vm, 1
	case verb == "vm.delete" && d.StopFirst:
		return vm, 2
	case verb == "vm.backup", verb == "vm.migrate", verb == "vm.delete":
		return vm, 1
	}
	return 0, 0
}

// isPowerVerb reports whether verb is a guest power verb.
func isPowerVerb(verb string) bool { return slices.Contains(powerVerbs, verb) }

// vmRef is a command's `vm` field as written: a vmid (number or numeric string) or a guest
// name.
type vmRef string

// UnmarshalJSON reads a number or a string.
func (r *vmRef) UnmarshalJSON(b []byte) error {
	var n json.Number
	if json.Unmarshal(b, &n) == nil {
		*r = vmRef(n)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("vm: %w", err)
	}
	*r = vmRef(s)
	return nil
}

// String is the reference as written ("100", "soak-1001").
func (r vmRef) String() string { return string(r) }

// Int64 is the vmid the reference names: the vmid itself, or N for the name "soak-N" the soak
// gives its VMs; an error for any other name.
func (r vmRef) Int64() (int64, error) {
	s, _ := strings.CutPrefix(string(r), ownVMNamePrefix)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("vm %q names no vmid: %w", string(r), err)
	}
	return n, nil
}

// ownVMNamePrefix starts the name of every VM the soak provisions ("soak-1001").
const ownVMNamePrefix = "soak-"

func (g *generator) snapshotCreate(id string) events.Command {
	return g.snapshotCreateOn(id, snapGuests[g.rnd.IntN(len(snapGuests))])
}

// snapshotCreateOn creates a snapshot with a name of its own on vm.
func (g *generator) snapshotCreateOn(id string, vm int64) events.Command {
	name := fmt.Sprintf("soak%ss%d", g.run, g.n)
	g.snaps = append(g.snaps, snapRef{vm, name})
	data := fmt.Sprintf(`{"vm":%d,"snapshot":%q,"description":"soak"}`, vm, name)
	alt := fmt.Sprintf(`{"vm":%d,"snapshot":%q,"description":"other"}`, vm, name)
	return g.command(id, "vm.snapshot.create", data, g.maybeGroup("vm.snapshot.create", data, alt))
}

func (g *generator) snapshotDelete(id string) events.Command {
	return g.snapshotDeleteOf(id, nil)
}

// snapshotDeleteOf deletes a snapshot created earlier in the plan, one that ok accepts (nil:
// any); with none, it creates one instead (on a guest ok accepts).
func (g *generator) snapshotDeleteOf(id string, ok func(snapRef) bool) events.Command {
	var cand []int
	for i, s := range g.snaps {
		if ok == nil || ok(s) {
			cand = append(cand, i)
		}
	}
	if len(cand) == 0 {
		if ok != nil {
			return g.snapshotCreateOn(id, hotGuests[g.rnd.IntN(len(hotGuests))])
		}
		return g.snapshotCreate(id)
	}
	i := cand[g.rnd.IntN(len(cand))]
	s := g.snaps[i]
	g.snaps = append(g.snaps[:i], g.snaps[i+1:]...) // each snapshot is deleted by one command (and its key replays)
	data := fmt.Sprintf(`{"vm":%d,"snapshot":%q}`, s.vmid, s.name)
	return g.command(id, "vm.snapshot.delete", data, g.maybeGroup("vm.snapshot.delete", data, ""))
}

func (g *generator) pbsData(storage, datastore string) string {
	return fmt.Sprintf(`{"storage":%q,"server":"pbs.soak.lan","datastore":%q,"username":"backup@pbs!soak","password":%q,"fingerprint":%q}`,
		storage, datastore, g.canary, fingerprintOK)
}

func (g *generator) pbsCreate(id string) events.Command {
	g.pbs++
	storage := fmt.Sprintf("soak-%s-pbs%d", g.run, g.pbs)
	if g.pbs > 3 && g.rnd.Float64() < 0.25 { // the same storage again without a key: already_present or conflict
		storage = fmt.Sprintf("soak-%s-pbs%d", g.run, 1+g.rnd.IntN(g.pbs-1))
	}
	ds := "store1"
	if g.rnd.Float64() < 0.1 {
		ds = "store2"
	}
	data := g.pbsData(storage, ds)
	return g.command(id, "storage.pbs.create", data, g.maybeGroup("storage.pbs.create", data, g.pbsData(storage, "store9")))
}

func (g *generator) provision(id string) events.Command {
	g.vmid++
	g.own = append(g.own, ownVM{g.vmid, g.n})
	src, node := 9000, "pve1"
	if g.rnd.Float64() < 0.3 {
		src, node = 8000, "pve2"
	}
	data := fmt.Sprintf(`{"source":{"template_vmid":%d},"new_vmid":%d,"new_name":"soak-%d","target_node":%q,"storage":"local-lvm",`+
		`"memory_mb":1024,"cores":1,"disk_gb":8,"cloud_init":{"user":"ops","password":%q,"ipconfig0":"ip=dhcp"}}`,
		src, g.vmid, g.vmid, node, g.canary)
	alt := fmt.Sprintf(`{"source":{"template_vmid":%d},"new_vmid":%d,"new_name":"soak-%d-b","target_node":%q,"cloud_init":{"password":%q}}`,
		src, g.vmid, g.vmid, node, g.canary)
	return g.command(id, "vm.provision", data, g.maybeGroup("vm.provision", data, alt))
}

// Demo backups (sim/pve's DemoBackupWeb and DemoBackupCT), in "local" on pve1: the soak
// restores them and never deletes them.
const (
	demoBackupWeb = "local:backup/vzdump-qemu-100-2026_11_30-02_00_00.vma.zst"
	demoBackupCT  = "local:backup/vzdump-lxc-200-2026_11_30-02_10_00.tar.zst"
)

// restore restores one of the demo cluster's backups (web-01's, or a quarter of the time
// ct-pve1's) into a new vmid on pve1 and local-lvm. The restored guests are not the soak's
// own VMs (no vm.migrate or vm.delete acts on them): a restore is judged by its new vmid alone.
func (g *generator) restore(id string) events.Command {
	g.vmid++
	archive := demoBackupWeb
	if g.rnd.Float64() < 0.25 {
		archive = demoBackupCT
	}
	data := fmt.Sprintf(`{"archive":%q,"vmid":%d,"target_node":"pve1","storage":"local-lvm"}`, archive, g.vmid)
	alt := fmt.Sprintf(`{"archive":%q,"vmid":%d,"target_node":"pve1","storage":"local-lvm","start":true}`, archive, g.vmid)
	return g.command(id, "vm.restore", data, g.maybeGroup("vm.restore", data, alt))
}

// ctProvision creates a container of its own (a new vmid from the soak VMs' counter; no
// other command of the plan acts on it) from the demo template on a node drawn from the
// three, with a root password (the canary) and a NIC; not started a fifth of the time.
func (g *generator) ctProvision(id string) events.Command {
	g.vmid++
	node := pveNodes[g.rnd.IntN(len(pveNodes))]
	start := g.rnd.Float64() >= 0.2
	data := fmt.Sprintf(`{"new_vmid":%d,"hostname":"soak-ct-%d","target_node":%q,"ostemplate":%q,"storage":"local-lvm","rootfs_gb":4,`+
		`"memory_mb":512,"nesting":true,"password":%q,"net":[{"index":0,"bridge":"vmbr0","ip":"dhcp"}],"start":%t}`,
		g.vmid, g.vmid, node, simpve.DemoCTTemplate, g.canary, start)
	alt := fmt.Sprintf(`{"new_vmid":%d,"hostname":"soak-ct-%d-b","target_node":%q,"ostemplate":%q,"storage":"local-lvm","rootfs_gb":4,"password":%q}`,
		g.vmid, g.vmid, node, simpve.DemoCTTemplate, g.canary)
	return g.command(id, "ct.provision", data, g.maybeGroup("ct.provision", data, alt))
}

// rotation creates, rotates or retires a PBS storage of its own ("soak-<run>-rot<k>", which no
// other command names): with none created at least ownVMAge commands ago and not retired (or
// a third of the time, up to six), a new one; else, of such a storage, a rotation (three in
// four: a new fingerprint or token id, half of the time with a new secret, the canary) or its
// retirement (never drawn again: later rotations of it are 404 storage_not_found).
func (g *generator) rotation(id string) events.Command {
	var live []int
	for i, r := range g.rots {
		if !r.retired && g.n-r.at >= ownVMAge {
			live = append(live, i)
		}
	}
	if len(live) == 0 || len(g.rots) < 6 && g.rnd.Float64() < 1.0/3 {
		sid := fmt.Sprintf("soak-%s-rot%d", g.run, len(g.rots)+1)
		g.rots = append(g.rots, rotStorage{id: sid, at: g.n})
		data := g.pbsData(sid, "store1")
		return g.command(id, "storage.pbs.create", data, g.maybeGroup("storage.pbs.create", data, g.pbsData(sid, "store9")))
	}
	r := &g.rots[live[g.rnd.IntN(len(live))]]
	if g.rnd.Float64() < 0.25 {
		r.retired = true
		data := fmt.Sprintf(`{"storage":%q}`, r.id)
		return g.command(id, "storage.pbs.delete", data, g.maybeGroup("storage.pbs.delete", data, ""))
	}
	fields := []string{fmt.Sprintf(`"storage":%q`, r.id)}
	if g.rnd.Float64() < 0.5 {
		fields = append(fields, fmt.Sprintf(`"fingerprint":%q`, rotFingerprints[g.rnd.IntN(len(rotFingerprints))]))
	} else {
		fields = append(fields, fmt.Sprintf(`"username":"backup@pbs!soak%d"`, 1+g.rnd.IntN(3)))
	}
	if g.rnd.Float64() < 0.5 {
		fields = append(fields, fmt.Sprintf(`"password":%q`, g.canary))
	}
	data := "{" + strings.Join(fields, ",") + "}"
	return g.command(id, "storage.pbs.update", data, g.maybeGroup("storage.pbs.update", data, ""))
}

// rotFingerprints are the certificate fingerprints rotations draw from (the first is the one
// every soak storage is created with).
var rotFingerprints = []string{fingerprintOK,
	"11:22:33:44:55:66:77:88:99:00:AA:BB:CC:DD:EE:FF:11:22:33:44:55:66:77:88:99:00:AA:BB:CC:DD:EE:FF"}

// backup backs a shared power guest up (with hot migrations, VM 102 moves: a backup queued
// behind its migration must run on the node it is on then): into the first PBS storage the plan creates (half of the time, once
// one is planned; 409 backup_storage_unavailable while its create has not run), into the next
// PBS storage id, which no create may have made yet (a fifth), else into the demo cluster's
// "local" directory storage (content backup on every node).
func (g *generator) backup(id string) events.Command {
	vm := powerGuests[g.rnd.IntN(len(powerGuests))].vmid
	storage := "local"
	switch r := g.rnd.Float64(); {
	case r < 0.5 && g.pbs > 0:
		storage = fmt.Sprintf("soak-%s-pbs1", g.run)
	case r < 0.7:
		storage = fmt.Sprintf("soak-%s-pbs%d", g.run, g.pbs+1)
	}
	compress := "zstd"
	if g.rnd.Float64() < 0.3 {
		compress = "lzo"
	}
	data := fmt.Sprintf(`{"vm":%d,"storage":%q,"mode":"snapshot","compress":%q}`, vm, storage, compress)
	alt := fmt.Sprintf(`{"vm":%d,"storage":%q,"mode":"snapshot","compress":"gzip"}`, vm, storage)
	if g.rnd.Float64() < 0.3 {
		twin := g.command("", "vm.backup", fmt.Sprintf(`{"vm":%d,"storage":%q,"mode":"snapshot","compress":"0"}`, vm, storage), "")
		g.twin = &twin
	}
	return g.command(id, "vm.backup", data, g.maybeGroup("vm.backup", data, alt))
}

// ownVMs returns the soak VMs provisioned at least ownVMAge commands ago that keep accepts.
func (g *generator) ownVMs(keep func(int64) bool) []int64 {
	var out []int64
	for _, v := range g.own {
		if g.n-v.at >= ownVMAge && keep(v.vmid) {
			out = append(out, v.vmid)
		}
	}
	return out
}

// ownRef is the `vm` of a command on soak VM vmid: the vmid, or a fifth of the time its name
// (a name no guest has is 404 vm_not_found, where a vmid no guest has may be already_absent).
func (g *generator) ownRef(vmid int64) string {
	if g.rnd.Float64() < 0.2 {
		return fmt.Sprintf("%q", fmt.Sprintf("%s%d", ownVMNamePrefix, vmid))
	}
	return strconv.FormatInt(vmid, 10)
}

// migrate moves a guest to a node drawn from the three, with with_local_disks: a soak VM
// (60%, once one is old enough; it may have been deleted: 404 vm_not_found) or one of
// migrateGuests. A guest already on the target is 200 already_present.
func (g *generator) migrate(id string) events.Command {
	ref := strconv.FormatInt(migrateGuests[g.rnd.IntN(len(migrateGuests))], 10)
	if own := g.ownVMs(func(int64) bool { return true }); len(own) > 0 && g.rnd.Float64() < 0.6 {
		ref = g.ownRef(own[g.rnd.IntN(len(own))])
	}
	target := pveNodes[g.rnd.IntN(len(pveNodes))]
	data := fmt.Sprintf(`{"vm":%s,"target_node":%q,"with_local_disks":true}`, ref, target)
	alt := fmt.Sprintf(`{"vm":%s,"target_node":%q,"with_local_disks":true,"online":false}`, ref, target)
	return g.command(id, "vm.migrate", data, g.maybeGroup("vm.migrate", data, alt))
}

// delete destroys a soak VM (never a shared guest: the other verbs need them) with
// stop_first: one not drawn for deletion before (85%), else any old enough one again (200
// already_absent, or ok when it runs first); with none old enough, vmid firstNewVMID, which no
// command makes (200 already_absent).
func (g *generator) delete(id string) events.Command {
	ref := strconv.FormatInt(firstNewVMID, 10)
	fresh := g.ownVMs(func(vmid int64) bool { return !g.deleted[vmid] })
	all := g.ownVMs(func(int64) bool { return true })
	switch {
	case len(fresh) > 0 && (g.rnd.Float64() < 0.85 || len(all) == len(fresh)):
		vmid := fresh[g.rnd.IntN(len(fresh))]
		g.deleted[vmid] = true
		ref = g.ownRef(vmid)
	case len(all) > 0:
		ref = g.ownRef(all[g.rnd.IntN(len(all))])
	}
	data := fmt.Sprintf(`{"vm":%s,"stop_first":true}`, ref)
	alt := fmt.Sprintf(`{"vm":%s,"stop_first":true,"purge":false}`, ref)
	return g.command(id, "vm.delete", data, g.maybeGroup("vm.delete", data, alt))
}

// poison builds a message that cannot be a command but whose id is readable.
func (g *generator) poison(id string) *poison {
	base := map[string]string{
		"ce-specversion": "1.0", "ce-id": id, "ce-source": soakSource, "ce-endpointid": "1",
		"Content-Type": "application/json", "Nats-Msg-Id": id,
	}
	secretBody := []byte(fmt.Sprintf(`{"storage":"x","password":%q}`, g.canary))
	switch g.rnd.IntN(3) {
	case 0:
		base["ce-type"] = "proxbus.vm.explode"
		return &poison{kind: "unknown_verb", subject: "vm.explode", header: base, body: secretBody}
	case 1:
		base["ce-type"] = "proxbus.storage.pbs.create"
		return &poison{kind: "data_not_json", subject: "storage.pbs.create", header: base,
			body: []byte(fmt.Sprintf(`{"storage":"x","password":%q`, g.canary))}
	default:
		base["ce-type"] = "proxbus.vm.stop"
		return &poison{kind: "type_mismatch", subject: "vm.start", header: base, body: secretBody}
	}
}

// onHotGuest reports whether p is a power, snapshot or migrate command on one of the hot
// guests.
func (p *planned) onHotGuest() bool {
	switch {
	case p.cmd.Verb == "vm.snapshot.create", p.cmd.Verb == "vm.snapshot.delete", p.cmd.Verb == "vm.migrate":
	case !isPowerVerb(p.cmd.Verb):
		return false
	}
	var d struct {
		VM int64 `json:"vm"`
	}
	return p.poison == nil && json.Unmarshal(p.cmd.Data, &d) == nil && slices.Contains(hotGuests, d.VM)
}
