package proxmox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// RawVMConfig returns GET /nodes/{node}/qemu/{vmid}/config?current=1 flattened to strings
// as PVE's config file holds them (numbers in decimal, booleans "0"/"1"); current=1 makes
// PVE answer the applied configuration, pending changes excluded. PVE masks a Cloud-Init
// password as "**********" and includes a "digest". Errors: a VM that is not on node →
// [ErrVMNotFound] (wrapping the *APIError); an unreadable answer → [ErrAnswerLost];
// otherwise see the package doc.
func (c *Client) RawVMConfig(ctx context.Context, node string, vmid int64) (map[string]string, error) {
	g := Guest{Node: node, VMID: vmid, Type: GuestQEMU}
	if err := g.check(); err != nil {
		return nil, err
	}
	r := request{method: http.MethodGet, path: g.basePath() + "/config", query: url.Values{"current": {"1"}}}
	var m flatMap
	if err := c.do(ctx, r, &m); err != nil {
		return nil, guestNotFound(g, err)
	}
	return m, nil
}

// configKeys are the configuration keys UpdateVMConfig sends (UsedAPI declares the same).
var configKeys = []string{"memory", "cores", "sockets", "agent", "ciuser", "cipassword", "sshkeys",
	"nameserver", "searchdomain"}

// indexedConfigKey matches the indexed keys UpdateVMConfig sends: ipconfig0..31, ide0..3,
// net0..31.
var indexedConfigKey = regexp.MustCompile(`^(?:(?:ipconfig|net)(?:[12]?[0-9]|3[01])|ide[0-3])$`)

// UpdateVMConfig applies one configuration update (POST /nodes/{node}/qemu/{vmid}/config,
// which PVE runs as a qmconfig task: it is waited for) and returns the UPID ("" when PVE
// answered without a task). params are PVE config keys: memory, cores, sockets, agent,
// ciuser, cipassword (a secret: never logged nor put in an error; PVE stores a hash),
// sshkeys (given as plain OpenSSH lines; PVE wants them URL-encoded, which is done here),
// ipconfig0..31, nameserver, searchdomain, ide0..ide3 (a Cloud-Init drive is
// "<storage>:cloudinit"), net0..net31. Any other key, or no key at all →
// [ErrInvalidRequest] naming the key, without a request. Errors: *[APIError] (400 with the
// rejected parameter names, 500 "VM is locked (clone)", …), *[TaskError] (the worker failed,
// e.g. "bridge 'vmbr9' does not exist"; returned with the UPID), or the request's error.
// The password is scrubbed from every error text.
func (c *Client) UpdateVMConfig(ctx context.Context, node string, vmid int64, params map[string]string) (string, error) {
	g := Guest{Node: node, VMID: vmid, Type: GuestQEMU}
	if err := g.check(); err != nil {
		return "", err
	}
	if len(params) == 0 {
		return "", fmt.Errorf("%w: empty configuration update for vmid %d", ErrInvalidRequest, vmid)
	}
	form := url.Values{}
	var secrets []string
	for _, k := range sortedKeys(params) {
		v := params[k]
		if !slices.Contains(configKeys, k) && !indexedConfigKey.MatchString(k) {
			return "", fmt.Errorf("%w: unsupported configuration key %q", ErrInvalidRequest, k)
		}
		switch k {
		case "sshkeys":
			v = pveURLEncode(v)
		case "cipassword":
			if v != "" {
				secrets = append(secrets, v)
			}
		}
		form.Set(k, v)
	}
	r := request{method: http.MethodPost, path: g.basePath() + "/config", form: form, secrets: secrets}
	upid, err := c.runOptionalTask(ctx, node, r)
	var te *TaskError
	if errors.As(err, &te) {
		te.ExitStatus = scrub(te.ExitStatus, secrets)
	}
	return upid, err
}

// ResizeDisk grows a disk to size (PUT /nodes/{node}/qemu/{vmid}/resize, size like "32G";
// "+8G" grows by that much) and waits when PVE answers a task (PVE 8+ answers a UPID of a
// "resize" worker; older versions resize synchronously and answer null). It returns the
// UPID or "". PVE refuses a smaller size with 500 "shrinking disks is not supported" (an
// *[APIError], or a *[TaskError] when the worker finds it). Empty arguments →
// [ErrInvalidRequest].
func (c *Client) ResizeDisk(ctx context.Context, node string, vmid int64, disk, size string) (string, error) {
	g := Guest{Node: node, VMID: vmid, Type: GuestQEMU}
	if err := g.check(); err != nil {
		return "", err
	}
	if disk == "" || size == "" {
		return "", fmt.Errorf("%w: resize of disk %q of vmid %d to %q", ErrInvalidRequest, disk, vmid, size)
	}
	r := request{method: http.MethodPut, path: g.basePath() + "/resize", form: url.Values{"disk": {disk}, "size": {size}}}
	return c.runOptionalTask(ctx, node, r)
}

// runOptionalTask sends r, whose answer is a UPID or null; a UPID is reported to the
// context's hook and waited for. It returns the UPID ("" for null or a failed request).
func (c *Client) runOptionalTask(ctx context.Context, node string, r request) (string, error) {
	var upid string
	if err := c.do(ctx, r, &upid); err != nil {
		if nullAnswer(err) {
			return "", nil // {"data": null}: done without a worker
		}
		return "", err
	}
	if upid == "" {
		return "", nil
	}
	taskStarted(ctx, node, upid)
	return upid, c.WaitTask(ctx, node, upid)
}

// nullAnswer reports whether err is do's "empty answer": a 2xx whose data was null.
func nullAnswer(err error) bool { return errors.Is(err, errEmptyAnswer) }

// nicModels is the enum of PVE's netN model (PVE 9.2 schema, net[n] keyAlias "model").
var nicModels = []string{
	"e1000", "e1000-82540em", "e1000-82544gc", "e1000-82545em", "e1000e", "i82551", "i82557b",
	"i82559er", "ne2k_isa", "ne2k_pci", "pcnet", "rtl8139", "virtio", "vmxnet3",
}

// NICModels is Proxmox's list of NIC models accepted in netN (e1000, e1000-82540em, …,
// rtl8139, virtio, vmxnet3), sorted; a fresh slice each call.
func NICModels() []string { return slices.Clone(nicModels) }

// pveURLEncode URL-encodes s (the sshkeys value) as PVE's "urlencoded" format wants it (and as its GUI's
// encodeURIComponent does): every byte outside [A-Za-z0-9-_.!~*'()] becomes %XX, a
// space included (never "+", which PVE's uri_unescape would keep).
func pveURLEncode(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || strings.IndexByte("-_.!~*'()", ch) >= 0 {
			b.WriteByte(ch)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[ch>>4])
		b.WriteByte(hex[ch&15])
	}
	return b.String()
}

// sortedKeys returns m's keys sorted.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
