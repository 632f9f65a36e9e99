package proxmox_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/internal/sim/nodeshell"
)

// nodeShell starts a node shell simulator with its root in a temp dir and returns it, its
// address and a client configuration (fresh client key, known_hosts with its host key).
func nodeShell(t *testing.T) (*nodeshell.Server, string, proxmox.SSHConfig) {
	t.Helper()
	srv, err := nodeshell.New(t.TempDir(), nodeshell.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	addr, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := srv.ClientFiles(t.TempDir(), "root", addr)
	if err != nil {
		t.Fatal(err)
	}
	return srv, addr, cfg
}

// dial connects to the shell, failing the test on error.
func dial(t *testing.T, cfg proxmox.SSHConfig, addr string) proxmox.NodeShell {
	t.Helper()
	sh, err := proxmox.DialNodeShell(testCtx(t), cfg, addr)
	if err != nil {
		t.Fatalf("DialNodeShell: %v", err)
	}
	return sh
}

// TestDialNodeShellHostKey pins host-key verification: the recorded key is accepted and
// commands run; a changed key or a host missing from known_hosts is refused with
// ErrHostKeyRefused before anything runs; a key the node does not accept is an error too.
func TestDialNodeShellHostKey(t *testing.T) {
	t.Parallel()
	otherKey := func(t *testing.T) ssh.PublicKey {
		t.Helper()
		pub, _, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		k, err := ssh.NewPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	tests := []struct {
		name     string
		tamper   func(t *testing.T, srv *nodeshell.Server, addr string, cfg *proxmox.SSHConfig)
		refused  bool // ErrHostKeyRefused
		fails    bool // any other error
		wantRuns bool
	}{
		{name: "recorded key", tamper: func(*testing.T, *nodeshell.Server, string, *proxmox.SSHConfig) {}, wantRuns: true},
		{name: "changed key", refused: true, tamper: func(t *testing.T, _ *nodeshell.Server, addr string, cfg *proxmox.SSHConfig) {
			if err := nodeshell.WriteKnownHosts(cfg.KnownHostsFile, addr, otherKey(t)); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "unknown host", refused: true, tamper: func(t *testing.T, srv *nodeshell.Server, _ string, cfg *proxmox.SSHConfig) {
			if err := nodeshell.WriteKnownHosts(cfg.KnownHostsFile, "pve9.example.net:22", srv.HostKey()); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "client key not authorized", fails: true, tamper: func(t *testing.T, srv *nodeshell.Server, addr string, cfg *proxmox.SSHConfig) {
			other, err := nodeshell.New(t.TempDir(), nodeshell.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = other.Close() })
			fresh, err := other.ClientFiles(t.TempDir(), "root", addr) // authorized on the other server only
			if err != nil {
				t.Fatal(err)
			}
			cfg.KeyFile = fresh.KeyFile
		}},
		{name: "incomplete config", fails: true, tamper: func(_ *testing.T, _ *nodeshell.Server, _ string, cfg *proxmox.SSHConfig) {
			cfg.KnownHostsFile = ""
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, addr, cfg := nodeShell(t)
			tt.tamper(t, srv, addr, &cfg)
			sh, err := proxmox.DialNodeShell(testCtx(t), cfg, addr)
			if got := errors.Is(err, proxmox.ErrHostKeyRefused); got != tt.refused {
				t.Fatalf("err = %v; host key refused = %v, want %v", err, got, tt.refused)
			}
			if tt.fails && err == nil {
				t.Fatal("dial succeeded, want an error")
			}
			if !tt.wantRuns {
				if sh != nil || len(srv.Commands()) != 0 {
					t.Fatalf("refused dial returned a shell or ran %v", srv.Commands())
				}
				return
			}
			if err != nil {
				t.Fatalf("DialNodeShell: %v", err)
			}
			if _, err := sh.Run(testCtx(t), "mkdir -p -- '/var/tmp/probe'"); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if st, err := os.Stat(filepath.Join(srv.Root(), "var", "tmp", "probe")); err != nil || !st.IsDir() {
				t.Errorf("mkdir did not run on the node: %v", err)
			}
			_, err = sh.Run(testCtx(t), "sha256sum -- /missing")
			if !errors.Is(err, proxmox.ErrShellCommand) || !strings.Contains(err.Error(), "No such file or directory") {
				t.Errorf("failing command: err = %v, want ErrShellCommand with stderr", err)
			}
		})
	}
}

// TestDownloadOverSSH pins the fallback download: the file lands under FallbackImageDir
// named after the URL's sha256 with its extension; a present file with the right checksum
// is reused without a download; a checksum mismatch removes the file and returns
// ErrChecksumMismatch; a stale file is replaced; a failed wget leaves nothing behind; bad
// input runs nothing; and the PVE simulator imports the file from the same node root.
func TestDownloadOverSSH(t *testing.T) {
	t.Parallel()
	img := qcow2Image(4<<30, "fedora")
	srv := serveImages(t, map[string][]byte{"/fedora.qcow2.xz": img})
	imgURL := srv.URL + "/fedora.qcow2.xz"
	path := proxmox.FallbackImagePath(imgURL)
	if want := proxmox.FallbackImageDir + "/" + sha256Hex([]byte(imgURL)) + ".qcow2.xz"; path != want {
		t.Fatalf("FallbackImagePath = %q, want %q", path, want)
	}
	nodeFile := func(srv *nodeshell.Server, p string) ([]byte, error) {
		return os.ReadFile(filepath.Join(srv.Root(), filepath.FromSlash(p)))
	}
	wgets := func(cmds []string) int {
		n := 0
		for _, c := range cmds {
			if strings.HasPrefix(c, "wget ") {
				n++
			}
		}
		return n
	}

	tests := []struct {
		name     string
		url      string
		checksum string
		algo     string
		present  []byte // file already at path
		wgetFail bool
		want     error // sentinel; nil: success
		wgets    int
		content  []byte // file at path afterwards (nil: absent)
	}{
		{name: "download", url: imgURL, checksum: sha256Hex(img), algo: "sha256", wgets: 1, content: img},
		{name: "sha512", url: imgURL, checksum: strings.ToUpper(sha512Hex(img)), algo: "SHA512", wgets: 1, content: img},
		{name: "reuse present file", url: imgURL, checksum: sha256Hex(img), algo: "sha256", present: img, wgets: 0, content: img},
		{name: "stale file replaced", url: imgURL, checksum: sha256Hex(img), algo: "sha256", present: []byte("old"), wgets: 1, content: img},
		{name: "checksum mismatch removes the file", url: imgURL, checksum: strings.Repeat("a", 64), algo: "sha256", want: proxmox.ErrChecksumMismatch, wgets: 1},
		{name: "wget fails", url: imgURL, checksum: sha256Hex(img), algo: "sha256", wgetFail: true, want: proxmox.ErrShellCommand, wgets: 1},
		{name: "credentials in URL", url: "https://u:p@example.net/x.img", checksum: sha256Hex(img), algo: "sha256", want: proxmox.ErrInvalidImage},
		{name: "unknown algorithm", url: imgURL, checksum: sha256Hex(img), algo: "crc32", want: proxmox.ErrInvalidImage},
		{name: "checksum not hex", url: imgURL, checksum: "'; rm -rf / #", algo: "sha256", want: proxmox.ErrInvalidImage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			shell, addr, cfg := nodeShell(t)
			if tt.present != nil {
				writeNodeFile(t, shell.Root(), proxmox.FallbackImagePath(tt.url), tt.present)
			}
			if tt.wgetFail {
				shell.FailNext("wget", 1, 4, "wget: unable to resolve host address")
			}
			sh := dial(t, cfg, addr)
			got, err := proxmox.DownloadOverSSH(testCtx(t), sh, tt.url, tt.checksum, tt.algo)
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Fatalf("err = %v, want %v", err, tt.want)
				}
				if got != "" {
					t.Errorf("path %q returned with an error", got)
				}
			} else if err != nil || got != proxmox.FallbackImagePath(tt.url) {
				t.Fatalf("DownloadOverSSH = %q, %v; want %q", got, err, proxmox.FallbackImagePath(tt.url))
			}
			if errors.Is(tt.want, proxmox.ErrInvalidImage) {
				if cmds := shell.Commands(); len(cmds) != 0 {
					t.Fatalf("invalid input ran %v", cmds)
				}
				return
			}
			if n := wgets(shell.Commands()); n != tt.wgets {
				t.Errorf("wget ran %d times, want %d (%v)", n, tt.wgets, shell.Commands())
			}
			content, err := nodeFile(shell, proxmox.FallbackImagePath(tt.url))
			if tt.content == nil {
				if err == nil {
					t.Errorf("file left at %s", proxmox.FallbackImagePath(tt.url))
				}
			} else if !slices.Equal(content, tt.content) {
				t.Errorf("file content = %q (%v), want the image", content, err)
			}
			if _, err := nodeFile(shell, proxmox.FallbackImagePath(tt.url)+".part"); err == nil {
				t.Error("partial download left behind")
			}
		})
	}

	t.Run("PVE imports the downloaded file", func(t *testing.T) {
		t.Parallel()
		shell, addr, cfg := nodeShell(t)
		sim, c := imageSim(t)
		sim.SetNodeRoot("pve3", shell.Root())
		got, err := proxmox.DownloadOverSSH(testCtx(t), dial(t, cfg, addr), imgURL, sha256Hex(img), "sha256")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateVM(testCtx(t), "pve3", 700, map[string]string{"scsi0": "local-lvm:0,import-from=" + got}); err != nil {
			t.Fatalf("CreateVM from %s: %v", got, err)
		}
		if g, _ := sim.Guest(700); g.Config["scsi0"] != "local-lvm:vm-700-disk-0,size=4G" {
			t.Errorf("scsi0 = %q", g.Config["scsi0"])
		}
	})
}

// TestNodeAddress pins the node address lookup through GET /cluster/status.
func TestNodeAddress(t *testing.T) {
	t.Parallel()
	sim, c := imageSim(t)
	sim.SetNodeAddress("pve2", "127.0.0.1:2222")
	tests := []struct {
		node, want string
		err        error
	}{
		{node: "pve1", want: "10.0.0.11"},
		{node: "pve2", want: "127.0.0.1:2222"},
		{node: "pve9", err: proxmox.ErrNotFound},
	}
	for _, tt := range tests {
		got, err := c.NodeAddress(testCtx(t), tt.node)
		if got != tt.want || !errors.Is(err, tt.err) {
			t.Errorf("NodeAddress(%s) = %q, %v; want %q, %v", tt.node, got, err, tt.want, tt.err)
		}
	}
}
