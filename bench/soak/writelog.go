package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// writeRec is one write request the PVE simulator answered, as the soak's middleware saw it:
// the resource parameters it needs to attribute the write, the status and the task's UPID.
type writeRec struct {
	Method, Path string
	Params       map[string]string // storage, newid, vmid, snapname, disk, target only (never a secret)
	Status       int
	UPID         string
	Lost         bool // the answer was dropped after the write was applied
	At           time.Time
}

// writeLog records the PVE writes; safe for concurrent use.
type writeLog struct {
	mu   sync.Mutex
	recs []writeRec
}

func (l *writeLog) add(r writeRec) {
	l.mu.Lock()
	l.recs = append(l.recs, r)
	l.mu.Unlock()
}

func (l *writeLog) all() []writeRec {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]writeRec(nil), l.recs...)
}

// resourceParams are the parameters that name what a write acts on (vzdump names its guest
// by vmid, a migrate its node by target).
var resourceParams = []string{"storage", "newid", "vmid", "snapname", "disk", "target"}

// readResourceParams reads the request's resource parameters and puts the body back.
func readResourceParams(r *http.Request) map[string]string {
	out := map[string]string{}
	vals := r.URL.Query()
	if r.Body != nil {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		_ = r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
		ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if ct == "application/json" {
			var obj map[string]any
			if json.Unmarshal(body, &obj) == nil {
				for _, k := range resourceParams {
					if v, ok := obj[k]; ok {
						vals.Set(k, strings.TrimSuffix(strings.TrimSuffix(jsonString(v), "\n"), " "))
					}
				}
			}
		} else if form, err := url.ParseQuery(string(body)); err == nil {
			for _, k := range resourceParams {
				if v := form.Get(k); v != "" {
					vals.Set(k, v)
				}
			}
		}
	}
	for _, k := range resourceParams {
		if v := vals.Get(k); v != "" {
			out[k] = v
		}
	}
	return out
}

func jsonString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

// capture is a ResponseWriter that keeps the status and body it passes on; a hijacked
// connection (the simulator's error answers) is passed through untouched.
type capture struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (c *capture) WriteHeader(s int) {
	c.status = s
	c.ResponseWriter.WriteHeader(s)
}

func (c *capture) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	c.body.Write(b)
	return c.ResponseWriter.Write(b)
}

func (c *capture) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if c.status == 0 {
		c.status = -1 // an error answer written raw: not a 200
	}
	return c.ResponseWriter.(http.Hijacker).Hijack()
}

// upidOf returns the UPID of a {"data":"UPID:…"} answer.
func upidOf(body []byte) string {
	var env struct {
		Data any `json:"data"`
	}
	if json.Unmarshal(body, &env) != nil {
		return ""
	}
	if s, ok := env.Data.(string); ok && strings.HasPrefix(s, "UPID:") {
		return s
	}
	return ""
}
