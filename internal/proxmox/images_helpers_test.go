package proxmox_test

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// imageSim is a demo simulator whose tasks end at once, with a full-rights client.
func imageSim(t *testing.T) (*simpve.Server, *proxmox.Client) {
	t.Helper()
	return guestSim(t, -1)
}

// qcow2Image is a small file with a qcow2 header declaring a virtual size of virtual bytes.
func qcow2Image(virtual int64, tail string) []byte {
	b := make([]byte, 32, 32+len(tail))
	copy(b, "QFI\xfb")
	binary.BigEndian.PutUint32(b[4:], 3)
	binary.BigEndian.PutUint64(b[24:], uint64(virtual))
	return append(b, tail...)
}

func sha256Hex(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
func sha512Hex(b []byte) string { s := sha512.Sum512(b); return hex.EncodeToString(s[:]) }

// imageServer serves files (path → content) on loopback and counts the requests per path.
type imageServer struct {
	URL  string
	mu   sync.Mutex
	hits map[string]int
}

// serveImages starts an image server for the test.
func serveImages(t *testing.T, files map[string][]byte) *imageServer {
	t.Helper()
	is := &imageServer{hits: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		is.mu.Lock()
		is.hits[r.URL.Path]++
		is.mu.Unlock()
		b, found := files[r.URL.Path]
		if !found {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, r.URL.Path, time.Time{}, bytes.NewReader(b))
	}))
	t.Cleanup(srv.Close)
	is.URL = srv.URL
	return is
}

// Hits returns how often path was requested.
func (is *imageServer) Hits(path string) int {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.hits[path]
}

// writeNodeFile writes content at node path p under root.
func writeNodeFile(t *testing.T, root, p string, content []byte) {
	t.Helper()
	lp := filepath.Join(root, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(lp), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lp, content, 0o644); err != nil {
		t.Fatal(err)
	}
}
