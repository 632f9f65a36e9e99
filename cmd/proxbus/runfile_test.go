package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/proxbus/proxbus/internal/embedded"
	"github.com/proxbus/proxbus/internal/testenv"
	"github.com/proxbus/proxbus/store"
)

// testDir holds what the package's tests share: the run directory every test uses unless it
// sets its own, and the binary buildProxbus builds.
var testDir string

// TestMain points $PROXBUS_RUN_DIR at a temporary directory, so that no test reads or writes
// the user's run file.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "proxbus-cmd-test-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testDir = dir
	runDir := filepath.Join(dir, "run")
	if err := os.Mkdir(runDir, 0o700); err == nil {
		err = os.Setenv(runDirEnv, runDir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

var (
	buildOnce sync.Once
	buildErr  error
)

// buildProxbus builds the proxbus binary once per test run and returns its path.
func buildProxbus(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(testDir, "proxbus")
	buildOnce.Do(func() {
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bin
}

// deadPID is the id of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatalf("run a short-lived process: %v", err)
	}
	return cmd.ProcessState.Pid()
}

// startDev runs `proxbus dev` in-process with args until the test ends and returns its
// stdout lines up to and including the run file's. Unless args name one, the web console
// listens on a free loopback port: the default 127.0.0.1:8090 may be taken by the user's own
// `proxbus dev`, which would add a note line.
func startDev(t *testing.T, args ...string) []string {
	t.Helper()
	if !slices.Contains(args, "--http-addr") {
		args = append(args, "--http-addr", "127.0.0.1:0")
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := newLineWriter()
	done := make(chan error, 1)
	go func() { done <- cmdDev(ctx, append(args, "--log-format", "json"), out, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dev returned %v", err)
		}
	})
	var lines []string
	for {
		lines = append(lines, out.next(t))
		if strings.HasPrefix(lines[len(lines)-1], "run file: ") {
			return lines
		}
		if len(lines) > 10 {
			t.Fatalf("no run file line:\n%s", strings.Join(lines, "\n"))
		}
	}
}

// lineValue is the rest of the first line starting with prefix, or "".
func lineValue(lines []string, prefix string) string {
	for _, l := range lines {
		if v, ok := strings.CutPrefix(l, prefix); ok {
			return v
		}
	}
	return ""
}

// TestDevRunFile pins the run file of `proxbus dev`: written (0600 in a 0700 directory) with
// the URLs it printed, the prefixes and its pid before it says ready; used by send and
// journal pending given no URL, which say so (journal pending lists a repair kept in dev's
// store); removed when dev ends. A NATS port that was taken is named with the one used.
func TestDevRunFile(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port
	tests := []struct {
		name     string
		natsPort int
		wantNote bool
	}{
		{"port taken", takenPort, true},
		{"any free port", -1, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run") // created by dev
			t.Setenv(runDirEnv, dir)
			path := filepath.Join(dir, "dev.json")
			var lines []string
			t.Run("dev", func(t *testing.T) { // its cleanup stops dev
				lines = startDev(t, "--nats-port", fmt.Sprint(tt.natsPort))
				if got := lineValue(lines, "run file: "); !strings.HasPrefix(got, path+" ") {
					t.Errorf("run file line %q, want the path %s", got, path)
				}
				natsURL := lineValue(lines, "nats: ")
				u, _ := url.Parse(natsURL)
				note := lineValue(lines, "note: ")
				wantNote := fmt.Sprintf("NATS port %d is taken (another NATS server?), so dev's NATS listens on port %s", takenPort, u.Port())
				if tt.wantNote && note != wantNote {
					t.Errorf("note %q, want %q\n%s", note, wantNote, strings.Join(lines, "\n"))
				}
				if !tt.wantNote && note != "" {
					t.Errorf("unexpected note %q", note)
				}

				fi, err := os.Stat(path)
				if err != nil {
					t.Fatalf("run file while dev runs: %v", err)
				}
				if fi.Mode().Perm() != 0o600 {
					t.Errorf("run file mode %v, want 0600", fi.Mode().Perm())
				}
				if di, err := os.Stat(dir); err != nil || di.Mode().Perm() != 0o700 {
					t.Errorf("run directory: %v %v, want mode 0700", di.Mode().Perm(), err)
				}
				b, _ := os.ReadFile(path)
				var r devRun
				if err := json.Unmarshal(b, &r); err != nil {
					t.Fatalf("run file %s: %v", b, err)
				}
				want := devRun{PID: os.Getpid(), NATSURL: natsURL, RedisURL: lineValue(lines, "redis: "), SubjectPrefix: "proxbus",
					RedisKeyPrefix: store.DefaultPrefix, PVEURL: lineValue(lines, "pve: "), NetBoxURL: lineValue(lines, "netbox: ")}
				if r != want {
					t.Errorf("run file %+v\nwant %+v", r, want)
				}

				code, out, errOut := runCLI(t, "send", "storage.pbs.create", "--endpoint", "1", "--data", pbsJSON(fmt.Sprintf("rf%d", i)))
				if wantLine := "using proxbus dev's NATS at " + natsURL + " (from " + path + ")\n"; code != 0 || !strings.HasPrefix(errOut, wantLine) {
					t.Errorf("send without --nats-url: code %d, stderr should start with %q\nstdout %s\nstderr %s", code, wantLine, out, errOut)
				}

				opts, err := redis.ParseURL(r.RedisURL)
				if err != nil {
					t.Fatal(err)
				}
				rdb := redis.NewClient(opts)
				defer rdb.Close()
				st, err := store.New(rdb, store.Options{Prefix: r.RedisKeyPrefix})
				if err != nil {
					t.Fatal(err)
				}
				if err := st.SaveRepair(context.Background(), store.Repair{Command: store.CommandKey{Source: "/test", ID: "dev-pending-1"},
					Verb: "vm.start", JournalID: 9, JournalURL: "http://netbox/api/extras/journal-entries/9/", Kind: "info"}); err != nil {
					t.Fatal(err)
				}
				code, out, errOut = runCLI(t, "journal", "pending")
				wantLine := fmt.Sprintf("using proxbus dev's Redis at %s, key prefix %q (from %s)\n", r.RedisURL, store.DefaultPrefix, path)
				if code != 0 || !strings.Contains(out, "dev-pending-1") || !strings.Contains(out, "1 pending") || errOut != wantLine {
					t.Errorf("journal pending without --redis-url: code %d, want the repair and stderr %q\nstdout %s\nstderr %s", code, wantLine, out, errOut)
				}
			})
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("run file after dev ended: %v, want it removed", err)
			}
		})
	}
}

// TestRunFileURLs pins which URLs the subcommands use: a live run file's when no URL was
// given, saying so; the flag's or the environment variable's when given, silently; never a
// stale file's (its process is gone), which is removed.
func TestRunFileURLs(t *testing.T) {
	const pending = "runfile-pending-1"
	saveRepair := func(t *testing.T, rdb *redis.Client, prefix string) {
		t.Helper()
		st, err := store.New(rdb, store.Options{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SaveRepair(context.Background(), store.Repair{Command: store.CommandKey{Source: "/test", ID: pending},
			Verb: "vm.stop", JournalID: 3, JournalURL: "http://netbox/api/extras/journal-entries/3/", Kind: "info"}); err != nil {
			t.Fatal(err)
		}
		announceReplica(t, rdb, prefix)
	}
	tests := []struct {
		name  string
		stale bool
		// args and env may name $A (the run file's server) and $B (another one).
		args []string
		env  map[string]string
		// wantOn is the server the command used: "A", "B" or "" (neither).
		wantOn     string
		wantNotice bool
	}{
		{"streams: run file", false, []string{"streams", "apply"}, nil, "A", true},
		{"streams: --nats-url wins", false, []string{"streams", "apply", "--nats-url", "$B"}, nil, "B", false},
		{"streams: $PROXBUS_NATS_URL wins", false, []string{"streams", "apply"}, map[string]string{"PROXBUS_NATS_URL": "$B"}, "B", false},
		{"journal: run file", false, []string{"journal", "pending"}, nil, "A", true},
		{"journal: --redis-url wins", false, []string{"journal", "pending", "--redis-url", "$B", "--redis-key-prefix", "$BP"}, nil, "B", false},
		{"journal: $PROXBUS_REDIS_URL wins", false, []string{"journal", "pending"}, map[string]string{"PROXBUS_REDIS_URL": "$B", "PROXBUS_REDIS_KEY_PREFIX": "$BP"}, "B", false},
		// Not streams apply: ignoring the stale file sends it to the default NATS, shared by the
		// tests of other packages; journal pending only reads.
		{"journal: stale file ignored", true, []string{"journal", "pending"}, nil, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Setenv(runDirEnv, dir)
			path := filepath.Join(dir, "dev.json")

			var a, b, aPrefix, bPrefix string
			var check func(t *testing.T) (onA, onB bool)
			switch tt.args[0] {
			case "streams":
				na, nb := testenv.StartNATS(t), testenv.StartNATS(t)
				a, b = na.URL, nb.URL
				check = func(t *testing.T) (bool, bool) {
					_, errA := na.JS.Stream(context.Background(), "PROXBUS_COMMANDS")
					_, errB := nb.JS.Stream(context.Background(), "PROXBUS_COMMANDS")
					return errA == nil, errB == nil
				}
			case "journal":
				m, err := embedded.StartRedis()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(m.Close)
				ra := redis.NewClient(&redis.Options{Addr: m.Addr()})
				t.Cleanup(func() { _ = ra.Close() })
				rb := testenv.StartRedis(t)
				a, aPrefix, b, bPrefix = "redis://"+m.Addr(), "devprefix", rb.URL, rb.Prefix
				saveRepair(t, ra, aPrefix)
				saveRepair(t, rb.Client, bPrefix)
				check = nil // from the output
			}
			pid := os.Getpid()
			if tt.stale {
				pid = deadPID(t)
			}
			if err := writeDevRun(path, devRun{PID: pid, NATSURL: a, RedisURL: a, RedisKeyPrefix: aPrefix, SubjectPrefix: "proxbus"}); err != nil {
				t.Fatal(err)
			}
			expand := strings.NewReplacer("$BP", bPrefix, "$A", a, "$B", b).Replace
			var args []string
			for _, arg := range tt.args {
				args = append(args, expand(arg))
			}
			for k, v := range tt.env {
				t.Setenv(k, expand(v))
			}

			code, out, errOut := runCLI(t, args...)
			var onA, onB bool
			if check != nil {
				onA, onB = check(t)
			} else {
				listed := code == 0 && strings.Contains(out, pending) && strings.Contains(out, "1 pending")
				onA = listed && errOut == fmt.Sprintf("using proxbus dev's Redis at %s, key prefix %q (from %s)\n", a, aPrefix, path)
				onB = listed && !onA
			}
			got := ""
			if onA {
				got += "A"
			}
			if onB {
				got += "B"
			}
			if got != tt.wantOn {
				t.Errorf("used server %q, want %q (A %s, B %s)\ncode %d\nstdout %s\nstderr %s", got, tt.wantOn, a, b, code, out, errOut)
			}
			if notice := strings.Contains(errOut, "using proxbus dev's"); notice != tt.wantNotice {
				t.Errorf("notice %v, want %v: %s", notice, tt.wantNotice, errOut)
			}
			if tt.wantNotice && (!strings.Contains(errOut, " at "+a) || !strings.Contains(errOut, "(from "+path+")")) {
				t.Errorf("notice does not name %s and %s: %s", a, path, errOut)
			}
			if _, err := os.Stat(path); tt.stale != os.IsNotExist(err) {
				t.Errorf("run file after the command: %v (stale %v: want it removed only then)", err, tt.stale)
			}
		})
	}
}

// TestDevExitCleansUp runs the real binary: after SIGTERM or Ctrl-C, dev exits 0 having
// removed its run file and its temporary NATS directory.
func TestDevExitCleansUp(t *testing.T) {
	bin := buildProxbus(t)
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			tmp, runDir := t.TempDir(), t.TempDir()
			cmd := exec.Command(bin, "dev", "--nats-port", "-1", "--log-format", "json")
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp, runDirEnv+"="+runDir)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			logs := &testenv.Buffer{}
			cmd.Stderr = logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			lines := make(chan string, 20)
			go func() {
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			timeout := time.After(30 * time.Second)
		wait:
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("dev ended before its run file line: %s", logs.String())
					}
					if strings.HasPrefix(l, "run file: ") {
						break wait
					}
				case <-timeout:
					t.Fatalf("no run file line in 30s: %s", logs.String())
				}
			}
			natsDirs := func() []string { m, _ := filepath.Glob(filepath.Join(tmp, "proxbus-nats-*")); return m }
			if len(natsDirs()) != 1 {
				t.Fatalf("NATS directories in $TMPDIR while dev runs: %v, want one", natsDirs())
			}
			runFile := filepath.Join(runDir, "dev.json")
			if _, err := os.Stat(runFile); err != nil {
				t.Fatalf("run file while dev runs: %v", err)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			for range lines { // drain stdout so that Wait returns
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("exit after %v: %v\n%s", sig, err, logs.String())
			}
			if d := natsDirs(); len(d) != 0 {
				t.Errorf("NATS directories left in $TMPDIR: %v", d)
			}
			if _, err := os.Stat(runFile); !os.IsNotExist(err) {
				t.Errorf("run file after exit: %v, want it removed", err)
			}
		})
	}
}

// TestRemoveDevRunKeepsAnothers pins that dev removes the run file only while it is its own.
func TestRemoveDevRunKeepsAnothers(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "dev.json")
	if err := writeDevRun(path, devRun{PID: 42, NATSURL: "nats://127.0.0.1:4223"}); err != nil {
		t.Fatal(err)
	}
	removeDevRun(path, 41)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("another dev's run file was removed: %v", err)
	}
	removeDevRun(path, 42)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("own run file: %v, want it removed", err)
	}
}

// TestRunFileInOpenDirIgnored pins that a run file is neither written nor read in a
// directory other users may write to, nor in the temporary directory's proxbus-<uid> unless
// only the user may use it.
func TestRunFileInOpenDirIgnored(t *testing.T) {
	tests := []struct {
		name   string
		shared bool // the run directory in $TMPDIR, not $PROXBUS_RUN_DIR
		mode   os.FileMode
		wantOK bool
	}{
		{"writable by others", false, 0o777, false},
		{"writable by the group", false, 0o770, false},
		{"readable by others", false, 0o755, true},
		{"shared, readable by others", true, 0o755, false},
		{"shared, private", true, 0o700, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			if tt.shared {
				tmp := t.TempDir()
				t.Setenv("TMPDIR", tmp)
				t.Setenv("XDG_RUNTIME_DIR", "")
				t.Setenv(runDirEnv, "")
				dir = filepath.Join(tmp, fmt.Sprintf("proxbus-%d", os.Getuid()))
			} else {
				t.Setenv(runDirEnv, dir)
			}
			path := devRunPath(os.Getenv)
			if filepath.Dir(path) != dir {
				t.Fatalf("run file %s, want it in %s", path, dir)
			}
			if err := os.Mkdir(dir, tt.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, tt.mode); err != nil { // not masked by the umask
				t.Fatal(err)
			}
			err := writeDevRun(path, devRun{PID: os.Getpid(), NATSURL: "nats://127.0.0.1:4223"})
			if tt.wantOK != (err == nil) {
				t.Errorf("write: %v, want success %v", err, tt.wantOK)
			}
			if err != nil && !strings.Contains(err.Error(), "open to other users") {
				t.Errorf("write error %q does not say why", err)
			}
			b := fmt.Sprintf(`{"pid":%d,"nats_url":"nats://127.0.0.1:4223"}`, os.Getpid())
			if err := os.WriteFile(path, []byte(b), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, ok := liveDevRun(path); ok != tt.wantOK {
				t.Errorf("read: %v, want %v", ok, tt.wantOK)
			}
		})
	}
}

// TestRunFileNoticeHidesCredentials: the line saying which of dev's URLs a subcommand uses
// never shows a password or a token in the URL, in either of the forms NATS and Redis take.
func TestRunFileNoticeHidesCredentials(t *testing.T) {
	const canary = "run-file-canary-s3cr3t"
	dir := filepath.Join(t.TempDir(), "run")
	t.Setenv(runDirEnv, dir)
	t.Setenv("PROXBUS_NATS_URL", "")
	t.Setenv("PROXBUS_REDIS_URL", "")
	run := devRun{PID: os.Getpid(), NATSURL: "nats://" + canary + "@127.0.0.1:4223",
		RedisURL: "redis://default:" + canary + "@127.0.0.1:6380/0", RedisKeyPrefix: "dev"}
	if err := writeDevRun(devRunPath(os.Getenv), run); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	e := newCLIEnv(context.Background(), nil, &out, &out)
	e.set, e.fromEnv = map[string]bool{}, map[string]bool{}
	natsURL, redisURL, prefix := "", "", ""
	e.natsFromDev(&natsURL, nil)
	e.redisFromDev(&redisURL, &prefix)
	if natsURL != run.NATSURL || redisURL != run.RedisURL {
		t.Fatalf("URLs taken %q, %q; want the run file's", natsURL, redisURL)
	}
	if !strings.Contains(out.String(), "using proxbus dev's NATS") || !strings.Contains(out.String(), "using proxbus dev's Redis") {
		t.Fatalf("notice %q does not say which URLs it used", out.String())
	}
	if strings.Contains(out.String(), canary) {
		t.Errorf("notice shows a credential: %q", out.String())
	}
}
