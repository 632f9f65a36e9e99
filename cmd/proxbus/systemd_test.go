package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/testenv"
)

// unprivilegedUID is the user TestSystemdUnitRunsUnprivileged runs the unit's ExecStart as,
// standing in for the unit's DynamicUser.
const unprivilegedUID = 65534

// TestSystemdUnitRunsUnprivileged runs deploy/systemd/proxbus.service's ExecStart as an
// unprivileged user with the environment the unit gives it (its Environment= lines, the
// sample deploy/systemd/proxbus.env as EnvironmentFile=, %d expanded to a credentials
// directory holding a copy of every LoadCredential= source, owned by that user, 0400, as
// systemd lays it out) while the installed /etc/proxbus stays root-only (0700): the replica
// must become ready. The old unit, which pointed serve at /etc/proxbus/endpoints.yaml, fails
// here: the dynamic user cannot read it. The second case is the Debian package's layout
// (deploy/package): the unit with the package's drop-in (ExecStart=/usr/bin/proxbus, its
// pve-token credential) and its sample endpoints.yaml, filled in as an operator would (the
// URL and token id of the cluster, the two secret files).
func TestSystemdUnitRunsUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	bin := buildProxbus(t)
	env, r := devInfra(t)
	unitRaw, err := os.ReadFile("../../deploy/systemd/proxbus.service")
	if err != nil {
		t.Fatal(err)
	}
	dropIn, err := os.ReadFile("../../deploy/package/files/package.conf")
	if err != nil {
		t.Fatal(err)
	}
	packagedEndpoints, err := os.ReadFile("../../deploy/package/files/endpoints.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		unit string
		exe  string // the unit's ExecStart binary
		// secret is the credential file of the Proxmox token secret; endpoints writes the
		// endpoints file with the simulator's URL, whose secret is at creds/secret.
		secret    string
		endpoints func(creds string) string
	}{
		{"the unit", strings.Replace(string(unitRaw), "#LoadCredential=pve-lab:", "LoadCredential=pve-lab:", 1), "/usr/local/bin/proxbus", "pve-lab",
			func(creds string) string {
				return fmt.Sprintf("endpoints:\n  - id: 1\n    name: lab\n    urls: [%s]\n    token_id: %q\n    token_secret_file: %s\n",
					env.PVEURL, app.DemoPVETokenID, filepath.Join(creds, "pve-lab"))
			}},
		{"the Debian package", string(unitRaw) + "\n" + string(dropIn), "/usr/bin/proxbus", "pve-token",
			func(creds string) string {
				s := regexp.MustCompile(`(?m)^    urls: .*$`).ReplaceAllString(string(packagedEndpoints), "    urls: ["+env.PVEURL+"]")
				s = regexp.MustCompile(`(?m)^    token_id: .*$`).ReplaceAllString(s, "    token_id: "+app.DemoPVETokenID)
				return strings.ReplaceAll(s, "/run/credentials/proxbus.service", creds)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runUnitUnprivileged(t, bin, tt.unit, tt.exe, tt.secret, tt.endpoints, env, r)
		})
	}
}

// runUnitUnprivileged installs the files unit reads under a temporary root, runs its
// ExecStart (which must name exe) as [unprivilegedUID] with the environment the unit gives it,
// and waits for /readyz to answer 200, then for a clean exit after SIGTERM.
func runUnitUnprivileged(t *testing.T, bin, unit, exe, secretName string, endpointsFile func(creds string) string, env *app.DevEnv, r *testenv.Redis) {
	t.Helper()
	// A root dir the unprivileged user may traverse, with the binary and the installed layout.
	root, err := os.MkdirTemp("", "proxbus-systemd-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	must(t, os.Chmod(root, 0o755))
	installed := filepath.Join(root, "proxbus")
	copyFile(t, bin, installed, 0o755)
	etc := filepath.Join(root, "etc", "proxbus")
	must(t, os.MkdirAll(filepath.Join(etc, "credentials"), 0o700))
	must(t, os.Chmod(etc, 0o700))
	creds := filepath.Join(root, "run", "credentials", "proxbus.service")
	must(t, os.MkdirAll(creds, 0o755))

	unit = strings.ReplaceAll(unit, "/etc/proxbus", etc)
	// The installed files: the endpoints file (its token secret a credential too), the token.
	must(t, os.WriteFile(filepath.Join(etc, "credentials", secretName), []byte(app.DemoPVESecret+"\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(etc, "credentials", "endpoints.yaml"), []byte(endpointsFile(creds)), 0o600))
	must(t, os.WriteFile(filepath.Join(etc, "credentials", "netbox-token"), []byte(app.DemoNetBoxToken+"\n"), 0o600))
	// The sample environment file, with this test's services.
	sample, err := os.ReadFile("../../deploy/systemd/proxbus.env")
	if err != nil {
		t.Fatal(err)
	}
	httpAddr := freeLoopback(t)
	envFile := string(sample) + fmt.Sprintf("PROXBUS_NATS_URL=%s\nPROXBUS_REDIS_URL=%s\nPROXBUS_REDIS_KEY_PREFIX=%s\nPROXBUS_NETBOX_URL=%s\n",
		env.NATSURL, r.URL, r.Prefix, env.NetBoxURL)
	must(t, os.WriteFile(filepath.Join(etc, "proxbus.env"), []byte(envFile), 0o600))

	execStart, vars := unitEnvironment(t, unit, creds)
	// LoadCredential=: systemd copies each source, readable by the service's user only.
	for _, line := range strings.Split(unit, "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "LoadCredential=")
		if !ok {
			continue
		}
		name, src, _ := strings.Cut(v, ":")
		dst := filepath.Join(creds, name)
		copyFile(t, src, dst, 0o400)
		must(t, os.Chown(dst, unprivilegedUID, unprivilegedUID))
	}
	must(t, os.Chown(creds, unprivilegedUID, unprivilegedUID))
	must(t, os.Chmod(creds, 0o500))
	vars["PROXBUS_HTTP_ADDR"] = httpAddr // the unit's 127.0.0.1:9090 may be taken on this machine

	args := strings.Fields(execStart)
	if args[0] != exe {
		t.Fatalf("ExecStart %q: not the installed binary %s", execStart, exe)
	}
	cmd := exec.Command(installed, args[1:]...)
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: unprivilegedUID, Gid: unprivilegedUID}}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	var logs strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
		}
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	ready := false
	for safety := time.Now().Add(2 * testWait); !ready; {
		select {
		case err := <-exited:
			t.Fatalf("proxbus serve as uid %d exited: %v\n%s", unprivilegedUID, err, logs.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(safety) {
			t.Fatalf("not ready after %s (a safety net)", 2*testWait)
		}
		if resp, err := http.Get("http://" + httpAddr + app.PathReadyz); err == nil {
			ready = resp.StatusCode == http.StatusOK
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	}
	must(t, cmd.Process.Signal(syscall.SIGTERM))
	if err := <-exited; err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 0 {
			t.Errorf("after SIGTERM: %v\n%s", err, logs.String())
		}
	}
}

// unitEnvironment reads the unit's ExecStart and the environment it gives the service: its
// Environment= lines, overridden by its EnvironmentFile= (as systemd does), %d expanded to
// creds.
func unitEnvironment(t *testing.T, unit, creds string) (execStart string, vars map[string]string) {
	t.Helper()
	vars = map[string]string{}
	var files []string
	for _, line := range strings.Split(unit, "\n") {
		line = strings.TrimSpace(line)
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		switch k {
		case "ExecStart":
			execStart = v
		case "Environment":
			name, val, _ := strings.Cut(v, "=")
			vars[name] = strings.ReplaceAll(val, "%d", creds)
		case "EnvironmentFile":
			files = append(files, v)
		}
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(raw), "\n") {
			line = strings.TrimSpace(line)
			if name, val, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
				vars[name] = val
			}
		}
	}
	return execStart, vars
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(dst, b, mode))
	must(t, os.Chmod(dst, mode))
}

// freeLoopback is a loopback address free a moment ago.
func freeLoopback(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
