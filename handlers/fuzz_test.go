package handlers

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/internal/redact"
)

// The fuzz targets below pin contract §4 step 2 and §8 for every verb's data validation (the
// unexported prepare path): it never panics; a refused body is a 422 invalid_body whose Fields
// are only the verb's declared top-level names and whose Detail is one of a few fixed phrases,
// so no input value is ever echoed; and a canary secret placed at the verb's secret paths never
// reaches the journal bullets, the refusal, or the request fingerprint (the fingerprint does
// not change when only the secret does). Seed corpora live in testdata/fuzz/<FuzzName>/; CI
// runs them as ordinary tests, `go test -fuzz '^FuzzPrepareVMProvision$' ./handlers` explores.

// Two canaries of the same shape: a fingerprint that changes between them has hashed the secret.
const (
	canaryA = "CANARY-fuzz-s3cr3t-a1b2c3"
	canaryB = "CANARY-fuzz-s3cr3t-z9y8x7"
)

// fuzzVerb is one verb under fuzz: its declared top-level data fields (contract §9) and the
// JSON paths of its write-only values.
type fuzzVerb struct {
	verb     func() Verb
	declared []string
	secrets  [][]string
}

// fuzzVerbs maps every fuzz target's verb name to its declarations.
var fuzzVerbs = map[string]fuzzVerb{
	"storage.pbs.create": {StoragePBSCreate,
		[]string{"storage", "server", "port", "datastore", "namespace", "username", "password", "fingerprint", "nodes"},
		[][]string{{"password"}}},
	"storage.pbs.update": {StoragePBSUpdate, []string{"storage", "username", "password", "fingerprint"}, [][]string{{"password"}}},
	"storage.pbs.delete": {StoragePBSDelete, []string{"storage"}, nil},
	"vm.provision": {VMProvision,
		[]string{"source", "new_vmid", "new_name", "target_node", "storage", "full_clone", "memory_mb", "cores",
			"sockets", "disk_gb", "bridge", "vlan_tag", "cloud_init", "extra_networks", "enforce_cloud_network",
			"enable_agent", "start_after_provision"},
		[][]string{{"cloud_init", "password"}}},
	"ct.provision": {CTProvision,
		[]string{"new_vmid", "hostname", "target_node", "ostemplate", "storage", "rootfs_gb", "memory_mb", "swap_mb", "cores",
			"unprivileged", "nesting", "password", "ssh_keys", "net", "nameserver", "searchdomain", "start"},
		[][]string{{"password"}}},
	"vm.start":             {VMStart, []string{"vm"}, nil},
	"vm.stop":              {VMStop, []string{"vm", "force"}, nil},
	"vm.reboot":            {VMReboot, []string{"vm", "force"}, nil},
	"vm.suspend":           {VMSuspend, []string{"vm"}, nil},
	"vm.resume":            {VMResume, []string{"vm"}, nil},
	"vm.snapshot.list":     {VMSnapshotList, []string{"vm"}, nil},
	"vm.snapshot.create":   {VMSnapshotCreate, []string{"vm", "snapshot", "description", "include_memory"}, nil},
	"vm.snapshot.delete":   {VMSnapshotDelete, []string{"vm", "snapshot"}, nil},
	"vm.snapshot.rollback": {VMSnapshotRollback, []string{"vm", "snapshot", "start"}, nil},
	"node.reboot":          {NodeReboot, []string{"node"}, nil},
	"vm.config.get":        {VMConfigGet, []string{"vm"}, nil},
	"vm.list":              {VMList, []string{"node"}, nil},
	"vm.backup":            {VMBackup, []string{"vm", "storage", "mode", "compress", "notes_template", "protected"}, nil},
	"vm.migrate":           {VMMigrate, []string{"vm", "target_node", "online", "with_local_disks", "target_storage"}, nil},
	"vm.delete":            {VMDelete, []string{"vm", "purge", "destroy_unreferenced_disks", "stop_first"}, nil},
	"vm.restore":           {VMRestore, []string{"archive", "vmid", "target_node", "storage", "unique", "start", "force", "bandwidth_limit_kib"}, nil},
	"vm.backup.list":       {VMBackupList, []string{"storage", "vm"}, nil},
	"vm.backup.delete":     {VMBackupDelete, []string{"volid"}, nil},
	"command.approve":      {CommandApprove, []string{"command_id", "command_source", "reason"}, nil},
	"command.reject":       {CommandReject, []string{"command_id", "command_source", "reason"}, nil},
	"command.cancel":       {CommandCancel, []string{"command_id", "command_source", "reason"}, nil},
	"schedule.add":         {ScheduleAdd, []string{"name", "cron", "tz", "every", "at", "verb", "endpoint_id", "data", "window"}, nil},
	"schedule.remove":      {ScheduleRemove, []string{"name"}, nil},
}

// fuzzTargets names the fuzz target of each verb (its seed corpus directory).
var fuzzTargets = map[string]string{
	"storage.pbs.create":   "FuzzPrepareStoragePBSCreate",
	"storage.pbs.update":   "FuzzPrepareStoragePBSUpdate",
	"storage.pbs.delete":   "FuzzPrepareStoragePBSDelete",
	"vm.provision":         "FuzzPrepareVMProvision",
	"ct.provision":         "FuzzPrepareCTProvision",
	"vm.start":             "FuzzPrepareVMStart",
	"vm.stop":              "FuzzPrepareVMStop",
	"vm.reboot":            "FuzzPrepareVMReboot",
	"vm.suspend":           "FuzzPrepareVMSuspend",
	"vm.resume":            "FuzzPrepareVMResume",
	"vm.snapshot.list":     "FuzzPrepareVMSnapshotList",
	"vm.snapshot.create":   "FuzzPrepareVMSnapshotCreate",
	"vm.snapshot.delete":   "FuzzPrepareVMSnapshotDelete",
	"vm.snapshot.rollback": "FuzzPrepareVMSnapshotRollback",
	"node.reboot":          "FuzzPrepareNodeReboot",
	"vm.config.get":        "FuzzPrepareVMConfigGet",
	"vm.list":              "FuzzPrepareVMList",
	"vm.backup":            "FuzzPrepareVMBackup",
	"vm.migrate":           "FuzzPrepareVMMigrate",
	"vm.delete":            "FuzzPrepareVMDelete",
	"vm.restore":           "FuzzPrepareVMRestore",
	"vm.backup.list":       "FuzzPrepareVMBackupList",
	"vm.backup.delete":     "FuzzPrepareVMBackupDelete",
	"command.approve":      "FuzzPrepareCommandApprove",
	"command.reject":       "FuzzPrepareCommandReject",
	"command.cancel":       "FuzzPrepareCommandCancel",
	"schedule.add":         "FuzzPrepareScheduleAdd",
	"schedule.remove":      "FuzzPrepareScheduleRemove",
}

func FuzzPrepareStoragePBSCreate(f *testing.F)   { fuzzPrepare(f, "storage.pbs.create") }
func FuzzPrepareStoragePBSUpdate(f *testing.F)   { fuzzPrepare(f, "storage.pbs.update") }
func FuzzPrepareStoragePBSDelete(f *testing.F)   { fuzzPrepare(f, "storage.pbs.delete") }
func FuzzPrepareVMProvision(f *testing.F)        { fuzzPrepare(f, "vm.provision") }
func FuzzPrepareCTProvision(f *testing.F)        { fuzzPrepare(f, "ct.provision") }
func FuzzPrepareVMStart(f *testing.F)            { fuzzPrepare(f, "vm.start") }
func FuzzPrepareVMStop(f *testing.F)             { fuzzPrepare(f, "vm.stop") }
func FuzzPrepareVMReboot(f *testing.F)           { fuzzPrepare(f, "vm.reboot") }
func FuzzPrepareVMSuspend(f *testing.F)          { fuzzPrepare(f, "vm.suspend") }
func FuzzPrepareVMResume(f *testing.F)           { fuzzPrepare(f, "vm.resume") }
func FuzzPrepareVMSnapshotList(f *testing.F)     { fuzzPrepare(f, "vm.snapshot.list") }
func FuzzPrepareVMSnapshotCreate(f *testing.F)   { fuzzPrepare(f, "vm.snapshot.create") }
func FuzzPrepareVMSnapshotDelete(f *testing.F)   { fuzzPrepare(f, "vm.snapshot.delete") }
func FuzzPrepareVMSnapshotRollback(f *testing.F) { fuzzPrepare(f, "vm.snapshot.rollback") }
func FuzzPrepareNodeReboot(f *testing.F)         { fuzzPrepare(f, "node.reboot") }
func FuzzPrepareVMConfigGet(f *testing.F)        { fuzzPrepare(f, "vm.config.get") }
func FuzzPrepareVMList(f *testing.F)             { fuzzPrepare(f, "vm.list") }
func FuzzPrepareVMBackup(f *testing.F)           { fuzzPrepare(f, "vm.backup") }
func FuzzPrepareVMMigrate(f *testing.F)          { fuzzPrepare(f, "vm.migrate") }
func FuzzPrepareVMDelete(f *testing.F)           { fuzzPrepare(f, "vm.delete") }
func FuzzPrepareVMRestore(f *testing.F)          { fuzzPrepare(f, "vm.restore") }
func FuzzPrepareVMBackupList(f *testing.F)       { fuzzPrepare(f, "vm.backup.list") }
func FuzzPrepareVMBackupDelete(f *testing.F)     { fuzzPrepare(f, "vm.backup.delete") }
func FuzzPrepareCommandApprove(f *testing.F)     { fuzzPrepare(f, "command.approve") }
func FuzzPrepareCommandReject(f *testing.F)      { fuzzPrepare(f, "command.reject") }
func FuzzPrepareCommandCancel(f *testing.F)      { fuzzPrepare(f, "command.cancel") }
func FuzzPrepareScheduleAdd(f *testing.F)        { fuzzPrepare(f, "schedule.add") }
func FuzzPrepareScheduleRemove(f *testing.F)     { fuzzPrepare(f, "schedule.remove") }

// fuzzPrepare runs the checks on the verb's data: the body as given, then the body with a
// canary at every secret path (and a top-level "password", declared or not).
func fuzzPrepare(f *testing.F, name string) {
	fv, ok := fuzzVerbs[name]
	if !ok {
		f.Fatalf("no fuzz declarations for %s", name)
	}
	verb := fv.verb()
	f.Fuzz(func(t *testing.T, data []byte) {
		p, out := verb.prepare(data)
		checkPrepared(t, fv, p, out)
		if out == nil {
			again, out2 := verb.prepare(data)
			if out2 != nil || again.fingerprint != p.fingerprint || !reflect.DeepEqual(again.bullets, p.bullets) {
				t.Fatalf("prepare is not deterministic: %q vs %q", p.fingerprint, again.fingerprint)
			}
		}
		if bytes.Contains(data, []byte("CANARY-fuzz")) {
			return // the body carries the canary in plain fields: nothing to learn
		}
		withA, injectedA := injectCanary(data, fv.secrets, canaryA)
		withB, _ := injectCanary(data, fv.secrets, canaryB)
		if withA == nil || withB == nil {
			return // not a JSON object: nothing to inject into
		}
		pa, outA := verb.prepare(withA)
		pb, outB := verb.prepare(withB)
		checkPrepared(t, fv, pa, outA)
		checkPrepared(t, fv, pb, outB)
		for _, c := range []struct {
			canary string
			p      prepared
			out    *Outcome
		}{{canaryA, pa, outA}, {canaryB, pb, outB}} {
			if leak := canaryIn(c.canary, c.p, c.out); leak != "" {
				t.Fatalf("canary secret leaked into %s", leak)
			}
		}
		if (outA == nil) != (outB == nil) || (outA != nil && !reflect.DeepEqual(outA, outB)) {
			t.Fatalf("validity depends on the secret's value: %+v vs %+v", outA, outB)
		}
		if outA != nil {
			return
		}
		if pa.fingerprint != pb.fingerprint {
			t.Fatal("the request fingerprint changes with the secret: the secret is part of its input")
		}
		if injectedA && !slices.Contains(pa.secrets, canaryA) {
			t.Fatalf("the secret at a declared path is not among the prepared secrets %d", len(pa.secrets))
		}
	})
}

// fixedDetails are the only details a validation refusal may carry.
var fixedDetails = []string{"", "undeclared fields present", "data must be a JSON object", "data cannot be fingerprinted"}

var hexFingerprint = regexp.MustCompile(`^[0-9a-f]{64}$`)

// checkPrepared checks one prepare answer: a well-formed refusal, or a fingerprinted command
// with no secret-named bullet. (Secret values are checked with the canaries: a short real secret
// may legitimately be a substring of another field.)
func checkPrepared(t *testing.T, fv fuzzVerb, p prepared, out *Outcome) {
	t.Helper()
	if out != nil {
		if out.Status != 422 || out.Result != ResultRefused || out.Reason != ReasonInvalidBody || out.Output != nil || out.UPID != "" {
			t.Fatalf("refusal is not a bare 422 invalid_body: %+v", out)
		}
		if !slices.Contains(fixedDetails, out.Detail) {
			t.Fatalf("refusal detail %q is not a fixed phrase (it may echo the input)", out.Detail)
		}
		if !slices.IsSorted(out.Fields) || len(slices.Compact(slices.Clone(out.Fields))) != len(out.Fields) {
			t.Fatalf("refusal fields %q are not sorted and unique", out.Fields)
		}
		for _, name := range out.Fields {
			if !slices.Contains(fv.declared, name) {
				t.Fatalf("refusal names %q, which is not a declared top-level field (declared: %v)", name, fv.declared)
			}
		}
		if len(out.Fields) == 0 && out.Detail == "" {
			t.Fatal("refusal says neither which fields failed nor why")
		}
		return
	}
	if !hexFingerprint.MatchString(p.fingerprint) {
		t.Fatalf("fingerprint %q is not a sha256", p.fingerprint)
	}
	if p.dispatch == nil {
		t.Fatal("valid command has no dispatch")
	}
	for _, b := range p.bullets {
		if redact.IsSecretName(b.Name) {
			t.Fatalf("bullet %q is secret-named", b.Name)
		}
	}
}

// canaryIn says where the canary appears in what prepare returned ("" when nowhere).
func canaryIn(canary string, p prepared, out *Outcome) string {
	if out != nil {
		if strings.Contains(out.Detail, canary) {
			return "the refusal detail"
		}
		if slices.ContainsFunc(out.Fields, func(s string) bool { return strings.Contains(s, canary) }) {
			return "the refusal fields"
		}
		return ""
	}
	for _, b := range p.bullets {
		if strings.Contains(b.Name, canary) || strings.Contains(b.Value, canary) {
			return "the journal bullets"
		}
	}
	if strings.Contains(p.fingerprint, canary) || strings.Contains(p.resource, canary) {
		return "the fingerprint or resource"
	}
	return ""
}

// injectCanary returns data (a JSON object) with canary at a top-level "password" and at each
// path; an intermediate object that is absent is created, one of another type is left alone.
// It returns nil when data is not a JSON object, and whether a declared path got the canary.
func injectCanary(data []byte, paths [][]string, canary string) ([]byte, bool) {
	doc, ok := decodeObject(data)
	if !ok {
		return nil, false
	}
	injected := false
	for _, path := range append([][]string{{"password"}}, paths...) {
		obj := doc
		for _, key := range path[:len(path)-1] {
			next, present := obj[key]
			if !present || next == nil {
				next = map[string]any{}
				obj[key] = next
			}
			sub, isObj := next.(map[string]any)
			if !isObj {
				obj = nil
				break
			}
			obj = sub
		}
		if obj == nil {
			continue
		}
		obj[path[len(path)-1]] = canary
		if len(paths) > 0 && slices.ContainsFunc(paths, func(p []string) bool { return slices.Equal(p, path) }) {
			injected = true
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, false
	}
	return out, injected
}

// decodeObject decodes a JSON object keeping numbers exact.
func decodeObject(data []byte) (map[string]any, bool) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(trimmed) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, false
	}
	return doc, true
}

// TestFuzzTargetsCoverEveryVerb pins that every built-in verb has a fuzz target with a committed
// seed corpus holding at least one body the verb accepts and one it refuses, so the fuzzer
// starts from realistic commands and CI's seed run exercises both paths.
func TestFuzzTargetsCoverEveryVerb(t *testing.T) {
	t.Parallel()
	for _, v := range Builtin() {
		t.Run(v.VerbName(), func(t *testing.T) {
			t.Parallel()
			name := v.VerbName()
			target, ok := fuzzTargets[name]
			if _, declared := fuzzVerbs[name]; !ok || !declared {
				t.Fatalf("verb %s has no fuzz target: add one to handlers/fuzz_test.go", name)
			}
			seeds := readSeedCorpus(t, filepath.Join("testdata", "fuzz", target))
			accepted, refused := 0, 0
			for file, data := range seeds {
				if _, out := v.prepare(data); out == nil {
					accepted++
				} else {
					refused++
					t.Logf("%s: refused seed %s (fields %v, detail %q)", target, file, out.Fields, out.Detail)
				}
			}
			if accepted == 0 || refused == 0 {
				t.Fatalf("corpus of %s has %d accepted and %d refused seeds; want both", target, accepted, refused)
			}
		})
	}
}

func TestFuzzDeclarationsMatchVerbs(t *testing.T) {
	t.Parallel()
	names := make([]string, 0, len(Builtin()))
	for _, v := range Builtin() {
		names = append(names, v.VerbName())
	}
	for name := range fuzzVerbs {
		if !slices.Contains(names, name) {
			t.Errorf("fuzz declarations name %s, which is not a built-in verb", name)
		}
		if got := fuzzVerbs[name].verb().VerbName(); got != name {
			t.Errorf("fuzz declaration %s builds verb %s", name, got)
		}
	}
}

func TestInjectCanary(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		data         string
		paths        [][]string
		want         string
		wantInjected bool
	}{
		{"top level", `{"storage":"a"}`, [][]string{{"password"}}, `{"password":"C","storage":"a"}`, true},
		{"nested created", `{"new_vmid":12345678901234567890}`, [][]string{{"cloud_init", "password"}},
			`{"cloud_init":{"password":"C"},"new_vmid":12345678901234567890,"password":"C"}`, true},
		{"nested kept", `{"cloud_init":{"user":"u"}}`, [][]string{{"cloud_init", "password"}},
			`{"cloud_init":{"password":"C","user":"u"},"password":"C"}`, true},
		{"nested not an object", `{"cloud_init":"x"}`, [][]string{{"cloud_init", "password"}}, `{"cloud_init":"x","password":"C"}`, false},
		{"undeclared only", `{"vm":100}`, nil, `{"password":"C","vm":100}`, false},
		{"not an object", `[1]`, nil, ``, false},
		{"trailing data", `{} {}`, nil, ``, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, injected := injectCanary([]byte(tt.data), tt.paths, "C")
			if string(got) != tt.want || injected != tt.wantInjected {
				t.Errorf("injectCanary(%s) = %s, %v; want %s, %v", tt.data, got, injected, tt.want, tt.wantInjected)
			}
		})
	}
}

// readSeedCorpus reads the []byte inputs of a `go test fuzz v1` corpus directory.
func readSeedCorpus(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("seed corpus: %v", err)
	}
	seeds := map[string][]byte{}
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatalf("seed %s: %v", e.Name(), err)
		}
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		if !sc.Scan() || sc.Text() != "go test fuzz v1" {
			t.Fatalf("seed %s: not a go test fuzz v1 file", e.Name())
		}
		if !sc.Scan() {
			t.Fatalf("seed %s: no input", e.Name())
		}
		line := sc.Text()
		if !strings.HasPrefix(line, "[]byte(") || !strings.HasSuffix(line, ")") {
			t.Fatalf("seed %s: input is not a []byte", e.Name())
		}
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(line, "[]byte("), ")"))
		if err != nil {
			t.Fatalf("seed %s: %v", e.Name(), err)
		}
		seeds[e.Name()] = []byte(s)
	}
	return seeds
}
