//go:build !race

// The race detector changes what escapes to the heap, so allocation counts hold only without it.

package httpbody

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestReadStatedLengthAllocatesOnce(t *testing.T) {
	body := strings.Repeat("y", 3000)
	allocs := testing.AllocsPerRun(50, func() {
		resp := &http.Response{Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body))}
		if _, err := Read(resp, 0); err != nil {
			t.Fatal(err)
		}
	})
	// The buffer, plus the response and reader the closure itself builds.
	if allocs > 4 {
		t.Errorf("Read with a stated length: %.0f allocations per run, want at most 4", allocs)
	}
}
