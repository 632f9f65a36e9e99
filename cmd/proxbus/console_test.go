package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDevConsole pins the web console of `proxbus dev`: its `ui:` line comes before ready;
// without token files it lets loopback in anonymously; with them it asks for a token, and
// the read token opens it.
func TestDevConsole(t *testing.T) {
	t.Parallel()
	get := func(t *testing.T, url, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	t.Run("anonymous on loopback", func(t *testing.T) {
		t.Parallel()
		lines := startDev(t, "--nats-port", "-1", "--http-addr", "127.0.0.1:0")
		ui := lineValue(lines, "ui: ")
		if !strings.HasPrefix(ui, "http://127.0.0.1:") || !strings.HasSuffix(ui, "/ui") {
			t.Fatalf("ui line %q", ui)
		}
		if i, j := indexOf(lines, "ui: "), indexOf(lines, "ready"); i < 0 || j < i {
			t.Errorf("the ui line is not before ready:\n%s", strings.Join(lines, "\n"))
		}
		if status, body := get(t, ui+"/commands", ""); status != http.StatusOK || !strings.Contains(body, "anonymous, loopback") {
			t.Errorf("GET %s/commands: status %d", ui, status)
		}
	})
	t.Run("with token files", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		readFile, opFile := filepath.Join(dir, "read"), filepath.Join(dir, "op")
		const readToken = "dev-read-token-0123456789"
		for path, tok := range map[string]string{readFile: readToken, opFile: "dev-operator-token-0123456789"} {
			if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		lines := startDev(t, "--nats-port", "-1", "--http-addr", "127.0.0.1:0", "--ui-token-file", readFile, "--ui-operator-token-file", opFile)
		ui := lineValue(lines, "ui: ")
		if status, _ := get(t, ui+"/commands", ""); status != http.StatusUnauthorized {
			t.Errorf("without a token: status %d, want 401", status)
		}
		if status, body := get(t, ui+"/commands", readToken); status != http.StatusOK || !strings.Contains(body, ">reader<") {
			t.Errorf("with the read token: status %d", status)
		}
	})
}

// TestConsoleTokenFlags: an unusable console token file is refused before anything starts,
// naming the flag, and never showing the token.
func TestConsoleTokenFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("tooshort"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"serve", "--ui-token-file", short},
		{"serve", "--ui-operator-token-file", filepath.Join(dir, "missing")},
		{"dev", "--ui-token-file", short},
	} {
		code, _, errOut := runCLI(t, args...)
		if code != 2 || !strings.Contains(errOut, args[1]) || strings.Contains(errOut, "tooshort") {
			t.Errorf("%v: code %d, stderr %s", args, code, errOut)
		}
	}
}

func indexOf(lines []string, prefix string) int {
	for i, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return i
		}
	}
	return -1
}

// TestDevListen: dev's default HTTP address, when taken, gives way to a free loopback port
// and says which was taken; an address given explicitly that is taken is an error.
func TestDevListen(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	ln, was, err := devListen(addr, false)
	if err != nil {
		t.Fatalf("default address taken: %v", err)
	}
	defer ln.Close()
	if was != addr || ln.Addr().String() == addr || !strings.HasPrefix(ln.Addr().String(), "127.0.0.1:") {
		t.Errorf("listens on %s, taken %q; want another loopback port and %q named", ln.Addr(), was, addr)
	}
	if ln, _, err := devListen(addr, true); err == nil {
		ln.Close()
		t.Error("an explicit --http-addr that is taken was not refused")
	} else if !strings.Contains(err.Error(), "--http-addr") {
		t.Errorf("the error does not name --http-addr: %v", err)
	}
}
