package simpve

import (
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"io"
	"maps"
	"slices"
	"time"
)

// imageState is the simulator's state of vm.provision's image side, embedded in [Server]
// and guarded by Server.mu: files in the import content of storages, the nodes' local
// filesystems (for import-from an absolute path, written by the SSH fallback), node
// addresses, and injected download failures. Its zero value is ready to use.
type imageState struct {
	imgVolumes map[string]map[string]imgVolume // imgVolKey(storage, node) → file name → volume
	imgRoots   map[string]string               // node → host directory standing for its "/"
	imgAddrs   map[string]string               // node → address in /cluster/status
	imgFaults  map[string][]string             // "node/storage" → exit statuses of its next downloads
}

// imgVolume is one file in an import content.
type imgVolume struct {
	size    int64             // bytes (for a qcow2: the virtual size of its header)
	ctime   int64             // creation time, seconds
	digests map[string]string // checksum algorithm → hex digest of the file
}

// imgAlgorithms are download-url's checksum algorithms and their hashes.
var imgAlgorithms = map[string]func() hash.Hash{
	"md5": md5.New, "sha1": sha1.New, "sha224": sha256.New224, "sha256": sha256.New,
	"sha384": sha512.New384, "sha512": sha512.New,
}

// imgDigest reads r to its end and returns its size, every algorithm's digest and, for a
// qcow2 image, its virtual size (0 otherwise).
func imgDigest(r io.Reader) (size int64, digests map[string]string, virtual int64, err error) {
	hs := map[string]hash.Hash{}
	ws := []io.Writer{}
	for name, fn := range imgAlgorithms {
		h := fn()
		hs[name] = h
		ws = append(ws, h)
	}
	head := &imgHead{}
	ws = append(ws, head)
	size, err = io.Copy(io.MultiWriter(ws...), r)
	if err != nil {
		return 0, nil, 0, err
	}
	digests = make(map[string]string, len(hs))
	for name, h := range hs {
		digests[name] = hex.EncodeToString(h.Sum(nil))
	}
	return size, digests, head.qcow2Size(), nil
}

// imgHead keeps the first 32 bytes written to it.
type imgHead struct{ b []byte }

func (h *imgHead) Write(p []byte) (int, error) {
	if n := 32 - len(h.b); n > 0 {
		h.b = append(h.b, p[:min(n, len(p))]...)
	}
	return len(p), nil
}

// qcow2Size is the virtual size in a qcow2 header ("QFI\xfb", size at offset 24), else 0.
func (h *imgHead) qcow2Size() int64 {
	if len(h.b) < 32 || !bytes.Equal(h.b[:4], []byte("QFI\xfb")) {
		return 0
	}
	return int64(binary.BigEndian.Uint64(h.b[24:32]))
}

// imgVolKey keys import volumes: shared storages hold one set for the cluster, local ones
// one per node.
func (s *Server) imgVolKey(storage, node string) string {
	if m, ok := s.state.storages[storage]; ok && storageShared(m) {
		node = ""
	}
	return storage + "\x00" + node
}

// imgPut stores an import volume; Server.mu is held.
func (s *Server) imgPut(storage, node, file string, v imgVolume) {
	if s.imgVolumes == nil {
		s.imgVolumes = map[string]map[string]imgVolume{}
	}
	key := s.imgVolKey(storage, node)
	if s.imgVolumes[key] == nil {
		s.imgVolumes[key] = map[string]imgVolume{}
	}
	s.imgVolumes[key][file] = v
}

// imgGet returns an import volume as node sees it; Server.mu is held.
func (s *Server) imgGet(storage, node, file string) (imgVolume, bool) {
	v, ok := s.imgVolumes[s.imgVolKey(storage, node)][file]
	return v, ok
}

// AddImportVolume puts a file with content into storage's import content as node sees it
// (for a shared storage: on every node), as if it had been downloaded before; no request
// is logged and nothing is checked. A qcow2 header's virtual size becomes the disk size of
// VMs importing it.
func (s *Server) AddImportVolume(storage, node, file string, content []byte) {
	size, digests, virtual, _ := imgDigest(bytes.NewReader(content))
	if virtual > 0 {
		size = virtual
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.imgPut(storage, node, file, imgVolume{size: size, ctime: time.Now().Unix(), digests: digests})
}

// ImportVolumes returns the file names in storage's import content as node sees it, sorted.
func (s *Server) ImportVolumes(storage, node string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(time.Now())
	return slices.Sorted(maps.Keys(s.imgVolumes[s.imgVolKey(storage, node)]))
}

// SetNodeRoot makes dir the node's local filesystem: import-from with an absolute path
// ("/var/lib/vz/template/proxbus-images/x.qcow2") on that node reads dir + path. Point the
// node's SSH simulator (sim/nodeshell) at the same directory. Without a root, no absolute
// path exists on the node.
func (s *Server) SetNodeRoot(node, dir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.imgRoots == nil {
		s.imgRoots = map[string]string{}
	}
	s.imgRoots[node] = dir
}

// SetNodeAddress sets the "ip" GET /cluster/status reports for node (default 10.0.0.11 for
// pve1, 10.0.0.12 for pve2, …). Tests may give "127.0.0.1:PORT" so that a client dials the
// node's SSH simulator.
func (s *Server) SetNodeAddress(node, addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.imgAddrs == nil {
		s.imgAddrs = map[string]string{}
	}
	s.imgAddrs[node] = addr
}

// FailDownload makes the next download-url task on node into storage end with exitStatus
// instead of downloading (calls queue up, one per download).
func (s *Server) FailDownload(node, storage, exitStatus string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.imgFaults == nil {
		s.imgFaults = map[string][]string{}
	}
	key := node + "/" + storage
	s.imgFaults[key] = append(s.imgFaults[key], exitStatus)
}

// imgTakeFault consumes a download fault; Server.mu is held.
func (s *Server) imgTakeFault(node, storage string) string {
	key := node + "/" + storage
	q := s.imgFaults[key]
	if len(q) == 0 {
		return ""
	}
	if len(q) == 1 {
		delete(s.imgFaults, key)
	} else {
		s.imgFaults[key] = q[1:]
	}
	return q[0]
}
