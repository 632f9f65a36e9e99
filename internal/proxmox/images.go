package proxmox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// ImportContent is PVE's storage content type of importable images ("import", PVE 8.3+).
const ImportContent = "import"

// ImageFormat maps an image URL to what Proxmox can import through download-url
// (content=import): ".img" → "qcow2" (stored as ".qcow2": Ubuntu's and Debian's .img cloud
// images are qcow2 inside, and PVE accepts only .qcow2, .raw, .vmdk and .ova for import);
// ".qcow2", ".raw" and ".vmdk" keep theirs. The extension is taken from the URL's path
// (query and fragment ignored), case-insensitively. Anything else (".qcow2.xz", ".vhdx",
// ".iso", no extension, an unparsable URL) → ok=false: Proxmox cannot import it, use the
// SSH fallback ([DownloadOverSSH]). ext is returned without the dot.
func ImageFormat(rawURL string) (ext string, ok bool) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", false
	}
	switch strings.ToLower(path.Ext(u.Path)) {
	case ".img", ".qcow2":
		return "qcow2", true
	case ".raw":
		return "raw", true
	case ".vmdk":
		return "vmdk", true
	}
	return "", false
}

// ImportFileName is the file name an image is stored under in a storage's import content:
// the lower-case hex SHA-256 of the full URL (query included) followed by "." and ext
// ("qcow2", as [ImageFormat] returns it; a leading dot is accepted too). The same URL
// always gives the same name, so a second provision finds the file and reuses it.
func ImportFileName(rawURL, ext string) string {
	sum := sha256.Sum256([]byte(rawURL))
	return hex.EncodeToString(sum[:]) + "." + strings.TrimPrefix(ext, ".")
}

// ImportVolumeID is the volume id of an import file on storage: "images:import/<file>".
func ImportVolumeID(storage, file string) string { return storage + ":import/" + file }

// Volume is one entry of a storage's content.
type Volume struct {
	VolID   string // "images:import/<file>", "local-lvm:vm-100-disk-0"
	Format  string // "qcow2", "raw", "vmdk", "ova", "iso", …
	Content string // "import", "images", "iso", …
	Size    int64  // bytes; 0 when PVE does not report it
}

// StorageContent lists a storage's volumes as node sees them (GET
// /nodes/{node}/storage/{storage}/content), only those of content type content when not
// empty, in PVE's order. Errors: see the package doc (PVE answers 500 "storage 'x' does not
// exist", "storage 'x' is disabled", "storage 'x' is not available on node 'n'").
func (c *Client) StorageContent(ctx context.Context, node, storage, content string) ([]Volume, error) {
	r := request{method: http.MethodGet, path: storagePath(node, storage) + "/content"}
	if content != "" {
		r.query = url.Values{"content": {content}}
	}
	return getList(ctx, c, r, func(it map[string]string) Volume {
		size := flatInt(it, "size")
		if size == 0 {
			size = flatInt(it, "approximate-size")
		}
		return Volume{VolID: it["volid"], Format: it["format"], Content: it["content"], Size: size}
	})
}

// storagePath is "/nodes/{node}/storage/{storage}".
func storagePath(node, storage string) string {
	return "/nodes/" + url.PathEscape(node) + "/storage/" + url.PathEscape(storage)
}

// ErrChecksumMismatch: a downloaded image's checksum is not the expected one. Returned by
// [DownloadOverSSH] and, wrapped together with the *[TaskError], by [Client.DownloadURL].
var ErrChecksumMismatch = errors.New("proxmox: image checksum mismatch")

// ChecksumAlgorithms are the checksum algorithms PVE's download-url accepts (and
// [DownloadOverSSH] verifies with the matching coreutils tool).
func ChecksumAlgorithms() []string {
	return []string{"md5", "sha1", "sha224", "sha256", "sha384", "sha512"}
}

// DownloadRequest is one download-url of an image into a storage's import content.
type DownloadRequest struct {
	URL               string // http(s) URL of the image
	Filename          string // file name in the import content ([ImportFileName])
	Checksum          string // expected checksum, hex; "" sends no checksum (and no algorithm)
	ChecksumAlgorithm string // one of [ChecksumAlgorithms]
}

// checksumMismatch is PVE's worker text ("checksum mismatch: got 'x' != expect 'y'").
var checksumMismatch = regexp.MustCompile(`(?i)\bchecksum mismatch\b`)

// DownloadURL makes node download req.URL into storage's import content: POST
// /nodes/{node}/storage/{storage}/download-url with content=import, filename, url and, when
// req.Checksum is set, checksum and checksum-algorithm; PVE verifies the checksum itself.
// It waits for the task and returns its UPID, also with a task error. Errors:
//   - *[TaskError] (PVE's worker failed): when the exit status is PVE's "checksum mismatch:
//     got 'x' != expect 'y'" the error also matches [ErrChecksumMismatch];
//   - *[APIError] refusals before the task: 500 "storage 'x' is not configured for
//     content-type 'import'", "can't upload to storage type 'lvmthin', not a file based
//     storage!", 400 on filename ("invalid filename or wrong extension"), 403 without
//     Datastore.AllocateTemplate / Sys.AccessNetwork;
//   - the transport errors of the package doc (never retried: a lost answer may have
//     started the download).
func (c *Client) DownloadURL(ctx context.Context, node, storage string, req DownloadRequest) (string, error) {
	form := url.Values{"content": {ImportContent}, "filename": {req.Filename}, "url": {req.URL}}
	if req.Checksum != "" {
		algo := strings.ToLower(req.ChecksumAlgorithm)
		if !slices.Contains(ChecksumAlgorithms(), algo) {
			return "", fmt.Errorf("proxmox: download-url: unsupported checksum algorithm %q", req.ChecksumAlgorithm)
		}
		form.Set("checksum", strings.ToLower(strings.TrimSpace(req.Checksum)))
		form.Set("checksum-algorithm", algo)
	}
	upid, err := c.runTask(ctx, node, request{method: http.MethodPost, path: storagePath(node, storage) + "/download-url", form: form})
	var te *TaskError
	if errors.As(err, &te) && checksumMismatch.MatchString(te.ExitStatus) {
		err = fmt.Errorf("%w: %w", ErrChecksumMismatch, err)
	}
	return upid, err
}

// ErrUndeclaredParam: a caller passed a parameter this package does not declare for the
// method (see [UsedAPI]); nothing was sent.
var ErrUndeclaredParam = errors.New("proxmox: parameter not declared in UsedAPI")

// createVMParams are the POST /nodes/{node}/qemu parameters [Client.CreateVM] accepts
// besides vmid, with PVE's schema names ("net[n]" stands for net0…net31).
var createVMParams = []string{
	"name", "description", "tags", "ostype", "memory", "balloon", "cores", "sockets", "cpu", "numa",
	"agent", "bios", "machine", "scsihw", "boot", "vga", "onboot", "start", "storage",
	"import-working-storage", "efidisk0",
	"scsi[n]", "virtio[n]", "sata[n]", "ide[n]", "net[n]", "serial[n]", "ipconfig[n]",
	"ciuser", "cipassword", "citype", "sshkeys", "nameserver", "searchdomain",
}

// CreateVM creates QEMU VM vmid on node: POST /nodes/{node}/qemu with vmid and params (PVE
// config keys: name, memory, cores, sockets, agent, scsihw, net0…, scsi0 =
// "<storage>:0,import-from=<storage>:import/<file>" or "<storage>:0,import-from=/abs/path",
// ide2 = "<storage>:cloudinit", boot, serial0, vga, ciuser, cipassword, sshkeys, …). sshkeys
// is sent URL-encoded as PVE requires (pass it plain); cipassword is scrubbed from every
// error. It waits for the task (qmcreate, which imports the disk) and returns its UPID, also
// with a task error. A key this package does not declare → an error matching
// [ErrUndeclaredParam], nothing sent. Errors: *[APIError] (400 with Params, e.g. scsi0
// "'import-from' requires special syntax - use <storage ID>:0,import-from=<source>"; 500
// "VM 123 already exists on node 'pve1'" matching [ErrAlreadyExists]), *[TaskError] (e.g.
// "unable to create VM 123 - can't find file '/x'"), or the package's transport errors. It
// is never retried: after [ErrAnswerLost] read the VM before creating it again.
func (c *Client) CreateVM(ctx context.Context, node string, vmid int64, params map[string]string) (string, error) {
	use := APIUse{Params: createVMParams}
	form := url.Values{"vmid": {strconv.FormatInt(vmid, 10)}}
	var secrets []string
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if !use.Declares(k) {
			return "", fmt.Errorf("%w: POST /nodes/{node}/qemu %q", ErrUndeclaredParam, k)
		}
		v := params[k]
		switch k {
		case "sshkeys":
			v = encodeSSHKeys(v)
		case "cipassword":
			secrets = append(secrets, v)
		}
		form.Set(k, v)
	}
	r := request{method: http.MethodPost, path: "/nodes/" + url.PathEscape(node) + "/qemu", form: form, secrets: secrets}
	return c.runTask(ctx, node, r)
}

// encodeSSHKeys URL-encodes an sshkeys value the way PVE's GUI does (spaces as %20).
func encodeSSHKeys(v string) string {
	return strings.ReplaceAll(url.QueryEscape(v), "+", "%20")
}
