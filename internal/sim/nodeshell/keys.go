package nodeshell

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// ClientFiles creates a fresh ed25519 client key, authorizes it on s, and writes into dir
// the private key ("id_ed25519", OpenSSH format, mode 0600) and a known_hosts file naming
// host (the address [Server.Start] returned) with s's host key. It returns the endpoint
// SSH configuration for user pointing at both files.
func (s *Server) ClientFiles(dir, user, host string) (proxmox.SSHConfig, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return proxmox.SSHConfig{}, fmt.Errorf("nodeshell: client key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		return proxmox.SSHConfig{}, fmt.Errorf("nodeshell: client key: %w", err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return proxmox.SSHConfig{}, fmt.Errorf("nodeshell: client key: %w", err)
	}
	keyFile := filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		return proxmox.SSHConfig{}, fmt.Errorf("nodeshell: write key: %w", err)
	}
	knownHosts := filepath.Join(dir, "known_hosts")
	if err := WriteKnownHosts(knownHosts, host, s.HostKey()); err != nil {
		return proxmox.SSHConfig{}, err
	}
	s.Authorize(sshPub)
	return proxmox.SSHConfig{User: user, KeyFile: keyFile, KnownHostsFile: knownHosts}, nil
}

// WriteKnownHosts writes (replacing) an OpenSSH known_hosts file at path with one line
// binding host ("127.0.0.1:40022" or a name) to key.
func WriteKnownHosts(path, host string, key ssh.PublicKey) error {
	line := knownhosts.Line([]string{knownhosts.Normalize(host)}, key) + "\n"
	if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
		return fmt.Errorf("nodeshell: write known_hosts: %w", err)
	}
	return nil
}
