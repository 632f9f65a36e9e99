package simpve

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// imgDownloadTimeout bounds one simulated download (it runs with Server.mu held).
const imgDownloadTimeout = 2 * time.Minute

var (
	// imgUnsafeChar is a character PVE's normalize_content_filename replaces by "_".
	imgUnsafeChar = regexp.MustCompile(`[^a-zA-Z0-9\-.+=_]`)
	// imgUploadImport is PVE's check of an import file name (UPLOAD_IMPORT_EXT_RE_1).
	imgUploadImport = regexp.MustCompile(`[a-zA-Z0-9\-.+=_]+\.(ova|qcow2|raw|vmdk)$`)
	// imgURLPattern is the schema pattern of download-url's url.
	imgURLPattern = regexp.MustCompile(`^https?://.*`)
	// imgWorkerIDChar is a character PVE's encode_text escapes in a worker id.
	imgWorkerIDChar = regexp.MustCompile(`[^a-zA-Z0-9_\-.]`)
)

// downloadURL is POST /nodes/{node}/storage/{storage}/download-url. The checks run in
// PVE's order: schema (400), storage_check_enabled (500), file-based storage (500),
// content configured (500), file name (400); then a "download" task fetches the URL for
// real, verifies the checksum and stores the file as import/<filename>, or ends with
// PVE's error ("checksum mismatch: got 'x' != expect 'y'", "download failed: …",
// "refusing to override existing file '…'"). Only content=import is simulated.
func (s *Server) downloadURL(c *call) answer {
	node, id, a, okay := s.imgNodeCall(c)
	if !okay {
		return a
	}
	p := c.params
	if errs := imgDownloadSchema(p); len(errs) > 0 {
		return paramFail(errs)
	}
	m, a, okay := s.imgStorageActive(id, node)
	if !okay {
		return a
	}
	dir := imgStoragePath(id, m)
	if dir == "" {
		return fail(http.StatusInternalServerError, fmt.Sprintf("can't upload to storage type '%s', not a file based storage!", m["type"]))
	}
	content := p.Get("content")
	if !contains(splitList(m["content"]), content) {
		return fail(http.StatusInternalServerError, fmt.Sprintf("storage '%s' is not configured for content-type '%s'", id, content))
	}
	if content != proxmox.ImportContent {
		return fail(http.StatusNotImplemented, fmt.Sprintf("sim/pve: download-url of content '%s' is not simulated", content))
	}
	filename := p.Get("filename")
	if i := strings.LastIndexAny(filename, `/\`); i >= 0 {
		filename = filename[i+1:]
	}
	filename = imgUnsafeChar.ReplaceAllString(strings.TrimRight(filename, "\n"), "_")
	if !imgUploadImport.MatchString(filename) {
		return paramFail(map[string]string{"filename": "invalid filename or wrong extension"})
	}
	dest := dir + "/import/" + filename
	failure, vol := s.imgTakeFault(node, id), imgVolume{}
	if failure == "" {
		failure, vol = s.imgFetch(c, node, id, filename, dest)
	}
	workerID := imgWorkerIDChar.ReplaceAllStringFunc(filename, func(ch string) string { return fmt.Sprintf("\\x%02x", ch[0]) })
	return s.imgStartTask(c, node, "download", workerID, failure, func(time.Time) {
		if vol.digests != nil {
			s.imgPut(id, node, filename, vol)
		}
	})
}

// imgDownloadSchema is download-url's parameter schema: required url (http/https), content
// (iso, vztmpl, import) and filename (≤ 255), checksum and checksum-algorithm only together,
// the algorithm from the enum, verify-certificates boolean.
func imgDownloadSchema(p paramsGetter) map[string]string {
	errs := map[string]string{}
	for _, k := range []string{"url", "content", "filename"} {
		if !p.Has(k) {
			errs[k] = "property is missing and it is not optional"
		}
	}
	if p.Has("url") && !imgURLPattern.MatchString(p.Get("url")) {
		errs["url"] = "value does not match the regex pattern"
	}
	if ct := p.Get("content"); p.Has("content") && !contains([]string{"iso", "vztmpl", proxmox.ImportContent}, ct) {
		errs["content"] = fmt.Sprintf("value '%s' does not have a value in the enumeration 'iso, vztmpl, import'", ct)
	}
	if len(p.Get("filename")) > 255 {
		errs["filename"] = "value may only be 255 characters long"
	}
	if p.Has("checksum") && !p.Has("checksum-algorithm") {
		errs["checksum-algorithm"] = "missing property - 'checksum' requires this property"
	}
	if p.Has("checksum-algorithm") && !p.Has("checksum") {
		errs["checksum"] = "missing property - 'checksum-algorithm' requires this property"
	}
	if algo := p.Get("checksum-algorithm"); p.Has("checksum-algorithm") && imgAlgorithms[algo] == nil {
		errs["checksum-algorithm"] = fmt.Sprintf("value '%s' does not have a value in the enumeration 'md5, sha1, sha224, sha256, sha384, sha512'", algo)
	}
	if v := p.Get("verify-certificates"); p.Has("verify-certificates") && !contains([]string{"0", "1", "true", "false", "yes", "no", "on", "off"}, v) {
		errs["verify-certificates"] = fmt.Sprintf("type check ('boolean') failed - got '%s'", v)
	}
	return errs
}

// imgFetch is the download worker, run at once (with Server.mu held, bounded by
// imgDownloadTimeout): it returns the task's failure ("" on success) and the volume to
// store when the task ends.
func (s *Server) imgFetch(c *call, node, storage, filename, dest string) (string, imgVolume) {
	algo, want := c.params.Get("checksum-algorithm"), strings.ToLower(c.params.Get("checksum"))
	if existing, found := s.imgGet(storage, node, filename); found {
		switch {
		case algo == "":
			return fmt.Sprintf("refusing to override existing file '%s'", dest), imgVolume{}
		case existing.digests[algo] == want:
			return "", existing // "OK, got correct file already, no need to download"
		default:
			return fmt.Sprintf("checksum mismatch: got '%s' != expect '%s'", existing.digests[algo], want), imgVolume{}
		}
	}
	rawURL := c.params.Get("url")
	wget := func(code int) string {
		return fmt.Sprintf("download failed: command 'wget --progress=dot:giga -O %s.tmp_dwnl.%d %s' failed: exit code %d", dest, s.state.pid+1, rawURL, code)
	}
	ctx, cancel := context.WithTimeout(c.r.Context(), imgDownloadTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return wget(1), imgVolume{}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	verify := c.params.Get("verify-certificates")
	tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: verify == "0" || verify == "false" || verify == "no" || verify == "off"} //nolint:gosec // PVE's verify-certificates=0
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return wget(4), imgVolume{}
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return wget(8), imgVolume{}
	}
	size, digests, virtual, err := imgDigest(resp.Body)
	if err != nil {
		return wget(4), imgVolume{}
	}
	if algo != "" && digests[algo] != want {
		return fmt.Sprintf("checksum mismatch: got '%s' != expect '%s'", digests[algo], want), imgVolume{}
	}
	if virtual > 0 {
		size = virtual
	}
	return "", imgVolume{size: size, ctime: time.Now().Unix(), digests: digests}
}
