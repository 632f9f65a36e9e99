package nodeshell

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// Options configure a [Server].
type Options struct {
	// Logger receives one debug line per command; nil discards.
	Logger *slog.Logger
	// HTTPClient fetches wget's URLs; nil means a client with a 5-minute timeout.
	HTTPClient *http.Client
}

// Server is a simulated node shell over SSH. Create it with [New], then [Server.Start].
// All methods are safe for concurrent use.
type Server struct {
	root    string
	log     *slog.Logger
	http    *http.Client
	hostKey ssh.Signer
	config  *ssh.ServerConfig

	mu         sync.Mutex // guards the fields below
	authorized [][]byte   // wire form of the accepted client keys
	commands   []string
	faults     []*fault
	ln         net.Listener
	conns      map[net.Conn]struct{}
	closed     bool
	ctx        context.Context    // ends when the server closes: aborts running commands
	cancel     context.CancelFunc // ends ctx
	wg         sync.WaitGroup     // every goroutine the server started
}

// fault makes the next n commands named name fail.
type fault struct {
	name   string
	n      int
	exit   int
	stderr string
}

// New builds a server whose node filesystem is the directory root (created if missing),
// with a fresh ed25519 host key. It does not listen yet.
func New(root string, opts Options) (*Server, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("nodeshell: root: %w", err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("nodeshell: root: %w", err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("nodeshell: host key: %w", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, fmt.Errorf("nodeshell: host key: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Minute}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{root: abs, log: log, http: hc, hostKey: signer, conns: map[net.Conn]struct{}{}, ctx: ctx, cancel: cancel}
	s.config = &ssh.ServerConfig{PublicKeyCallback: s.checkKey}
	s.config.AddHostKey(signer)
	return s, nil
}

// Root returns the absolute directory standing for the node's "/".
func (s *Server) Root() string { return s.root }

// HostKey returns the server's public host key.
func (s *Server) HostKey() ssh.PublicKey { return s.hostKey.PublicKey() }

// Authorize accepts key for every user.
func (s *Server) Authorize(key ssh.PublicKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.authorized = append(s.authorized, key.Marshal())
}

// checkKey is the public key authentication.
func (s *Server) checkKey(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	wire := key.Marshal()
	for _, k := range s.authorized {
		if bytes.Equal(k, wire) {
			return &ssh.Permissions{}, nil
		}
	}
	return nil, fmt.Errorf("nodeshell: key of %s not authorized", meta.User())
}

// Commands returns every command line run so far, oldest first.
func (s *Server) Commands() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.commands...)
}

// FailNext makes the next n commands named name ("wget", "sha256sum", …) exit with exit
// and print stderr, without doing anything.
func (s *Server) FailNext(name string, n, exit int, stderr string) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &fault{name: name, n: n, exit: exit, stderr: stderr})
}

// takeFault consumes a fault for name; s.mu is held.
func (s *Server) takeFault(name string) (*fault, bool) {
	for i, f := range s.faults {
		if f.name != name {
			continue
		}
		f.n--
		if f.n == 0 {
			s.faults = append(s.faults[:i], s.faults[i+1:]...)
		}
		return f, true
	}
	return nil, false
}

// Start listens on addr ("127.0.0.1:0" picks a free port) and returns the bound address
// ("127.0.0.1:40022"), the host to give proxmox.DialNodeShell.
func (s *Server) Start(addr string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", errors.New("nodeshell: server closed")
	}
	if s.ln != nil {
		return "", errors.New("nodeshell: already started")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("nodeshell: listen: %w", err)
	}
	s.ln = ln
	s.wg.Add(1)
	go s.accept(ln)
	return ln.Addr().String(), nil
}

// accept serves connections until the listener closes.
func (s *Server) accept(ln net.Listener) {
	defer s.wg.Done()
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = conn.Close()
			return
		}
		s.conns[conn] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(conn)
	}
}

// Close stops listening, closes every connection, aborts running commands and waits for
// all of the server's goroutines. It is idempotent and returns nil.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.cancel()
	if s.ln != nil {
		_ = s.ln.Close()
	}
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// serveConn runs one SSH connection: session channels with exec requests only.
func (s *Server) serveConn(conn net.Conn) {
	defer s.wg.Done()
	defer func() {
		_ = conn.Close()
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
	}()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	sc, chans, reqs, err := ssh.NewServerConn(conn, s.config)
	if err != nil {
		s.log.Debug("nodeshell: handshake failed", "err", err)
		return
	}
	_ = conn.SetDeadline(time.Time{})
	defer sc.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		ssh.DiscardRequests(reqs)
	}()
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serveSession(ch, chReqs)
		}()
	}
}

// exitStatus is the payload of an "exit-status" request.
type exitStatus struct{ Status uint32 }

// execRequest is the payload of an "exec" request.
type execRequest struct{ Command string }

// serveSession answers the session's requests; the first exec runs and ends it.
func (s *Server) serveSession(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for req := range reqs {
		if req.Type != "exec" {
			if req.WantReply {
				_ = req.Reply(false, nil)
			}
			continue
		}
		var er execRequest
		if err := ssh.Unmarshal(req.Payload, &er); err != nil {
			_ = req.Reply(false, nil)
			continue
		}
		_ = req.Reply(true, nil)
		code := s.run(er.Command, ch, ch.Stderr())
		_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(exitStatus{Status: uint32(code)}))
		return
	}
}
