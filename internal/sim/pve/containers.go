package simpve

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// DemoCTTemplate is the OS template the demo cluster has on every node's "local" storage.
const DemoCTTemplate = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"

// ctState is the simulator's state of container creation, part of [cluster]: the OS
// templates (vztmpl volumes) on storages, and the root passwords set by creates, hashed.
// Its zero value is ready to use.
type ctState struct {
	templates map[string]map[string]int64 // ctTemplateKey(storage, node) → volid → size
	passwords map[int64]string            // vmid → sha256 hex of the root password
}

// ctTemplateKey keys a storage's templates as node sees them: a shared storage's are the
// same on every node.
func (c *cluster) ctTemplateKey(storage, node string) string {
	if m, found := c.storages[storage]; found && storageShared(m) {
		node = ""
	}
	return storage + "\x00" + node
}

// addTemplate puts the vztmpl volume volid on node's view of its storage.
func (c *cluster) addTemplate(node, volid string, size int64) {
	storage, _, _ := strings.Cut(volid, ":")
	if c.ct.templates == nil {
		c.ct.templates = map[string]map[string]int64{}
	}
	key := c.ctTemplateKey(storage, node)
	if c.ct.templates[key] == nil {
		c.ct.templates[key] = map[string]int64{}
	}
	c.ct.templates[key][volid] = size
}

// AddTemplate puts the OS template volid ("local:vztmpl/x.tar.zst") on node's view of its
// storage, as `pveam download` does.
func (s *Server) AddTemplate(node, volid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state.addTemplate(node, volid, 128<<20)
}

// seedDemoTemplates puts DemoCTTemplate on every node.
func (c *cluster) seedDemoTemplates() {
	for _, n := range c.nodes {
		c.addTemplate(n.name, DemoCTTemplate, 126<<20)
	}
}

// CheckContainerPassword reports whether password is the root password the create of
// container vmid set (PVE sets it inside the container and keeps it nowhere the API shows).
func (s *Server) CheckContainerPassword(vmid int64, password string) bool {
	sum := sha256.Sum256([]byte(password))
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.ct.passwords[vmid] == hex.EncodeToString(sum[:])
}

// containerEndpoints are the container create and the content listing with templates: the
// listing of existing is kept and extended, and a create with restore=1 stays existing's (a
// restore, restore.go), so it must be merged after backupEndpoints.
func (s *Server) containerEndpoints(existing map[string]endpoint) map[string]endpoint {
	inner := existing[contentKey]
	restore := existing["POST /nodes/{node}/lxc"]
	return map[string]endpoint{
		"POST /nodes/{node}/lxc": {
			perm: func(c *call) (string, string) { return "/vms/" + c.params.Get("vmid"), imgPrivVMAllocate },
			fn: func(c *call) answer {
				if restore.fn != nil && flag(c, "restore") {
					return restore.fn(c)
				}
				return s.createContainer(c)
			},
		},
		contentKey: {perm: inner.perm, fn: s.templateContent(inner.fn)},
	}
}

// templateContent wraps the content listing inner: with content "" or "vztmpl", a storage
// whose content includes vztmpl also lists its OS templates (no vmid owns them: a vmid
// filter leaves them out).
func (s *Server) templateContent(inner func(c *call) answer) func(c *call) answer {
	return func(c *call) answer {
		a := inner(c)
		storage, node, ct := c.r.PathValue("storage"), c.r.PathValue("node"), c.params.Get("content")
		if a.status != http.StatusOK || (ct != "" && ct != "vztmpl") || c.params.Get("vmid") != "" ||
			!contains(splitList(s.state.storages[storage]["content"]), "vztmpl") {
			return a
		}
		listed, err := listingItems(a)
		if err != nil {
			return fail(http.StatusInternalServerError, "sim/pve: content listing unreadable: "+err.Error())
		}
		vols := s.state.ct.templates[s.state.ctTemplateKey(storage, node)]
		for _, volid := range slices.Sorted(maps.Keys(vols)) {
			listed = append(listed, map[string]any{"volid": volid, "content": "vztmpl", "format": ctTemplateFormat(volid), "size": vols[volid]})
		}
		return ok(listed)
	}
}

// listingItems decodes the items of a listing's answer a (numbers kept as json.Number), for
// a method that extends another's listing.
func listingItems(a answer) ([]map[string]any, error) {
	var env struct {
		Data []map[string]any `json:"data"`
	}
	dec := json.NewDecoder(bytes.NewReader(a.body))
	dec.UseNumber()
	if err := dec.Decode(&env); err != nil {
		return nil, err
	}
	return env.Data, nil
}

// ctTemplateFormat is the format pve-storage names a template archive by: "tzst" for
// .tar.zst, "tgz" for .tar.gz, "txz" for .tar.xz.
func ctTemplateFormat(volid string) string {
	for ext, f := range map[string]string{".tar.zst": "tzst", ".tar.gz": "tgz", ".tar.xz": "txz"} {
		if strings.HasSuffix(volid, ext) {
			return f
		}
	}
	return "raw"
}

// ctRootfsRe is "<storage>:<size in GiB>", the new-volume form of rootfs create_vm takes.
var ctRootfsRe = regexp.MustCompile(`^([^/:\s]+):(\d+(?:\.\d+)?)$`)

// ctSSHKeyRe is what ssh-keygen -l accepts of one authorized_keys line, roughly: a key type
// and its base64 blob.
var ctSSHKeyRe = regexp.MustCompile(`^\s*(ssh-(rsa|dss|ed25519)|ecdsa-sha2-nistp(256|384|521)|sk-(ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com)\s+[A-Za-z0-9+/=]+(\s.*)?$`)

// createContainer is POST /nodes/{node}/lxc without restore (its parameters passed PVE's
// schema checks), as pve-container's PVE::API2::LXC create_vm checks before its worker: the
// node; unprivileged defaults to 1 and a privileged container needs Sys.Modify on /; the
// vmid unused (PVE::Cluster::check_vmid_unused: 500 "CT 100 already exists on node
// 'pve1'"); the SSH keys (PVE::Tools::validate_ssh_public_keys: 500 "SSH public key
// validation error"); the template volume's content type (PVE::Storage::check_volume_access:
// 500 "unable to use volume x - content type needs to be 'vztmpl'", its storage must exist);
// features of a privileged container (check_ct_modify_config_perm: 403, only root@pam);
// the root disk's storage (storage_check_enabled: 500; without content rootdir 400 storage
// "storage 'x' does not support container directories"). The vzcreate task then unpacks the
// template, which fails as abs_filesystem_path does when the node does not have it ("unable
// to create CT 100 - can't find file 'local:vztmpl/x'"); the container only exists when the
// task succeeds (PVE destroys the config it locked on failure). PVE defaults hostname CT<vmid>,
// memory 512 and swap 512, adds each NIC's hwaddr and type=veth, and detects the OS type.
func (s *Server) createContainer(c *call) answer {
	p := c.params
	vmid := int64(perlInt(p.Get("vmid")))
	node := c.r.PathValue("node")
	if _, found := s.state.node(node); !found {
		return unknownNode(node)
	}
	unprivileged := p.Get("unprivileged") != "0"
	if !unprivileged && !c.token.has("Sys.Modify") {
		return fail(http.StatusForbidden, "Permission check failed (/, Sys.Modify)")
	}
	if g, exists := s.state.guests[vmid]; exists {
		label := "VM"
		if g.typ == proxmox.GuestLXC {
			label = "CT"
		}
		return fail(http.StatusInternalServerError, fmt.Sprintf("%s %d already exists on node '%s'", label, vmid, g.node))
	}
	if keys := p.Get("ssh-public-keys"); keys != "" {
		for _, line := range strings.Split(keys, "\n") {
			if strings.TrimSpace(line) != "" && !ctSSHKeyRe.MatchString(line) {
				return fail(http.StatusInternalServerError, "SSH public key validation error")
			}
		}
	}
	tmpl := p.Get("ostemplate")
	tm := imgVolumeID.FindStringSubmatch(tmpl)
	if tm == nil {
		return fail(http.StatusForbidden, "Only root can pass arbitrary filesystem paths.")
	}
	if _, found := s.state.storages[tm[1]]; !found {
		return fail(http.StatusInternalServerError, fmt.Sprintf("storage '%s' does not exist", tm[1]))
	}
	if !strings.HasPrefix(tm[2], "vztmpl/") {
		return fail(http.StatusInternalServerError, fmt.Sprintf("unable to use volume %s - content type needs to be 'vztmpl'", tmpl))
	}
	if p.Get("features") != "" && !unprivileged {
		return fail(http.StatusForbidden, "Permission check failed (changing feature flags for privileged container is only allowed for root@pam)")
	}
	rootfs := p.Get("rootfs")
	if rootfs == "" {
		rootfs = p.Get("storage") + ":4" // create_vm's default: 4 GiB on the default storage
		if p.Get("storage") == "" {
			rootfs = "local:4"
		}
	}
	rm := ctRootfsRe.FindStringSubmatch(rootfs)
	if rm == nil {
		return fail(http.StatusInternalServerError, "sim/pve: only a new root disk (<storage>:<GiB>) is simulated")
	}
	if msg := s.state.storageEnabledOn(rm[1], node); msg != "" {
		return fail(http.StatusInternalServerError, msg)
	}
	if !contains(splitList(s.state.storages[rm[1]]["content"]), "rootdir") {
		return paramFail(map[string]string{"storage": fmt.Sprintf("storage '%s' does not support container directories", rm[1])})
	}
	cfg := map[string]string{
		"arch": "amd64", "ostype": ctOSType(tmpl), "hostname": "CT" + strconv.FormatInt(vmid, 10), "memory": "512", "swap": "512",
		"rootfs": fmt.Sprintf("%s:vm-%d-disk-0,size=%sG", rm[1], vmid, rm[2]),
	}
	if unprivileged {
		cfg["unprivileged"] = "1"
	}
	for _, k := range []string{"hostname", "memory", "swap", "cores", "features", "nameserver", "searchdomain"} {
		if v := p.Get(k); v != "" {
			cfg[k] = v
		}
	}
	for k := range p {
		if strings.HasPrefix(k, "net") {
			cfg[k] = ctNet(p.Get(k))
		}
	}
	failure := ""
	if _, found := s.state.ct.templates[s.state.ctTemplateKey(tm[1], node)][tmpl]; !found || s.state.storageUsable(tm[1], node) != "" {
		failure = fmt.Sprintf("unable to create CT %d - can't find file '%s'", vmid, tmpl)
	}
	g := &guest{vmid: vmid, typ: proxmox.GuestLXC, node: node, config: cfg, status: stateStopped, snapshots: map[string]*snapshot{}}
	willFail := failure != ""
	if q := s.taskFaults[faultKey(node, vmid)]; len(q) > 0 && !succeeded(q[0]) {
		willFail = true
	}
	a := s.startTask(c, g, "vzcreate", "create", failure, func(time.Time) {})
	if !willFail {
		s.state.guests[vmid] = g // the config exists (locked "create") while the task runs
		if pw := p.Get("password"); pw != "" {
			if s.state.ct.passwords == nil {
				s.state.ct.passwords = map[int64]string{}
			}
			sum := sha256.Sum256([]byte(pw))
			s.state.ct.passwords[vmid] = hex.EncodeToString(sum[:])
		}
	}
	return a
}

// ctOSType is the OS type PVE detects in the unpacked template, here from its name.
func ctOSType(volid string) string {
	_, name, _ := strings.Cut(volid, "/")
	for _, ostype := range []string{"debian", "ubuntu", "centos", "fedora", "alpine", "archlinux", "opensuse", "devuan", "gentoo", "nixos"} {
		if strings.HasPrefix(name, ostype) {
			return ostype
		}
	}
	return "unmanaged"
}

// ctNet is a net[n] value as PVE stores it: with a hwaddr (random_ether_addr) and type=veth
// when they were not given.
func ctNet(v string) string {
	if !strings.Contains(v, "hwaddr=") {
		v += ",hwaddr=" + randomMAC()
	}
	if !strings.Contains(v, "type=") {
		v += ",type=veth"
	}
	return v
}
