// Package embedded starts the in-process infrastructure that `proxbus dev` and the tests use: a
// NATS server with JetStream and, where no real Redis is given, a Redis-protocol server.
//
// The embedded Redis (miniredis) keeps nothing across restarts and is not a production store;
// callers say so to the user whenever they fall back to it.
package embedded

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/nats-io/nats-server/v2/server"
)

// NATSOptions configures [StartNATS].
type NATSOptions struct {
	// Host defaults to 127.0.0.1.
	Host string
	// Port is the client port; 0 picks a free one, -1 too.
	Port int
	// MaxPayload overrides the server's 1 MB message limit when positive.
	MaxPayload int32
	// StoreDir holds JetStream's files; empty means a new temporary directory that the
	// returned server's Shutdown does not remove (the caller owns it).
	StoreDir string
	// SyncAlways makes JetStream fsync after every write (the server's `sync_interval:
	// always`) instead of every two minutes.
	SyncAlways bool
}

// StartNATS starts a JetStream-enabled NATS server and waits until it accepts clients.
// It returns an error, never a half-started server.
func StartNATS(opts NATSOptions) (*server.Server, error) {
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Port == 0 {
		opts.Port = -1
	}
	if opts.StoreDir == "" {
		dir, err := os.MkdirTemp("", "proxbus-nats-*")
		if err != nil {
			return nil, fmt.Errorf("embedded nats: store dir: %w", err)
		}
		opts.StoreDir = dir
	}
	srv, err := server.NewServer(&server.Options{
		Host:       opts.Host,
		Port:       opts.Port,
		JetStream:  true,
		StoreDir:   opts.StoreDir,
		NoLog:      true,
		NoSigs:     true,
		MaxPayload: opts.MaxPayload,
		SyncAlways: opts.SyncAlways,
	})
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	go srv.Start() // owned by srv: Shutdown stops it and WaitForShutdown waits for it.
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("embedded nats: not ready after 10s")
	}
	return srv, nil
}

// PortFree reports whether host:port can be listened on right now.
func PortFree(host string, port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort(host, fmt.Sprint(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// StartRedis starts an in-memory Redis-protocol server (with Lua scripting) on a free
// loopback port. It is not durable: everything is lost when it stops.
func StartRedis() (*miniredis.Miniredis, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("embedded redis: %w", err)
	}
	return m, nil
}
