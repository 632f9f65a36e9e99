package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestPackage packs a stand-in binary and reads the .deb back with dpkg-deb: the binary, the
// unit and its drop-in running /usr/bin/proxbus as the proxbus user, the sample configuration
// as configuration files, the dashboard and alert rules, and the maintainer scripts that make
// the user and the secret files.
func TestPackage(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("dpkg-deb not installed: the package cannot be read back here")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "proxbus")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho proxbus test\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	deb := filepath.Join(dir, "proxbus.deb")
	if err := pack(Info("../..", bin, "v1.2.3", "amd64"), deb); err != nil {
		t.Fatal(err)
	}
	dpkg := func(action string, args ...string) string { // dpkg-deb ACTION DEB ARGS...
		t.Helper()
		out, err := exec.Command("dpkg-deb", append([]string{action, deb}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("dpkg-deb %s %v: %v\n%s", action, args, err, out)
		}
		return string(out)
	}
	contents := dpkg("--contents")
	for _, want := range []string{
		"-rwxr-xr-x root/root .* ./usr/bin/proxbus\n",
		" ./usr/lib/systemd/system/proxbus.service\n",
		" ./usr/lib/systemd/system/proxbus.service.d/package.conf\n",
		"drwx------ root/root .* ./etc/proxbus/credentials/\n",
		"-rw------- root/root .* ./etc/proxbus/proxbus.env\n",
		"-rw------- root/root .* ./etc/proxbus/credentials/endpoints.yaml\n",
		" ./usr/share/proxbus/grafana/proxbus.json\n",
		" ./usr/share/proxbus/prometheus/alerts.yml\n",
	} {
		if !regexp.MustCompile(want).MatchString(contents) {
			t.Errorf("the package lacks %q:\n%s", want, contents)
		}
	}
	if got := dpkg("--field", "Version"); strings.TrimSpace(got) != "1.2.3-1" {
		t.Errorf("Version %q, want 1.2.3-1", got)
	}
	if got := dpkg("--info", "conffiles"); !strings.Contains(got, "/etc/proxbus/proxbus.env") || !strings.Contains(got, "/etc/proxbus/credentials/endpoints.yaml") {
		t.Errorf("conffiles %q", got)
	}
	if got := dpkg("--info", "postinst"); !strings.Contains(got, "adduser --system") || !strings.Contains(got, "netbox-token") {
		t.Errorf("postinst makes no system user or secret files:\n%s", got)
	}
	unit := filepath.Join(dir, "unpacked")
	if out, err := exec.Command("dpkg-deb", "--extract", deb, unit).CombinedOutput(); err != nil {
		t.Fatalf("extract: %v\n%s", err, out)
	}
	dropIn, err := os.ReadFile(filepath.Join(unit, "usr/lib/systemd/system/proxbus.service.d/package.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nExecStart=\nExecStart=/usr/bin/proxbus serve\n", "\nUser=proxbus\n"} {
		if !strings.Contains(string(dropIn), want) {
			t.Errorf("drop-in lacks %q", want)
		}
	}
}

// TestGitVersion: the version of a checkout is a tag or a Go pseudo-version naming the commit.
func TestGitVersion(t *testing.T) {
	t.Parallel()
	if err := exec.Command("git", "-C", "../..", "rev-parse", "HEAD").Run(); err != nil {
		t.Skip("not a git checkout")
	}
	v, c, err := gitVersion("../..")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{12}(\+dirty)?$`).MatchString(c) {
		t.Errorf("commit %q", c)
	}
	if !regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+`).MatchString(v) || (strings.HasPrefix(v, "v0.0.0-") && !strings.Contains(v, strings.TrimSuffix(c, "+dirty"))) {
		t.Errorf("version %q (commit %q)", v, c)
	}
}
