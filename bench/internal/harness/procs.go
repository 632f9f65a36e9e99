package harness

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// BuildBinaries compiles proxbus (in the product's module) and nats-server (the version this
// module pins) into dir and returns their paths, for benchmarks that run them as processes.
func BuildBinaries(ctx context.Context, dir string) (proxbus, natsServer string, err error) {
	proxbus = filepath.Join(dir, "proxbus")
	natsServer = filepath.Join(dir, "nats-server")
	if err := BuildProxbus(ctx, proxbus); err != nil {
		return "", "", err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", natsServer, "github.com/nats-io/nats-server/v2")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return "", "", fmt.Errorf("go build nats-server: %w\n%s", err, buf.Bytes())
	}
	return proxbus, natsServer, nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// WaitPort waits until something accepts connections on 127.0.0.1:port, at most limit.
func WaitPort(ctx context.Context, port int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("port %d not listening after %s: %w", port, limit, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
