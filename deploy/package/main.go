// Command package builds proxbus for release and packs it as a Debian package with nfpm.
//
//	go -C deploy/package run .                    # dist/proxbus_<version>_<arch>.deb
//	go -C deploy/package run . -binary PATH       # pack a binary built elsewhere (same version)
//
// The release build is `go build -trimpath -ldflags="-s -w -X …"` of ./cmd/proxbus with CGO
// off: paths of the build machine are left out, the symbol table and DWARF are stripped, and
// the version and commit git gives for ROOT are set in internal/buildinfo (`proxbus version`
// and proxbus_build_info show them). The version is the newest v* tag as `git describe`
// gives it, else a Go pseudo-version (v0.0.0-<commit time>-<commit>), with "+dirty" for a
// modified tree; the package has the same version (dpkg's spelling: 0.0.0~<time>-<commit>-1).
//
// The package holds the binary (/usr/bin/proxbus), the hardened unit of deploy/systemd with a
// drop-in that runs /usr/bin/proxbus as the system user proxbus, the sample
// /etc/proxbus/proxbus.env and /etc/proxbus/credentials/endpoints.yaml (configuration files
// dpkg keeps on upgrade), the Grafana dashboard and the Prometheus alert rules of deploy/
// (/usr/share/proxbus/), and maintainer scripts that create the user and an empty
// /etc/proxbus/credentials/netbox-token; the service is not started: its configuration
// needs filling first. It is its own module so nfpm's dependencies stay out of proxbus's.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"
)

func main() {
	root := flag.String("root", "../..", "the proxbus repository (the directory of its go.mod)")
	out := flag.String("out", "", "where the binary and the .deb go (default ROOT/dist)")
	binary := flag.String("binary", "", "pack this binary instead of building one")
	arch := flag.String("arch", runtime.GOARCH, "GOARCH to build for, and the package's architecture")
	flag.Parse()
	if *out == "" {
		*out = filepath.Join(*root, "dist")
	}
	path, err := run(*root, *out, *binary, *arch)
	if err != nil {
		fmt.Fprintln(os.Stderr, "package:", err)
		os.Exit(1)
	}
	fmt.Println(path)
}

// run builds (unless binary is set) and packs, returning the .deb's path.
func run(root, out, binary, arch string) (string, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	version, commit, err := gitVersion(root)
	if err != nil {
		return "", err
	}
	if binary == "" {
		binary = filepath.Join(out, "proxbus")
		if err := build(root, binary, arch, version, commit); err != nil {
			return "", err
		}
	}
	info := Info(root, binary, version, arch)
	name := fmt.Sprintf("proxbus_%s_%s.deb", strings.TrimPrefix(version, "v"), arch)
	path := filepath.Join(out, name)
	return path, pack(info, path)
}

// build runs the release build of ./cmd/proxbus in root into binary.
func build(root, binary, arch, version, commit string) error {
	abs, err := filepath.Abs(binary)
	if err != nil {
		return err
	}
	const pkg = "github.com/proxbus/proxbus/internal/buildinfo"
	ldflags := fmt.Sprintf("-s -w -X %s.version=%s -X %s.commit=%s", pkg, version, pkg, commit)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags="+ldflags, "-o", abs, "./cmd/proxbus")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/proxbus in %s: %w", root, err)
	}
	return nil
}

// gitVersion returns the version and commit (12 hex digits) of root's checkout, both with
// "+dirty" when the tree has changes.
func gitVersion(root string) (version, commit string, err error) {
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", append([]string{"-C", root}, args...)...)
		cmd.Env = append(os.Environ(), "TZ=UTC") // the pseudo-version's time is UTC
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("git %s in %s: %w", strings.Join(args, " "), root, err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	rev, err := git("rev-parse", "HEAD")
	if err != nil {
		return "", "", err
	}
	when, err := git("show", "-s", "--format=%cd", "--date=format-local:%Y%m%d%H%M%S", "HEAD")
	if err != nil {
		return "", "", err
	}
	status, err := git("status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return "", "", err
	}
	commit = rev[:12]
	version = "v0.0.0-" + when + "-" + commit
	if tag, err := git("describe", "--tags", "--match", "v[0-9]*", "HEAD"); err == nil {
		version = tag
	}
	if status != "" {
		version, commit = version+"+dirty", commit+"+dirty"
	}
	return version, commit, nil
}

// Info describes the package: what it holds and its scripts, with paths under root.
func Info(root, binary, version, arch string) *nfpm.Info {
	pkg := filepath.Join(root, "deploy", "package", "files")
	conf := func(src, dst string, mode os.FileMode) *files.Content {
		return &files.Content{Source: src, Destination: dst, Type: files.TypeConfigNoReplace, FileInfo: &files.ContentFileInfo{Mode: mode}}
	}
	return &nfpm.Info{
		Name:        "proxbus",
		Arch:        arch,
		Version:     version,
		Release:     "1",
		Section:     "admin",
		Priority:    "optional",
		Maintainer:  "proxbus maintainers <proxbus@users.noreply.github.com>",
		Description: "Proxmox VE driven from NATS JetStream commands\nproxbus consumes CloudEvents commands from NATS JetStream, runs them against\nProxmox VE with NetBox as the source of truth, and publishes their steps and results.",
		Homepage:    "https://github.com/proxbus/proxbus",
		License:     "Apache-2.0",
		Overridables: nfpm.Overridables{
			Depends: []string{"adduser"},
			Contents: files.Contents{
				{Source: binary, Destination: "/usr/bin/proxbus", FileInfo: &files.ContentFileInfo{Mode: 0o755}},
				{Source: filepath.Join(root, "deploy", "systemd", "proxbus.service"), Destination: "/usr/lib/systemd/system/proxbus.service",
					FileInfo: &files.ContentFileInfo{Mode: 0o644}},
				{Source: filepath.Join(pkg, "package.conf"), Destination: "/usr/lib/systemd/system/proxbus.service.d/package.conf",
					FileInfo: &files.ContentFileInfo{Mode: 0o644}},
				{Destination: "/etc/proxbus", Type: files.TypeDir, FileInfo: &files.ContentFileInfo{Mode: 0o755}},
				{Destination: "/etc/proxbus/credentials", Type: files.TypeDir, FileInfo: &files.ContentFileInfo{Mode: 0o700}},
				{Source: filepath.Join(root, "deploy", "grafana", "proxbus.json"), Destination: "/usr/share/proxbus/grafana/proxbus.json",
					FileInfo: &files.ContentFileInfo{Mode: 0o644}},
				{Source: filepath.Join(root, "deploy", "prometheus", "alerts.yml"), Destination: "/usr/share/proxbus/prometheus/alerts.yml",
					FileInfo: &files.ContentFileInfo{Mode: 0o644}},
				conf(filepath.Join(root, "deploy", "systemd", "proxbus.env"), "/etc/proxbus/proxbus.env", 0o600),
				conf(filepath.Join(pkg, "endpoints.yaml"), "/etc/proxbus/credentials/endpoints.yaml", 0o600),
			},
			Scripts: nfpm.Scripts{
				PostInstall: filepath.Join(pkg, "postinst.sh"),
				PreRemove:   filepath.Join(pkg, "prerm.sh"),
				PostRemove:  filepath.Join(pkg, "postrm.sh"),
			},
		},
	}
}

// pack writes the Debian package of info to path.
func pack(info *nfpm.Info, path string) (err error) {
	info = nfpm.WithDefaults(info)
	if err := nfpm.PrepareForPackager(info, "deb"); err != nil {
		return fmt.Errorf("package contents: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	if err := deb.Default.Package(info, f); err != nil {
		return fmt.Errorf("deb: %w", err)
	}
	return nil
}
