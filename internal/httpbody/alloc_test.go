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
	src := strings.NewReader(body)
	resp := &http.Response{Body: io.NopCloser(src), ContentLength: int64(len(body))}
	allocs := testing.AllocsPerRun(50, func() {
		src.Reset(body)
		got, err := Read(resp, 0)
		if err != nil || len(got) != len(body) {
			t.Fatalf("Read = %d bytes, %v", len(got), err)
		}
	})
	if allocs != 1 {
		t.Errorf("Read with a stated length: %.0f allocations per run, want 1 (the buffer)", allocs)
	}
}
