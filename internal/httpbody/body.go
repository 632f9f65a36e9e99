// Package httpbody reads HTTP answer bodies whole, in one allocation when the answer states
// its length.
package httpbody

import (
	"bytes"
	"io"
	"net/http"
)

// Read reads at most limit bytes of resp's body (all of it when limit is 0 or less) and
// returns them; it does not close the body. When the answer states a Content-Length within
// the limit, the buffer is sized for it up front instead of grown while reading. It returns
// what was read with the reader's error when reading fails.
func Read(resp *http.Response, limit int64) ([]byte, error) {
	var r io.Reader = resp.Body
	if limit > 0 {
		r = io.LimitReader(resp.Body, limit)
	}
	n := resp.ContentLength
	if n < 0 || (limit > 0 && n > limit) {
		return io.ReadAll(r)
	}
	// One byte more than stated, so reading to EOF needs no growth; a body longer than
	// stated still reads whole (the transport reports such a mismatch itself).
	buf := bytes.NewBuffer(make([]byte, 0, n+1))
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}
