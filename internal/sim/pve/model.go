package simpve

import (
	"crypto/sha1"
	"encoding/hex"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// Scenario names accepted by [Options].
const (
	ScenarioEmpty = ""     // nodes pve1..pve3 and the demo tokens, no storages
	ScenarioDemo  = "demo" // the demo cluster of contract §10
)

// Scenarios returns the accepted scenario names.
func Scenarios() []string { return []string{ScenarioEmpty, ScenarioDemo} }

// Demo credentials (contract §10), accepted in every scenario.
const (
	DemoTokenID  = "proxbus@pve!demo"  // full rights
	AuditTokenID = "proxbus@pve!audit" // auditor: no Datastore.Allocate
	DemoSecret   = "demo-secret"       // secret of both tokens
)

// Privileges the simulator checks.
const (
	privAll       = "*"
	privAllocate  = "Datastore.Allocate"
	privAudit     = "Datastore.Audit"
	privSysAudit  = "Sys.Audit"
	privSysModify = "Sys.Modify"
	privVMAudit   = "VM.Audit"
)

// storageAvailable is the status of an active storage in /cluster/resources.
const storageAvailable = "available"

// token is an API token and the privileges it holds on every path.
type token struct {
	secret string
	privs  map[string]bool
}

func (t token) has(priv string) bool { return t.privs[privAll] || t.privs[priv] }

// node is a cluster node.
type node struct {
	name      string
	status    string // "online", or "offline" while rebooting
	maxCPU    int
	maxMem    int64
	downUntil time.Time // while rebooting: when it is back online
}

// cluster is the simulated cluster's state; guarded by Server.mu.
type cluster struct {
	nodes    []node
	tokens   map[string]token
	storages map[string]map[string]string // id → config without "storage", sensitive keys removed
	guests   map[int64]*guest             // vmid → VM or container
	tasks    []*task                      // every task, oldest first
	active   map[string][]*task           // node → its active file (tasklist.go)
	pid      int64                        // last worker pid handed out

	storageStatus map[string]string       // "storage/node" → status in /cluster/resources (absent: available)
	moveFaults    map[string][]string     // "vmid/disk" → exit statuses of its next move_disk tasks
	ciPasswords   map[int64]string        // vmid → sha256 hex of the Cloud-Init password (config shows a mask)
	backups       map[string][]*backupVol // backupKey(storage, node) → backups, oldest first (backup.go)
	// storageSecrets: storage id → sha256 hex of the PBS password PVE keeps in
	// /etc/pve/priv/storage/<id>.pw (never returned by the API)
	storageSecrets map[string]string
	ct             ctState // OS templates and container root passwords (containers.go)
}

// newCluster builds the state of a scenario.
func newCluster(scenario string) *cluster {
	c := &cluster{
		tokens: map[string]token{
			DemoTokenID:  {secret: DemoSecret, privs: map[string]bool{privAll: true}},
			AuditTokenID: {secret: DemoSecret, privs: map[string]bool{privAudit: true, privSysAudit: true, privVMAudit: true}},
		},
		storages: map[string]map[string]string{},
		guests:   map[int64]*guest{},
		pid:      0x1A2B0,

		storageStatus:  map[string]string{},
		moveFaults:     map[string][]string{},
		ciPasswords:    map[int64]string{},
		backups:        map[string][]*backupVol{},
		storageSecrets: map[string]string{},
	}
	for _, n := range []string{"pve1", "pve2", "pve3"} {
		c.nodes = append(c.nodes, node{name: n, status: "online", maxCPU: 16, maxMem: 64 << 30})
	}
	if scenario == ScenarioDemo {
		for _, s := range demoStorages() {
			c.putStorage(s)
		}
		c.seedDemoTemplates()
		for _, g := range demoGuests(time.Now()) {
			c.guests[g.vmid] = g
		}
		c.backups = demoBackups(c.guests)
	}
	return c
}

// demoStorages is the demo cluster's storage.cfg.
func demoStorages() []proxmox.StorageConfig {
	return []proxmox.StorageConfig{
		{"storage": "local", "type": "dir", "path": "/var/lib/vz", "content": "iso,vztmpl,backup", "prune-backups": "keep-all=1"},
		{"storage": "local-lvm", "type": "lvmthin", "thinpool": "data", "vgname": "pve", "content": "images,rootdir"},
		{"storage": "ceph", "type": "rbd", "pool": "ceph-vm", "content": "images,rootdir", "krbd": "0"},
		{"storage": "images", "type": "nfs", "server": "10.0.0.50", "export": "/export/images", "path": "/mnt/pve/images", "content": "import,iso", "options": "vers=4.2"},
	}
}

// sensitive are PVE's sensitive storage properties: kept in /etc/pve/priv, never returned.
var sensitive = map[string]bool{"password": true, "encryption-key": true, "master-pubkey": true, "keyring": true}

// sharedTypes are the storage types PVE always marks shared (pve-storage @SHARED_STORAGE).
var sharedTypes = map[string]bool{
	"iscsi": true, "nfs": true, "cifs": true, "rbd": true, "cephfs": true, "iscsidirect": true,
	"glusterfs": true, "zfs": true, "drbd": true, "pbs": true,
}

// integerKeys and booleanKeys are storage properties PVE returns as JSON numbers.
var (
	integerKeys = map[string]bool{"port": true, "max-protected-backups": true, "maxfiles": true}
	booleanKeys = map[string]bool{
		"shared": true, "disable": true, "krbd": true, "sparse": true, "saferemove": true, "nocow": true,
		"mkdir": true, "create-base-path": true, "create-subdirs": true,
		"nowritecache": true, "fuse": true, "tagged_only": true, "skip-cert-verification": true,
		"snapshot-as-volume-chain": true,
	}
)

// putStorage stores cfg (keyed by cfg["storage"]) without its sensitive keys.
func (c *cluster) putStorage(cfg proxmox.StorageConfig) {
	id := cfg["storage"]
	m := make(map[string]string, len(cfg))
	for k, v := range cfg {
		if k == "storage" || k == "digest" || sensitive[k] {
			continue
		}
		m[k] = v
	}
	c.storages[id] = m
}

// storageIDs returns the storage ids, sorted.
func (c *cluster) storageIDs() []string {
	return slices.Sorted(maps.Keys(c.storages))
}

// digest is a stable hash of the whole storage configuration (PVE's "digest").
func (c *cluster) digest() string {
	h := sha1.New()
	for _, id := range c.storageIDs() {
		m := c.storages[id]
		h.Write([]byte(m["type"] + ": " + id + "\n"))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			h.Write([]byte("\t" + k + " " + m[k] + "\n"))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// storageStrings is a storage's configuration as PVE's GET returns it, as strings.
func (c *cluster) storageStrings(id string) (proxmox.StorageConfig, bool) {
	return c.storageStringsWith(id, c.digest())
}

// storageStringsWith is storageStrings with the configuration's digest computed by the
// caller: a listing computes it once, not once per storage (which made GET /storage
// quadratic in the number of storages).
func (c *cluster) storageStringsWith(id, digest string) (proxmox.StorageConfig, bool) {
	m, ok := c.storages[id]
	if !ok {
		return nil, false
	}
	out := proxmox.StorageConfig{"storage": id, "digest": digest}
	for k, v := range m {
		out[k] = v
	}
	if sharedTypes[m["type"]] {
		out["shared"] = "1"
	}
	return out, true
}

// storageJSON is a storage's configuration as PVE's JSON: integers and booleans as numbers.
func (c *cluster) storageJSON(id string) (map[string]any, bool) {
	return c.storageJSONWith(id, c.digest())
}

// storageJSONWith is storageJSON with the digest computed by the caller.
func (c *cluster) storageJSONWith(id, digest string) (map[string]any, bool) {
	s, ok := c.storageStringsWith(id, digest)
	if !ok {
		return nil, false
	}
	out := make(map[string]any, len(s))
	for k, v := range s {
		out[k] = typed(k, v)
	}
	return out, true
}

// typed renders a config string as PVE's JSON would.
func typed(key, v string) any {
	if integerKeys[key] || booleanKeys[key] {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	}
	return v
}

// storageOnNode reports whether storage config m applies to node n.
func storageOnNode(m map[string]string, n string) bool {
	nodes := strings.TrimSpace(m["nodes"])
	if nodes == "" {
		return true
	}
	for _, x := range strings.Split(nodes, ",") {
		if strings.TrimSpace(x) == n {
			return true
		}
	}
	return false
}
