package proxmox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// NodeShell runs commands on a cluster node (the SSH fallback of image downloads). Run
// returns the command's standard output; a command that exits non-zero returns an error
// matching [ErrShellCommand] (its text carries the exit status and the first line of
// standard error). Commands never include secrets.
type NodeShell interface {
	Run(ctx context.Context, cmd string) (stdout string, err error)
}

// SSH errors.
var (
	// ErrHostKeyRefused: the node's host key is not in the known_hosts file, or differs from
	// the one recorded there. Never a reason to fall back to anything: it is a refusal.
	ErrHostKeyRefused = errors.New("proxmox: ssh host key refused")
	// ErrShellCommand: a command ran and exited with a non-zero status (or a signal).
	ErrShellCommand = errors.New("proxmox: node command failed")
)

// sshDialTimeout bounds the TCP connect and SSH handshake when ctx has no earlier deadline.
const sshDialTimeout = 15 * time.Second

// SSHShell is the [NodeShell] of one node over SSH. Every Run opens its own connection
// (verifying the host key again), so an SSHShell holds no open connection and needs no
// closing. It is safe for concurrent use.
type SSHShell struct {
	host string
	cfg  *ssh.ClientConfig
}

// DialNodeShell prepares a shell on host ("pve1.example.net:22"; a host without a port gets
// ":22") as cfg.User with the private key in cfg.KeyFile (unencrypted OpenSSH or PEM), and
// verifies the node's host key against cfg.KnownHostsFile (OpenSSH known_hosts format,
// golang.org/x/crypto/ssh/knownhosts) with one handshake, closed at once. Errors: an
// incomplete cfg, an unreadable key or known_hosts file, the dial error, and
// [ErrHostKeyRefused] for an unknown or changed host key (never a fallback). The key's
// content never appears in an error.
func DialNodeShell(ctx context.Context, cfg SSHConfig, host string) (NodeShell, error) {
	if cfg.User == "" || cfg.KeyFile == "" || cfg.KnownHostsFile == "" {
		return nil, errors.New("proxmox: ssh: user, key_file and known_hosts_file are required")
	}
	if _, _, err := net.SplitHostPort(host); err != nil {
		host = net.JoinHostPort(strings.Trim(host, "[]"), "22")
	}
	pem, err := os.ReadFile(cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("proxmox: ssh: read key file: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		return nil, fmt.Errorf("proxmox: ssh: key file %s: cannot parse the private key", cfg.KeyFile)
	}
	hostKeys, err := knownhosts.New(cfg.KnownHostsFile)
	if err != nil {
		return nil, fmt.Errorf("proxmox: ssh: known_hosts file: %w", err)
	}
	sh := &SSHShell{host: host, cfg: &ssh.ClientConfig{
		User:            cfg.User,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: hostKeys,
		Timeout:         sshDialTimeout,
	}}
	client, err := sh.connect(ctx)
	if err != nil {
		return nil, err
	}
	_ = client.Close()
	return sh, nil
}

// connect dials and handshakes; the connection is closed when ctx ends first.
func (s *SSHShell) connect(ctx context.Context) (*ssh.Client, error) {
	d := net.Dialer{Timeout: sshDialTimeout}
	conn, err := d.DialContext(ctx, "tcp", s.host)
	if err != nil {
		return nil, fmt.Errorf("proxmox: ssh %s: %w", s.host, err)
	}
	deadline := time.Now().Add(sshDialTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	c, chans, reqs, err := ssh.NewClientConn(conn, s.host, s.cfg)
	stop()
	if err != nil {
		_ = conn.Close()
		var ke *knownhosts.KeyError
		if errors.As(err, &ke) {
			return nil, fmt.Errorf("%w: %s: %w", ErrHostKeyRefused, s.host, ke)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("proxmox: ssh %s: %w", s.host, ctx.Err())
		}
		return nil, fmt.Errorf("proxmox: ssh %s: %w", s.host, err)
	}
	_ = conn.SetDeadline(time.Time{})
	return ssh.NewClient(c, chans, reqs), nil
}

// Run runs cmd in a new session of a new connection and returns its standard output. ctx
// ends the command (the connection is closed). A non-zero exit → an error matching
// [ErrShellCommand] with the exit status and the first line of standard error.
func (s *SSHShell) Run(ctx context.Context, cmd string) (string, error) {
	client, err := s.connect(ctx)
	if err != nil {
		return "", err
	}
	defer client.Close()
	stop := context.AfterFunc(ctx, func() { _ = client.Close() })
	defer stop()
	sess, err := client.NewSession()
	if err != nil {
		return "", fmt.Errorf("proxmox: ssh %s: session: %w", s.host, err)
	}
	defer sess.Close()
	var stdout, stderr bytes.Buffer
	sess.Stdout, sess.Stderr = &stdout, &stderr
	err = sess.Run(cmd)
	if ctx.Err() != nil {
		return stdout.String(), fmt.Errorf("proxmox: ssh %s: %s: %w", s.host, commandName(cmd), ctx.Err())
	}
	var ee *ssh.ExitError
	if errors.As(err, &ee) {
		return stdout.String(), fmt.Errorf("%w: %s on %s: exit status %d: %s", ErrShellCommand, commandName(cmd), s.host, ee.ExitStatus(), firstLineOf(stderr.String()))
	}
	if err != nil {
		return stdout.String(), fmt.Errorf("proxmox: ssh %s: %s: %w", s.host, commandName(cmd), err)
	}
	return stdout.String(), nil
}

// commandName is the first word of cmd, for errors (arguments may be long URLs).
func commandName(cmd string) string {
	name, _, _ := strings.Cut(strings.TrimSpace(cmd), " ")
	return name
}

// firstLineOf is s's first non-empty line, trimmed.
func firstLineOf(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}
