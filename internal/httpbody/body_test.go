package httpbody

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("x", 1000)
	tests := []struct {
		name          string
		contentLength int64
		limit         int64
		want          string
	}{
		{"length stated", 1000, 0, body},
		{"length unknown", -1, 0, body},
		{"length understated", 10, 0, body},
		{"length overstated", 5000, 0, body},
		{"limit below stated length", 1000, 100, body[:100]},
		{"limit below unknown length", -1, 100, body[:100]},
		{"limit above length", 1000, 4096, body},
		{"empty", 0, 0, ""},
		{"stated length not trusted with an allocation", 1 << 40, 0, body},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp := &http.Response{Body: io.NopCloser(strings.NewReader(body)), ContentLength: tt.contentLength}
			if tt.name == "empty" {
				resp.Body = http.NoBody
			}
			got, err := Read(resp, tt.limit)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("Read = %d bytes, want %d", len(got), len(tt.want))
			}
		})
	}
}

func TestReadError(t *testing.T) {
	t.Parallel()
	boom := errors.New("connection reset")
	for _, cl := range []int64{-1, 10} {
		resp := &http.Response{Body: io.NopCloser(io.MultiReader(strings.NewReader("part"), errReader{boom})), ContentLength: cl}
		got, err := Read(resp, 0)
		if !errors.Is(err, boom) {
			t.Errorf("ContentLength %d: err = %v, want %v", cl, err, boom)
		}
		if string(got) != "part" {
			t.Errorf("ContentLength %d: got %q, want what was read before the error", cl, got)
		}
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
