package proxmox

import (
	"context"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// Units of a [TaskProgress].
const (
	// ProgressBytes: Done and Total count bytes.
	ProgressBytes = "bytes"
	// ProgressPercent: Done is a percentage of Total, which is 100.
	ProgressPercent = "percent"
)

// TaskProgress is how far a running Proxmox task is, as its log says: Done of Total, both
// counted in Unit ([ProgressBytes], or [ProgressPercent] when the log gives only a
// percentage). Done never exceeds Total.
type TaskProgress struct {
	Done  int64
	Total int64
	Unit  string
}

// taskLogLine is one line of a task's log as GET /nodes/{node}/tasks/{upid}/log answers it:
// N counts the log's lines from 1.
type taskLogLine struct {
	N int    `json:"n"`
	T string `json:"t"`
}

// Task log reads: lines asked for per request, requests per poll at most.
const (
	taskLogPage     = 500
	taskLogMaxPages = 4
)

// taskLog is the incremental reading of one task's log: seen lines have been read and parsed,
// the next read starts after them.
type taskLog struct {
	node, upid string
	path       string
	seen       int
	parser     progressParser
}

func newTaskLog(node, upid string) *taskLog {
	return &taskLog{node: node, upid: upid, path: taskPath(node, upid) + "/log"}
}

// readTaskLog reads the lines of tl's log that it has not read yet (GET …/log with start = the
// lines seen, limit taskLogPage; further pages, up to taskLogMaxPages, while a page comes back
// full), parses them and returns the newest progress the log has given so far (ok false: none
// yet). PVE answers an empty log with the one line {n: 1, t: "no content"}; it is not counted
// as read. A line is never parsed twice, also when an answer repeats lines.
func (c *Client) readTaskLog(ctx context.Context, tl *taskLog) (p TaskProgress, ok bool, err error) {
	for range taskLogMaxPages {
		var lines []taskLogLine
		q := url.Values{"start": {strconv.Itoa(tl.seen)}, "limit": {strconv.Itoa(taskLogPage)}}
		if err = c.do(ctx, request{method: http.MethodGet, path: tl.path, query: q}, &lines); err != nil {
			break
		}
		if tl.seen == 0 && len(lines) == 1 && lines[0].N == 1 && lines[0].T == "no content" {
			break
		}
		for _, ln := range lines {
			if ln.N <= tl.seen {
				continue
			}
			tl.seen = ln.N
			tl.parser.line(ln.T)
		}
		if len(lines) < taskLogPage {
			break
		}
	}
	p, ok = tl.parser.progress()
	return p, ok, err
}

// Progress lines of PVE's workers (PVE 9.2). Sizes are PVE::Format::render_bytes with one
// decimal: "1.2 GiB" (B, KiB, MiB, GiB, TiB, PiB).
var (
	// vzdumpProgress is vzdump's QEMU backup status (PVE::VZDump::QemuServer, printed with
	// the "INFO: " prefix): "INFO:  12% (1.2 GiB of 10.0 GiB) in 3s, read: …, write: …".
	vzdumpProgress = regexp.MustCompile(`(\d{1,3})% \((\d+(?:\.\d+)?) ([KMGTP]?i?B) of (\d+(?:\.\d+)?) ([KMGTP]?i?B)\)`)
	// transferProgress covers three workers' lines: a drive mirror (PVE::QemuServer::BlockJob,
	// move_disk of a running VM and migrations with local disks) "drive-scsi0: transferred
	// 1.0 GiB of 32.0 GiB (3.12%) in 10s"; qemu-img convert (PVE::QemuServer::QemuImage,
	// move_disk of a stopped VM, imports) "transferred 1.0 GiB of 32.0 GiB (3.12%)"; and a
	// live migration's RAM (PVE::QemuMigrate) "migration active, transferred 512.0 MiB of
	// 4.0 GiB VM-state, 100.0 MiB/s".
	transferProgress = regexp.MustCompile(`transferred (\d+(?:\.\d+)?) ([KMGTP]?i?B) of (\d+(?:\.\d+)?) ([KMGTP]?i?B)`)
	// mirrorProgressOld is the drive mirror line of PVE before 8: "drive-scsi0: transferred:
	// 1073741824 bytes remaining: 33285996544 bytes total: 34359738368 bytes progression:
	// 3.12 % busy: 1 ready: 0".
	mirrorProgressOld = regexp.MustCompile(`transferred: (\d+) bytes remaining: \d+ bytes total: (\d+) bytes`)
	// wgetLength is wget's announcement of the size (download-url runs PVE::Tools::
	// download_file_from_url, i.e. wget --progress=dot:giga): "Length: 654311424 (624M)
	// [application/octet-stream]".
	wgetLength = regexp.MustCompile(`^\s*Length: (\d+)`)
	// wgetRow is one row of wget's dot:giga progress: the row's offset in KiB, up to 32 dots
	// of 1 MiB, the percentage: "     0K ........ ........ ........ ........  5% 40.2M 15s".
	wgetRow = regexp.MustCompile(`^\s*(\d+)K ([ .,]*?)\s*(\d{1,3})%`)
	// wgetSaved is wget's last line: "… (96.2 MB/s) - '/var/lib/vz/…' saved [654311424/654311424]".
	wgetSaved = regexp.MustCompile(`saved \[(\d+)/(\d+)\]`)
	// restoreProgress is a restore's progress (qemu-server PVE/QemuServer.pm,
	// restore_vma_archive and restore_proxmox_backup_archive print what vma extract and
	// pbs-restore report): "progress 12% (read 1288490188 bytes, duration 3 sec)", or with
	// ", zeroes = 40% (… bytes)" from pbs-restore. Only the percentage counts: the bytes are
	// read so far, the archive's size is not in the line.
	restoreProgress = regexp.MustCompile(`^progress (\d{1,3})% \(read \d+ bytes`)
)

// wgetDotBytes is one dot of wget's dot:giga style.
const wgetDotBytes = 1 << 20

// progressParser reads a task log's lines in order and keeps the newest progress they give.
type progressParser struct {
	length int64 // wget's announced size, 0 unknown
	last   TaskProgress
	found  bool
}

// progress is the newest progress seen, ok false when no line gave one.
func (p *progressParser) progress() (TaskProgress, bool) { return p.last, p.found }

// line parses one log line; a progress line replaces the progress kept.
func (p *progressParser) line(s string) {
	if got, ok := p.parse(s); ok {
		p.last, p.found = got, true
	}
}

func (p *progressParser) parse(s string) (TaskProgress, bool) {
	if m := transferProgress.FindStringSubmatch(s); m != nil {
		return sized(m[1], m[2], m[3], m[4], "")
	}
	if m := vzdumpProgress.FindStringSubmatch(s); m != nil {
		return sized(m[2], m[3], m[4], m[5], m[1])
	}
	if m := mirrorProgressOld.FindStringSubmatch(s); m != nil {
		done, _ := strconv.ParseInt(m[1], 10, 64)
		total, _ := strconv.ParseInt(m[2], 10, 64)
		return bytesProgress(done, total)
	}
	if m := wgetLength.FindStringSubmatch(s); m != nil {
		p.length, _ = strconv.ParseInt(m[1], 10, 64)
		return TaskProgress{}, false
	}
	if m := wgetRow.FindStringSubmatch(s); m != nil {
		offsetK, _ := strconv.ParseInt(m[1], 10, 64)
		dots := int64(strings.Count(m[2], ".") + strings.Count(m[2], ","))
		if p.length > 0 {
			// the dots count whole MiB: a last row's rest shows only in its percentage
			pct, _ := strconv.ParseInt(m[3], 10, 64)
			return bytesProgress(max(offsetK*1024+dots*wgetDotBytes, p.length*min(pct, 100)/100), p.length)
		}
		return percentProgress(m[3])
	}
	if m := restoreProgress.FindStringSubmatch(s); m != nil {
		return percentProgress(m[1])
	}
	if m := wgetSaved.FindStringSubmatch(s); m != nil {
		done, _ := strconv.ParseInt(m[1], 10, 64)
		total, _ := strconv.ParseInt(m[2], 10, 64)
		return bytesProgress(done, total)
	}
	return TaskProgress{}, false
}

// sized is the progress of "<done> <unit> of <total> <unit>"; when the total is zero and the
// line has a percentage, the percentage.
func sized(done, doneUnit, total, totalUnit, percent string) (TaskProgress, bool) {
	d, ok1 := renderedBytes(done, doneUnit)
	t, ok2 := renderedBytes(total, totalUnit)
	if !ok1 || !ok2 {
		return TaskProgress{}, false
	}
	if t == 0 && percent != "" {
		return percentProgress(percent)
	}
	return bytesProgress(d, t)
}

// bytesProgress is done of total bytes, done capped at total; nothing for a zero total.
func bytesProgress(done, total int64) (TaskProgress, bool) {
	if total <= 0 || done < 0 {
		return TaskProgress{}, false
	}
	return TaskProgress{Done: min(done, total), Total: total, Unit: ProgressBytes}, true
}

// percentProgress is a percentage "0".."100".
func percentProgress(s string) (TaskProgress, bool) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return TaskProgress{}, false
	}
	return TaskProgress{Done: min(v, 100), Total: 100, Unit: ProgressPercent}, true
}

// byteUnit is the size of one of PVE::Format::render_bytes's units (powers of 1024), 0 for
// another word.
func byteUnit(unit string) float64 {
	for i, u := range []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"} {
		if u == unit {
			return math.Pow(1024, float64(i))
		}
	}
	return 0
}

// renderedBytes reads a render_bytes value ("1.2", "GiB") back as bytes.
func renderedBytes(value, unit string) (int64, bool) {
	mult := byteUnit(unit)
	v, err := strconv.ParseFloat(value, 64)
	if mult == 0 || err != nil || v < 0 || v*mult > math.MaxInt64/2 {
		return 0, false
	}
	return int64(math.Round(v * mult)), true
}
