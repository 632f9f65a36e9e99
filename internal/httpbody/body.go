// Package httpbody reads HTTP answer bodies whole, in one allocation when the answer states
// its length.
package httpbody

import (
	"io"
	"net/http"
)

// maxPresize bounds the buffer sized up front from a stated Content-Length: a larger stated
// length is not trusted with an allocation before its bytes arrive.
const maxPresize = 4 << 20

// Read reads at most limit bytes of resp's body (all of it when limit is 0 or less) and
// returns them; it does not close the body. When the answer states a Content-Length within
// the limit and within 4 MiB, the buffer is sized for it up front instead of grown while
// reading. It returns what was read with the reader's error when reading fails.
func Read(resp *http.Response, limit int64) ([]byte, error) {
	var r io.Reader = resp.Body
	if limit > 0 {
		r = io.LimitReader(resp.Body, limit)
	}
	n := resp.ContentLength
	if n < 0 || n > maxPresize || (limit > 0 && n > limit) {
		return io.ReadAll(r)
	}
	// One byte more than stated, so the read that finds the end needs no growth; a body
	// longer than stated still reads whole (the transport reports such a mismatch itself).
	buf := make([]byte, 0, n+1)
	for {
		m, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // longer than stated: grow as append does
		}
	}
}
