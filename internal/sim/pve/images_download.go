package simpve

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
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
	// imgWorkerIDChar is a character PVE's encode_text escapes in a worker id.
	imgWorkerIDChar = regexp.MustCompile(`[^a-zA-Z0-9_\-.]`)
)

// downloadURL is POST /nodes/{node}/storage/{storage}/download-url. The checks run in
// PVE's order after the schema's: storage_check_enabled (500), file-based storage (500),
// content configured (500), file name (400); then a "download" task fetches the URL for
// real, verifies the checksum and stores the file as import/<filename>, or ends with
// PVE's error ("checksum mismatch: got 'x' != expect 'y'", "download failed: …",
// "refusing to override existing file '…'"). Only content=import is simulated.
func (s *Server) downloadURL(c *call) answer {
	node, id, a, okay := s.imgNodeCall(c)
	if !okay {
		return a
	}
	p := c.params // the schema checked url, content, filename, checksum and its algorithm
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
	_, existed := s.imgGet(id, node, filename)
	pid := s.state.pid + 1
	if failure == "" {
		failure, vol = s.imgFetch(c, node, id, filename, dest)
	}
	workerID := imgWorkerIDChar.ReplaceAllStringFunc(filename, func(ch string) string { return fmt.Sprintf("\\x%02x", ch[0]) })
	a = s.imgStartTask(c, node, "download", workerID, failure, func(time.Time) {
		if vol.digests != nil {
			s.imgPut(id, node, filename, vol)
		}
	})
	return s.withLog(a, downloadLog(p.Get("url"), dest, pid, vol.size, failure == "" && existed, failure == "" && p.Has("checksum")))
}

// downloadLog is a download task's log as PVE::Tools::download_file_from_url writes it: the
// "downloading URL to DEST" line, then (a new file) wget --progress=dot:giga's output, whose
// rows of 32 dots of 1 MiB appear as the run passes, the checksum check and the "download of
// … finished" line; a file already there with the right checksum only says so. A failed
// download logs only its first line (the error is the task's last line).
func downloadLog(rawURL, dest string, pid int64, size int64, existed, checksum bool) func(float64) []string {
	head := []string{fmt.Sprintf("downloading %s to %s", rawURL, dest)}
	finished := fmt.Sprintf("download of '%s' to '%s' finished", rawURL, dest)
	switch {
	case size <= 0:
		return func(float64) []string { return head }
	case existed:
		return func(float64) []string {
			return append(head, "calculating checksum of existing file...OK, got correct file already, no need to download")
		}
	}
	const dots, maxRows = 32, 200
	dot := int64(1 << 20)
	if size > dot*dots*maxRows { // a huge image: fewer, longer rows (wget's dot:giga is 32 MiB a row)
		dot = (size + dots*maxRows - 1) / (dots * maxRows)
	}
	row := dot * dots
	rows := int((size + row - 1) / row)
	tmp := fmt.Sprintf("%s.tmp_dwnl.%d", dest, pid)
	host, port := rawURL, "80"
	if u, err := url.Parse(rawURL); err == nil {
		host, port = u.Hostname(), u.Port()
		if port == "" && u.Scheme == "https" {
			port = "443"
		} else if port == "" {
			port = "80"
		}
	}
	head = append(head,
		fmt.Sprintf("--%s--  %s", time.Now().Format("2006-01-02 15:04:05"), rawURL),
		fmt.Sprintf("Connecting to %s (%s)|%s|:%s... connected.", host, host, host, port),
		"HTTP request sent, awaiting response... 200 OK",
		fmt.Sprintf("Length: %d (%s) [application/octet-stream]", size, wgetSize(size)),
		fmt.Sprintf("Saving to: '%s'", tmp),
		"")
	tail := []string{"", fmt.Sprintf("%s (40.0 MB/s) - '%s' saved [%d/%d]", time.Now().Format("2006-01-02 15:04:05"), tmp, size, size), ""}
	if checksum {
		tail = append(tail, "calculating checksum...OK, checksum verified")
	}
	tail = append(tail, finished)
	return progressLog(head, rows, func(i int) string {
		start := int64(i-1) * row
		n := int(min(dots, (size-start)/dot))
		var b strings.Builder
		fmt.Fprintf(&b, "%6dK", start/1024)
		for d := range dots {
			if d%8 == 0 {
				b.WriteByte(' ')
			}
			if d < n {
				b.WriteByte('.')
			} else {
				b.WriteByte(' ')
			}
		}
		if i == rows {
			fmt.Fprintf(&b, "%3d%% 40.0M=%ds", 100, max(1, size/(40<<20)))
		} else {
			fmt.Fprintf(&b, "%3d%% 40.0M %ds", 100*(start+row)/size, (size-start-row)/(40<<20))
		}
		return b.String()
	}, tail)
}

// wgetSize is wget's human size in the Length line: "624M", "1.2G", "512K".
func wgetSize(n int64) string {
	switch {
	case n >= 10<<30:
		return fmt.Sprintf("%dG", n>>30)
	case n >= 1<<30:
		return fmt.Sprintf("%.1fG", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dK", n>>10)
	}
	return fmt.Sprintf("%d", n)
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
