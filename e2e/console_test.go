package e2e_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/console"
)

// consoleReadToken is the read token of the consoles the e2e tests start.
const consoleReadToken = "e2e-console-read-token-5b1d"

// withConsole serves the replica's HTTP server, and with it the web console, on a free
// loopback port; *base is set to the console's URL.
func withConsole(t *testing.T, base *string) tune {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	*base = "http://" + ln.Addr().String() + console.Path
	return func(c *app.Config) {
		c.HTTPListener = ln
		c.Console = app.Console{Access: console.Access{ReadToken: consoleReadToken}}
	}
}

// consoleDo sends GET path to the console at base as the reader (with ctx).
func consoleDo(ctx context.Context, t *testing.T, base, path string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+consoleReadToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp
}

// consoleGet reads path of the console at base as the reader: its status and body.
func consoleGet(t *testing.T, base, path string) (int, string) {
	t.Helper()
	resp := consoleDo(context.Background(), t, base, path)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// consoleStream reads the live stream at path for up to d, or until its "done" event.
func consoleStream(t *testing.T, base, path string, d time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	resp := consoleDo(ctx, t, base, path)
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		b.WriteString(sc.Text())
		b.WriteByte('\n')
		if sc.Text() == "event: done" {
			break
		}
	}
	return b.String()
}

// consoleScan is everything the console shows of what the test did: every page, each
// command's page and its live stream, the commands list's live stream, and each dead letter.
// It waits until the list shows every command of ids.
func consoleScan(t *testing.T, base string, ids []string, deadLetters []string) string {
	t.Helper()
	eventually(t, 10*time.Second, "the console lists every command", func() bool {
		_, body := consoleGet(t, base, "/commands")
		for _, id := range ids {
			if !strings.Contains(body, `id="c-`+id+`"`) {
				return false
			}
		}
		return true
	})
	var all strings.Builder
	for _, p := range []string{"/commands", "/commands?limit=10000", "/deadletters", "/repairs", "/approvals", "/replicas"} {
		status, body := consoleGet(t, base, p)
		if status != http.StatusOK {
			t.Errorf("console %s: status %d", p, status)
		}
		all.WriteString(body)
	}
	for _, id := range ids {
		_, body := consoleGet(t, base, "/commands/"+id)
		all.WriteString(body)
		all.WriteString(consoleStream(t, base, "/live/commands/"+id, 5*time.Second))
	}
	for _, seq := range deadLetters {
		_, body := consoleGet(t, base, "/deadletters/"+seq)
		all.WriteString(body)
	}
	all.WriteString(consoleStream(t, base, "/live/commands", time.Second))
	return all.String()
}
