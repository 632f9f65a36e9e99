package harness

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"strconv"
	"strings"
	"sync"
)

// RedisCounter is a TCP proxy in front of Redis that counts the commands its clients send, by
// name (EVALSHA, SET, …), parsing the RESP request stream. Point a client at Addr. It is for
// counting passes only: the extra hop is not free.
type RedisCounter struct {
	ln       net.Listener
	upstream string
	timeline *Timeline

	mu     sync.Mutex
	counts map[string]int
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// StartRedisCounter listens on a free loopback port and forwards to upstream (host:port).
// With a timeline it also marks each command's arrival ("redis EVALSHA").
func StartRedisCounter(upstream string, tl *Timeline) (*RedisCounter, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("redis counter: %w", err)
	}
	rc := &RedisCounter{ln: ln, upstream: upstream, timeline: tl, counts: map[string]int{}, conns: map[net.Conn]struct{}{}}
	rc.wg.Add(1)
	go rc.accept()
	return rc, nil
}

// Addr is the proxy's host:port.
func (rc *RedisCounter) Addr() string { return rc.ln.Addr().String() }

// Snapshot returns the command counts so far.
func (rc *RedisCounter) Snapshot() map[string]int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return maps.Clone(rc.counts)
}

// Reset forgets every count.
func (rc *RedisCounter) Reset() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	clear(rc.counts)
}

// Close stops the proxy and every connection through it, and waits for its goroutines.
func (rc *RedisCounter) Close() error {
	err := rc.ln.Close()
	rc.mu.Lock()
	for c := range rc.conns {
		_ = c.Close()
	}
	rc.mu.Unlock()
	rc.wg.Wait()
	return err
}

func (rc *RedisCounter) track(c net.Conn) {
	rc.mu.Lock()
	rc.conns[c] = struct{}{}
	rc.mu.Unlock()
}

func (rc *RedisCounter) accept() {
	defer rc.wg.Done()
	for {
		client, err := rc.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", rc.upstream)
		if err != nil {
			_ = client.Close()
			continue
		}
		rc.track(client)
		rc.track(server)
		rc.wg.Add(2)
		go func() {
			defer rc.wg.Done()
			_, _ = io.Copy(client, server)
			_ = client.Close()
		}()
		go func() {
			defer rc.wg.Done()
			_ = rc.forward(server, client)
			_ = server.Close()
		}()
	}
}

// forward copies client's RESP requests to server, counting each command.
func (rc *RedisCounter) forward(server io.Writer, client io.Reader) error {
	r := bufio.NewReader(client)
	w := bufio.NewWriter(server)
	for {
		name, err := readCommand(r, w)
		if err != nil {
			return err
		}
		rc.timeline.Mark("redis " + name)
		rc.mu.Lock()
		rc.counts[name]++
		rc.mu.Unlock()
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
}

var errRESP = errors.New("redis counter: unexpected RESP")

// readCommand copies one RESP array of bulk strings from r to w and returns its first
// element upper-cased.
func readCommand(r *bufio.Reader, w *bufio.Writer) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if _, err := w.WriteString(line); err != nil {
		return "", err
	}
	if !strings.HasPrefix(line, "*") {
		return "", errRESP
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return "", errRESP
	}
	name := ""
	for i := range n {
		hdr, err := r.ReadString('\n')
		if err != nil {
			return "", err
		}
		if _, err := w.WriteString(hdr); err != nil {
			return "", err
		}
		size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(hdr, "$")))
		if err != nil || !strings.HasPrefix(hdr, "$") {
			return "", errRESP
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		if _, err := w.Write(buf); err != nil {
			return "", err
		}
		if i == 0 {
			name = strings.ToUpper(string(buf[:size]))
		}
	}
	return name, nil
}
