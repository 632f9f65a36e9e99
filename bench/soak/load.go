package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/proxbus/proxbus/events"
)

// planned is one message the soak publishes (a duplicate publish reuses its command).
type planned struct {
	cmd    events.Command
	poison *poison // non-nil: a deliberately broken message
	// guest is the shared guest a power verb acts on (0 otherwise); ops the Proxmox writes it
	// makes when it succeeds.
	guest int64
	ops   int
	dup   bool // publish it a second time (same id, new Nats-Msg-Id)
	// producer is who publishes it (producerNATSGo, producerSDKBinary, producerSDKStructured);
	// poison is always published with nats.go.
	producer string
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
	hotGuests = []int64{100, 200}
)

const (
	soakSource    = "urn:proxbus:soak"
	fingerprintOK = "AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99"
	firstNewVMID  = 1000
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
}

type snapRef struct {
	vmid int64
	name string
}

func newGenerator(seed uint64, run, canary string, reuseSpan int) *generator {
	return &generator{rnd: rand.New(rand.NewPCG(seed, seed^0x5eed)), run: run, canary: canary, vmid: firstNewVMID,
		reuseSpan: max(reuseSpan, 1), producers: []string{producerNATSGo}, prnd: rand.New(rand.NewPCG(seed^0x9d0c, seed))}
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
	case r < 0.45:
		p.cmd, p.guest, p.ops = g.power(id)
	case r < 0.55:
		p.cmd = g.snapshotCreate(id)
	case r < 0.60:
		p.cmd = g.snapshotDelete(id)
	case r < 0.65:
		vm := snapGuests[g.rnd.IntN(len(snapGuests))]
		p.cmd = g.command(id, "vm.snapshot.list", fmt.Sprintf(`{"vm":%d}`, vm), "")
	case r < 0.72:
		vm := powerGuests[g.rnd.IntN(len(powerGuests))].vmid
		p.cmd = g.command(id, "vm.config.get", fmt.Sprintf(`{"vm":%d}`, vm), "")
	case r < 0.77:
		p.cmd = g.command(id, "vm.list", `{}`, "")
	case r < 0.91:
		p.cmd = g.pbsCreate(id)
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

// hot fills p with a command on one of the hot guests: a power verb (70%), a snapshot create
// (20%) or the delete of a snapshot made on a hot guest (10%, a create when there is none).
func (g *generator) hot(id string, p *planned) {
	vm := hotGuests[g.rnd.IntN(len(hotGuests))]
	switch r := g.rnd.Float64(); {
	case r < 0.70:
		i := slices.IndexFunc(powerGuests, func(pg powerGuest) bool { return pg.vmid == vm })
		p.cmd, p.guest, p.ops = g.powerOn(id, powerGuests[i])
	case r < 0.90:
		p.cmd = g.snapshotCreateOn(id, vm)
	default:
		p.cmd = g.snapshotDeleteOf(id, func(s snapRef) bool { return slices.Contains(hotGuests, s.vmid) })
	}
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

// guestOps is the guest and the number of Proxmox writes a successful power verb makes (a
// forced reboot of a container is stop + start); 0, 0 for other verbs.
func guestOps(verb, data string) (int64, int) {
	var d struct {
		VM    int64 `json:"vm"`
		Force bool  `json:"force"`
	}
	isPower := false
	for _, v := range powerVerbs {
		isPower = isPower || v == verb
	}
	if !isPower || json.Unmarshal([]byte(data), &d) != nil {
		return 0, 0
	}
	for _, gst := range powerGuests {
		if gst.vmid == d.VM && gst.lxc && verb == "vm.reboot" && d.Force {
			return d.VM, 2
		}
	}
	return d.VM, 1
}

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

// onHotGuest reports whether p is a power or snapshot command on one of the hot guests.
func (p *planned) onHotGuest() bool {
	switch p.cmd.Verb {
	case "vm.snapshot.create", "vm.snapshot.delete":
	default:
		if p.guest == 0 {
			return false
		}
	}
	var d struct {
		VM int64 `json:"vm"`
	}
	return p.poison == nil && json.Unmarshal(p.cmd.Data, &d) == nil && slices.Contains(hotGuests, d.VM)
}
