package simpve

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// answer is a response as PVE would send it, built by a handler before it is written (so
// faults can replace or drop it).
type answer struct {
	status int
	reason string // status line reason phrase; PVE puts the first line of the message here
	body   []byte // nil: no body (PVE's 401)
}

// contentType is pveproxy's JSON content type.
const contentType = "application/json;charset=UTF-8"

// ok wraps data in the {"data": …} envelope.
func ok(data any) answer {
	body, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		return fail(http.StatusInternalServerError, "sim: cannot encode answer: "+err.Error())
	}
	return answer{status: http.StatusOK, reason: "OK", body: body}
}

// fail is a PVE error: the message (first line) as reason phrase and, as the JSON
// formatter does, {"data":null,"message":"…\n"} as body.
func fail(status int, message string) answer {
	msg := strings.TrimRight(message, "\n") + "\n"
	body, _ := json.Marshal(map[string]any{"data": nil, "message": msg})
	return answer{status: status, reason: firstLine(message), body: body}
}

// paramFail is PVE's 400 "Parameter verification failed." with per-parameter errors.
func paramFail(errs map[string]string) answer {
	out := make(map[string]string, len(errs))
	for k, v := range errs {
		out[k] = strings.TrimRight(v, "\n") + "\n"
	}
	msg := "Parameter verification failed.\n"
	body, _ := json.Marshal(map[string]any{"data": nil, "errors": out, "message": msg})
	return answer{status: http.StatusBadRequest, reason: "Parameter verification failed.", body: body}
}

// unauthorized is pveproxy's 401: the reason in the status line, no body.
func unauthorized(reason string) answer {
	return answer{status: http.StatusUnauthorized, reason: reason}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// write sends a. When the reason phrase differs from Go's standard text (which
// http.ResponseWriter always uses) and the connection can be hijacked (HTTP/1.x), the
// response is written raw so the client sees PVE's status line; the connection is then
// closed. Otherwise the standard status line is used; the JSON message carries the text.
func (a answer) write(w http.ResponseWriter) {
	if a.reason != "" && a.reason != http.StatusText(a.status) {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, buf, err := hj.Hijack(); err == nil {
				defer conn.Close()
				a.writeRaw(buf.Writer)
				return
			}
		}
	}
	if a.body != nil {
		w.Header().Set("Content-Type", contentType)
	}
	w.Header().Set("Cache-Control", "max-age=0")
	w.Header().Set("Pragma", "no-cache")
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

// writeRaw writes an HTTP/1.1 response with a's own reason phrase and Connection: close.
func (a answer) writeRaw(bw *bufio.Writer) {
	reason := strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, a.reason)
	fmt.Fprintf(bw, "HTTP/1.1 %03d %s\r\n", a.status, reason)
	if a.body != nil {
		fmt.Fprintf(bw, "Content-Type: %s\r\n", contentType)
	}
	fmt.Fprintf(bw, "Cache-Control: max-age=0\r\nPragma: no-cache\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", len(a.body))
	_, _ = bw.Write(a.body)
	_ = bw.Flush()
}
