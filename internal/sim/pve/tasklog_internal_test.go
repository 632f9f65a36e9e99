package simpve

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDownloadLog pins a download task's log as PVE::Tools::download_file_from_url and wget
// --progress=dot:giga write it: the first line, wget's Length and rows of 32 dots of 1 MiB
// appearing as the run passes (a 100 MiB file: three full rows and a last one of 4 dots),
// then the saved line, the checksum check and the finished line; the log only grows.
func TestDownloadLog(t *testing.T) {
	t.Parallel()
	const size = 100 << 20
	log := downloadLog("https://img.example/noble.img", "/var/lib/vz/import/noble.qcow2", 42, size, false, true)
	full := log(1)
	for _, want := range []string{
		"downloading https://img.example/noble.img to /var/lib/vz/import/noble.qcow2",
		"Connecting to img.example (img.example)|img.example|:443... connected.",
		"Length: 104857600 (100M) [application/octet-stream]",
		"Saving to: '/var/lib/vz/import/noble.qcow2.tmp_dwnl.42'",
		"     0K ........ ........ ........ ........ 32% 40.0M 1s",
		" 32768K ........ ........ ........ ........ 64% 40.0M 0s",
		" 65536K ........ ........ ........ ........ 96% 40.0M 0s",
		" 98304K ....                               100% 40.0M=2s",
		"calculating checksum...OK, checksum verified",
		"download of 'https://img.example/noble.img' to '/var/lib/vz/import/noble.qcow2' finished",
	} {
		if !slices.Contains(full, want) {
			t.Errorf("log lacks %q:\n%s", want, strings.Join(full, "\n"))
		}
	}
	prev := log(0)
	if slices.ContainsFunc(prev, func(l string) bool { return strings.Contains(l, "%") }) {
		t.Errorf("progress rows before the run: %q", prev)
	}
	for _, frac := range []float64{0.2, 0.5, 0.75, 0.99, 1} {
		cur := log(frac)
		if len(cur) < len(prev) || !slices.Equal(cur[:len(prev)], prev) {
			t.Fatalf("log at %.2f does not extend the one before:\n%q\n%q", frac, prev, cur)
		}
		prev = cur
	}
	if got := log(0.5); !slices.Contains(got, " 32768K ........ ........ ........ ........ 64% 40.0M 0s") || slices.Contains(got, " 65536K ........ ........ ........ ........ 96% 40.0M 0s") {
		t.Errorf("half-way log = %q, want two rows", got)
	}
	if got := downloadLog("http://x/y.img", "/d/y.qcow2", 1, 5, true, true)(1); len(got) != 2 || !strings.Contains(got[1], "no need to download") {
		t.Errorf("existing file's log = %q", got)
	}
}

// TestRenderers pins PVE::Format's render_bytes(v, 1) and render_duration as the simulated
// logs print them.
func TestRenderers(t *testing.T) {
	t.Parallel()
	for v, want := range map[int64]string{0: "0.0 B", 1023: "1023.0 B", 1024: "1.0 KiB", 3758096384: "3.5 GiB", 1 << 40: "1.0 TiB"} {
		if got := taskLogBytes(v); got != want {
			t.Errorf("taskLogBytes(%d) = %q, want %q", v, got, want)
		}
	}
	for d, want := range map[time.Duration]string{0: "0s", 400 * time.Millisecond: "0s", 10 * time.Second: "10s", 65 * time.Second: "1m 5s", 3603 * time.Second: "1h 3s"} {
		if got := taskLogDuration(d); got != want {
			t.Errorf("taskLogDuration(%s) = %q, want %q", d, got, want)
		}
	}
}
