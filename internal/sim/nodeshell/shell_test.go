package nodeshell

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSplitWords pins the quoting the shell understands and the syntax it refuses.
func TestSplitWords(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line string
		want []string
		bad  bool
	}{
		{line: "mkdir -p -- '/var/lib/vz/x y'", want: []string{"mkdir", "-p", "--", "/var/lib/vz/x y"}},
		{line: `rm -f -- 'it'\''s'`, want: []string{"rm", "-f", "--", "it's"}},
		{line: `wget -O "/a \"b\"" -- 'http://h/x?a=1&b=2'`, want: []string{"wget", "-O", `/a "b"`, "--", "http://h/x?a=1&b=2"}},
		{line: `a\ b`, want: []string{"a b"}},
		{line: "  ", want: nil},
		{line: "rm -f /x; reboot", bad: true},
		{line: "echo $(id)", bad: true},
		{line: "echo 'open", bad: true},
		{line: `echo "$HOME"`, bad: true},
	}
	for _, tt := range tests {
		got, err := splitWords(tt.line)
		if (err != nil) != tt.bad || !slices.Equal(got, tt.want) {
			t.Errorf("splitWords(%q) = %q, %v; want %q, bad %v", tt.line, got, err, tt.want, tt.bad)
		}
	}
}

// TestRun pins the simulated commands' effects, exit statuses and stderr: paths stay in the
// root, checksums print like coreutils, unknown commands exit 127, injected faults win.
func TestRun(t *testing.T) {
	t.Parallel()
	srv, err := New(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	run := func(line string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := srv.run(line, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	if err := os.WriteFile(filepath.Join(srv.Root(), "f"), []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv.FailNext("md5sum", 1, 5, "md5sum: injected")
	tests := []struct {
		line   string
		code   int
		stdout string
		stderr string
	}{
		{line: "sha256sum -- /f", stdout: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  /f\n"},
		{line: "sha1sum /../../f", stdout: "a9993e364706816aba3e25717850c26c9cd0d89d  /../../f\n"},
		{line: "sha256sum -- /missing", code: 1, stderr: "sha256sum: /missing: No such file or directory\n"},
		{line: "md5sum -- /f", code: 5, stderr: "md5sum: injected\n"},
		{line: "md5sum -- /f", stdout: "900150983cd24fb0d6963f7d28e17f72  /f\n"},
		{line: "mkdir -p -- /a/b", code: 0},
		{line: "mv -f -- /f /a/b/g", code: 0},
		{line: "rm -f -- /a/b/g /nothing", code: 0},
		{line: "reboot", code: 127, stderr: "bash: line 1: reboot: command not found\n"},
		{line: "sha256sum relative", code: 1, stderr: "sha256sum: relative: relative paths are not simulated\n"},
	}
	for _, tt := range tests {
		code, out, errOut := run(tt.line)
		if code != tt.code || out != tt.stdout || (tt.stderr != "" && errOut != tt.stderr) {
			t.Errorf("%s → %d %q %q; want %d %q %q", tt.line, code, out, errOut, tt.code, tt.stdout, tt.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(srv.Root(), "a", "b")); err != nil {
		t.Errorf("mkdir did not create the directory in the root: %v", err)
	}
	if _, err := os.Stat(filepath.Join(srv.Root(), "f")); err == nil {
		t.Error("mv left the source")
	}
	if got := srv.Commands(); len(got) != len(tests) || !strings.HasPrefix(got[0], "sha256sum") {
		t.Errorf("commands log %q", got)
	}
}
