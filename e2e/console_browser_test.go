//go:build unix

package e2e_test

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/testenv"
)

// Where TestConsoleInBrowser finds its tools and puts its screenshots.
const (
	// browserEnv set to "required" (CI sets it) fails the test when a tool is missing,
	// instead of skipping it.
	browserEnv = "PROXBUS_TEST_BROWSER"
	// chromiumEnv names the browser; default defaultChromium, Debian's package.
	chromiumEnv     = "PROXBUS_CHROMIUM"
	defaultChromium = "/usr/bin/chromium"
	// screenshotsEnv set to "docs" writes the screenshots into docs/console, for
	// docs/console.md; otherwise they go to a temporary directory.
	screenshotsEnv = "PROXBUS_SCREENSHOTS"
	// browserDir holds the Playwright script and its node_modules, relative to e2e/.
	browserDir    = "browser"
	browserScript = "console.test.mjs"
)

// TestConsoleInBrowser drives the web console with a real browser: Playwright (npm package
// playwright-core, in e2e/browser) and Debian's Chromium against a `proxbus dev` process
// started with a read and an operator token. The script (e2e/browser/console.test.mjs)
// checks that a wrong token is refused with nothing shown; that the reader's commands list
// shows a command published after the page loaded, over the live stream, within a second;
// that a provision's timeline has its steps in order with relocate_disk and its result; that
// the reader can neither see nor use the replay of a dead letter while the operator replays
// it through the confirm page; that the list shows targets and whole reasons and the journal
// link opens NetBox's page; that the operator rejects, approves and cancels commands awaiting
// approval through their confirm pages while the reader gets no button and 403; and that no
// page logs a console error. It takes the console's
// screenshots on the way (PROXBUS_SCREENSHOTS=docs puts them in docs/console).
//
// It skips when node, Chromium or e2e/browser/node_modules is missing (`npm ci` in
// e2e/browser), unless PROXBUS_TEST_BROWSER=required. It is not parallel: the live list's
// one-second bound is measured while the package's parallel tests wait.
func TestConsoleInBrowser(t *testing.T) {
	node, chromium := browserTools(t)
	shots := browserScreenshotDir(t)
	dir := t.TempDir()
	bin := buildBrowserProxbus(t, dir)
	readFile, operatorFile := filepath.Join(dir, "ui-read-token"), filepath.Join(dir, "ui-operator-token")
	writeBrowserToken(t, readFile, "read")
	writeBrowserToken(t, operatorFile, "operator")
	natsURL, uiURL := startBrowserDev(t, bin, dir, "--ui-token-file", readFile, "--ui-operator-token-file", operatorFile)
	poisonID := "poison-" + browserRandom(t)
	seq := publishBrowserPoison(t, natsURL, poisonID)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, browserScript)
	cmd.Dir = browserDir
	cmd.Env = append(os.Environ(),
		"PROXBUS_UI_URL="+uiURL,
		"PROXBUS_UI_TOKEN_FILE="+readFile,
		"PROXBUS_UI_OPERATOR_TOKEN_FILE="+operatorFile,
		"PROXBUS_NATS_URL="+natsURL,
		"PROXBUS_BIN="+bin,
		"PROXBUS_DLQ_SEQ="+strconv.FormatUint(seq, 10),
		"PROXBUS_DLQ_COMMAND_ID="+poisonID,
		"PROXBUS_DLQ_CANARY="+canary,
		"PROXBUS_SCREENSHOT_DIR="+shots,
		chromiumEnv+"="+chromium,
		"TMPDIR="+dir, // Chromium's profile
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// On timeout: SIGTERM, on which Playwright closes Chromium (a process group of its own),
	// then, 5 s later, SIGKILL.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node %s/%s: %v\n%s", browserDir, browserScript, err, out)
	}
	t.Logf("node %s/%s:\n%s", browserDir, browserScript, out)
	t.Logf("screenshots: %s", shots)
}

// browserTools returns node and the browser, or skips the test (fails it when
// PROXBUS_TEST_BROWSER=required) naming what is missing.
func browserTools(t *testing.T) (node, chromium string) {
	t.Helper()
	var missing []string
	node, err := exec.LookPath("node")
	if err != nil {
		missing = append(missing, "node is not on PATH (Debian: apt-get install nodejs npm)")
	}
	chromium = cmp.Or(os.Getenv(chromiumEnv), defaultChromium)
	if st, err := os.Stat(chromium); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		missing = append(missing, fmt.Sprintf("no browser at %s ($%s; Debian: apt-get install chromium)", chromium, chromiumEnv))
	}
	if _, err := os.Stat(filepath.Join(browserDir, "node_modules", "playwright-core", "package.json")); err != nil {
		missing = append(missing, "no e2e/browser/node_modules/playwright-core (run: cd e2e/browser && npm ci --ignore-scripts)")
	}
	if len(missing) == 0 {
		return node, chromium
	}
	why := strings.Join(missing, "; ")
	if os.Getenv(browserEnv) == "required" {
		t.Fatalf("%s=required, but the browser test cannot run: %s", browserEnv, why)
	}
	t.Skipf("the browser test cannot run (%s=required makes this a failure): %s", browserEnv, why)
	return "", ""
}

// browserScreenshotDir is where the screenshots go: docs/console with
// PROXBUS_SCREENSHOTS=docs, else a temporary directory.
func browserScreenshotDir(t *testing.T) string {
	t.Helper()
	switch v := os.Getenv(screenshotsEnv); v {
	case "":
		return filepath.Join(t.TempDir(), "screenshots")
	case "docs":
		dir, err := filepath.Abs(filepath.Join("..", "docs", "console"))
		if err != nil {
			t.Fatal(err)
		}
		return dir
	default:
		t.Fatalf("%s=%q: the one value it takes is docs (write docs/console/*.png)", screenshotsEnv, v)
		return ""
	}
}

// buildBrowserProxbus builds cmd/proxbus into dir.
func buildBrowserProxbus(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "proxbus")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/proxbus")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/proxbus: %v\n%s", err, out)
	}
	return bin
}

// writeBrowserToken writes a new random console token into path (mode 0600).
func writeBrowserToken(t *testing.T, path, role string) {
	t.Helper()
	tok := "e2e-browser-" + role + "-" + browserRandom(t) + browserRandom(t)
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func browserRandom(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// startBrowserDev starts `proxbus dev` with the flags given, in a process group of its own
// that t.Cleanup ends (SIGTERM, then SIGKILL), and returns the NATS and console URLs it
// printed before ready.
func startBrowserDev(t *testing.T, bin, dir string, flags ...string) (natsURL, uiURL string) {
	t.Helper()
	runDir := filepath.Join(dir, "run")
	if err := os.Mkdir(runDir, 0o700); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"dev", "--nats-port", "-1", "--http-addr", "127.0.0.1:0", "--log-format", "json"}, flags...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+dir, "PROXBUS_RUN_DIR="+runDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &testenv.Buffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines, scanned, exited := make(chan string, 16), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(scanned)
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	go func() {
		<-scanned // Wait closes stdout: read it to its end first
		_ = cmd.Wait()
		close(exited)
	}()
	drain := func() {
		for range lines {
		}
	}
	t.Cleanup(func() {
		go drain()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			t.Logf("proxbus dev's log (last 8 KiB):\n%s", browserTail(logs.String(), 8<<10))
		}
	})
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("proxbus dev ended before ready: %s", browserTail(logs.String(), 8<<10))
			}
			if v, ok := strings.CutPrefix(l, "nats: "); ok {
				natsURL = v
			}
			if v, ok := strings.CutPrefix(l, "ui: "); ok {
				uiURL = v
			}
			if l == "ready" {
				if natsURL == "" || uiURL == "" {
					t.Fatalf("proxbus dev said ready without its nats: and ui: lines")
				}
				go drain() // dev never blocks on its stdout
				return natsURL, uiURL
			}
		case <-timeout:
			t.Fatalf("proxbus dev not ready in 30s: %s", browserTail(logs.String(), 8<<10))
		}
	}
}

// publishBrowserPoison publishes a vm.start whose data is not JSON (cut short, with a
// password in it) and returns the sequence of its dead letter, once the consumer has stored it.
func publishBrowserPoison(t *testing.T, natsURL, id string) uint64 {
	t.Helper()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	subjects := events.NewSubjects("proxbus")
	msg, err := events.EncodeBinary(subjects, events.Command{
		ID: id, Source: "urn:proxbus:e2e-browser", Verb: "vm.start", Actor: "e2e-browser",
		EndpointID: 1, HasEndpointID: true, Data: []byte(`{"vm":101}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	msg.Data = []byte(`{"vm": 101, "password": "` + canary + `"`) // cut short: not JSON
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		t.Fatalf("publish the poison message: %v", err)
	}
	stream, err := js.Stream(ctx, subjects.DLQStream())
	if err != nil {
		t.Fatal(err)
	}
	var seq uint64
	eventually(t, 10*time.Second, "the poison message's dead letter", func() bool {
		info, err := stream.Info(ctx)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Logf("dead-letter stream: %v", err)
		}
		if err != nil || info.State.Msgs == 0 {
			return false
		}
		seq = info.State.FirstSeq
		return true
	})
	return seq
}

// browserTail is the last n bytes of s.
func browserTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
