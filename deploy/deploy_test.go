package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/internal/testenv"
)

// secretName matches the names of settings that hold secrets.
var secretName = regexp.MustCompile(`(?i)(password|secret|token|creds|credential|key$|_key_)`)

// deployedReplicas is the stream replica count of every clustered deployment here.
const deployedReplicas = 3

// codeStreams are the stream configurations the code provisions, with the deployed replicas.
func codeStreams() []jetstream.StreamConfig {
	return consumer.StreamConfigs(consumer.Config{Subjects: events.NewSubjects(""), Replicas: deployedReplicas})
}

// serverDefaults fills what the server fills for an unset limit, so a config written in full
// (as `nats stream add --config` files are) compares equal to the code's sparse one.
func serverDefaults(c jetstream.StreamConfig) jetstream.StreamConfig {
	for _, p := range []*int64{&c.MaxMsgs, &c.MaxBytes, &c.MaxMsgsPerSubject} {
		if *p == 0 {
			*p = -1
		}
	}
	if c.MaxConsumers == 0 {
		c.MaxConsumers = -1
	}
	if c.MaxMsgSize == 0 {
		c.MaxMsgSize = -1
	}
	return c
}

// readStreamFile decodes one streams/*.json strictly: an unknown field is an error, as it
// would be a typo the nats CLI silently drops.
func readStreamFile(t *testing.T, path string) jetstream.StreamConfig {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var sc jetstream.StreamConfig
	if err := dec.Decode(&sc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return sc
}

func streamFiles(t *testing.T) map[string]jetstream.StreamConfig {
	t.Helper()
	paths, err := filepath.Glob("streams/*.json")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no streams/*.json: %v", err)
	}
	byName := map[string]jetstream.StreamConfig{}
	for _, p := range paths {
		sc := readStreamFile(t, p)
		if _, dup := byName[sc.Name]; dup {
			t.Errorf("%s: stream %s defined twice", p, sc.Name)
		}
		byName[sc.Name] = sc
	}
	return byName
}

// TestStreamFilesMatchCode pins deploy/streams/*.json to consumer.StreamConfigs: the same
// streams, field for field, with three replicas as the only intended difference.
func TestStreamFilesMatchCode(t *testing.T) {
	t.Parallel()
	files := streamFiles(t)
	want := codeStreams()
	if len(files) != len(want) {
		names := make([]string, 0, len(files))
		for n := range files {
			names = append(names, n)
		}
		t.Errorf("streams/*.json define %v, the code provisions %d streams", names, len(want))
	}
	for _, w := range want {
		t.Run(w.Name, func(t *testing.T) {
			t.Parallel()
			got, ok := files[w.Name]
			if !ok {
				t.Fatalf("no streams/*.json defines %s", w.Name)
			}
			if got.Replicas != deployedReplicas {
				t.Errorf("num_replicas = %d, want %d", got.Replicas, deployedReplicas)
			}
			if g, w := serverDefaults(got), serverDefaults(w); !reflect.DeepEqual(g, w) {
				gj, _ := json.MarshalIndent(g, "", " ")
				wj, _ := json.MarshalIndent(w, "", " ")
				t.Errorf("stream file differs from the code\nfile: %s\ncode: %s", gj, wj)
			}
		})
	}
}

// TestStreamFilesAcceptedByServer creates the streams from the files on a real JetStream
// server and compares what the server stored with what consumer.Provision stores on another.
// A standalone server takes one replica, so both sides use one here.
func TestStreamFilesAcceptedByServer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)

	fromFiles := testenv.StartNATS(t)
	for _, sc := range streamFiles(t) {
		sc.Replicas = 1
		if _, err := fromFiles.JS.CreateStream(ctx, sc); err != nil {
			t.Fatalf("server refuses %s from its file: %v", sc.Name, err)
		}
	}
	fromCode := testenv.StartNATS(t)
	if err := consumer.Provision(ctx, fromCode.JS, consumer.Config{Subjects: events.NewSubjects(""), Replicas: 1}); err != nil {
		t.Fatalf("provision: %v", err)
	}
	for _, w := range codeStreams() {
		a, err := fromFiles.JS.Stream(ctx, w.Name)
		if err != nil {
			t.Fatalf("stream %s from files: %v", w.Name, err)
		}
		b, err := fromCode.JS.Stream(ctx, w.Name)
		if err != nil {
			t.Fatalf("stream %s from code: %v", w.Name, err)
		}
		if ga, gb := a.CachedInfo().Config, b.CachedInfo().Config; !reflect.DeepEqual(ga, gb) {
			t.Errorf("%s: server config from the file %+v\ndiffers from the provisioned one %+v", w.Name, ga, gb)
		}
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// composeService is the part of a Compose service the checks read.
type composeService struct {
	Image       string            `yaml:"image"`
	Command     []string          `yaml:"command"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Environment map[string]string `yaml:"environment"`
	EnvFile     []string          `yaml:"env_file"`
	Volumes     []string          `yaml:"volumes"`
	Profiles    []string          `yaml:"profiles"`
}

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
}

// readEnvFile reads KEY=VALUE lines, skipping comments and blank lines.
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: not KEY=VALUE: %q", path, line)
		}
		env[k] = v
	}
	return env
}

// TestComposeStack checks docker-compose.yml: three NATS nodes of one cluster, Redis with an
// AOF fsynced on every write, three proxbus replicas, both simulators, the stream job, files
// that exist, R3 streams, and secrets only in env files.
func TestComposeStack(t *testing.T) {
	t.Parallel()
	var c composeFile
	readYAML(t, "docker-compose.yml", &c)
	count := map[string][]string{}
	for name, s := range c.Services {
		args := strings.Join(s.Command, " ")
		switch {
		case strings.HasPrefix(s.Image, "nats:"):
			count["nats"] = append(count["nats"], name)
			if !strings.Contains(args, "--config /etc/nats/cluster.conf") || !strings.Contains(args, "--server_name "+name) {
				t.Errorf("%s: command %q, want the cluster config and its own server name", name, args)
			}
		case strings.HasPrefix(s.Image, "redis:"):
			count["redis"] = append(count["redis"], name)
			if !strings.Contains(args, "--appendonly yes") || !strings.Contains(args, "--appendfsync always") {
				t.Errorf("%s: command %q, want --appendonly yes --appendfsync always", name, args)
			}
		case args == "serve":
			count["proxbus"] = append(count["proxbus"], name)
			if s.Environment["PROXBUS_INSTANCE"] != name {
				t.Errorf("%s: PROXBUS_INSTANCE = %q, want the service name", name, s.Environment["PROXBUS_INSTANCE"])
			}
		case strings.HasPrefix(args, "sim pve"):
			count["sim pve"] = append(count["sim pve"], name)
		case strings.HasPrefix(args, "sim netbox"):
			count["sim netbox"] = append(count["sim netbox"], name)
		case slices.Contains(s.Volumes, "./streams:/streams:ro"):
			count["streams"] = append(count["streams"], name)
		}
		for k, v := range s.Environment {
			if secretName.MatchString(k) {
				t.Errorf("%s: environment %s=%q in the compose file: secrets belong in an env file", name, k, v)
			}
		}
		for _, f := range s.EnvFile {
			if _, err := os.Stat(f); err != nil {
				t.Errorf("%s: env_file %s: %v", name, f, err)
			}
		}
		for _, v := range s.Volumes {
			if src, _, _ := strings.Cut(v, ":"); strings.HasPrefix(src, "./") {
				if _, err := os.Stat(src); err != nil {
					t.Errorf("%s: volume source %s: %v", name, src, err)
				}
			}
		}
	}
	for _, want := range []struct {
		role string
		n    int
	}{{"nats", 3}, {"redis", 1}, {"proxbus", 3}, {"sim pve", 1}, {"sim netbox", 1}, {"streams", 1}} {
		if got := len(count[want.role]); got != want.n {
			t.Errorf("%d %s services (%v), want %d", got, want.role, count[want.role], want.n)
		}
	}

	env := readEnvFile(t, "compose/proxbus.env")
	if env["PROXBUS_STREAM_REPLICAS"] != "3" {
		t.Errorf("compose/proxbus.env: PROXBUS_STREAM_REPLICAS = %q, want 3", env["PROXBUS_STREAM_REPLICAS"])
	}
	for _, n := range []string{"nats1", "nats2", "nats3"} {
		if !strings.Contains(env["PROXBUS_NATS_URL"], "@"+n+":4222") {
			t.Errorf("compose/proxbus.env: PROXBUS_NATS_URL does not list %s", n)
		}
	}
	raw, err := os.ReadFile("compose/endpoints.yaml")
	if err != nil {
		t.Fatal(err)
	}
	eps, err := proxmox.ParseEndpoints(raw)
	if err != nil {
		t.Fatalf("compose/endpoints.yaml: %v", err)
	}
	for _, ep := range eps {
		if ep.TokenSecretEnv != "" && env[ep.TokenSecretEnv] == "" {
			t.Errorf("compose/endpoints.yaml: endpoint %d reads %s, which compose/proxbus.env does not set", ep.ID, ep.TokenSecretEnv)
		}
	}
	natsEnv := readEnvFile(t, "compose/nats.env")
	for _, v := range natsPasswordVariables(t) {
		if natsEnv[v] == "" {
			t.Errorf("compose/nats.env does not set %s, which nats/accounts.conf reads", v)
		}
	}
}

// natsPasswordVariables lists the variables nats/accounts.conf reads.
func natsPasswordVariables(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("nats/accounts.conf")
	if err != nil {
		t.Fatal(err)
	}
	var vars []string
	for _, m := range regexp.MustCompile(`(?m)^\s*password:\s*\$([A-Z0-9_]+)\s*$`).FindAllStringSubmatch(string(raw), -1) {
		vars = append(vars, m[1])
	}
	if len(vars) == 0 {
		t.Fatal("nats/accounts.conf reads no password variable")
	}
	return vars
}

// k8sObject is the part of a Kubernetes object the checks read.
type k8sObject struct {
	APIVersion string         `yaml:"apiVersion"`
	Kind       string         `yaml:"kind"`
	Metadata   map[string]any `yaml:"metadata"`
	Data       map[string]any `yaml:"data"`
	StringData map[string]any `yaml:"stringData"`
	Spec       map[string]any `yaml:"spec"`
}

func k8sObjects(t *testing.T) (map[string]k8sObject, []string) {
	t.Helper()
	paths, err := filepath.Glob("k8s/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no k8s/*.yaml: %v", err)
	}
	byKind := map[string]k8sObject{}
	var files []string
	for _, p := range paths {
		if filepath.Base(p) == "kustomization.yaml" {
			continue
		}
		files = append(files, filepath.Base(p))
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for doc := range strings.SplitSeq(string(raw), "\n---") {
			var o k8sObject
			if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if o.Kind == "" {
				continue
			}
			if _, dup := byKind[o.Kind]; dup {
				t.Errorf("%s: a second %s", p, o.Kind)
			}
			byKind[o.Kind] = o
		}
	}
	sort.Strings(files)
	return byKind, files
}

// dig walks maps and lists ("0" indexes a list) and returns what is there, or nil.
func dig(v any, path ...string) any {
	for _, k := range path {
		switch c := v.(type) {
		case map[string]any:
			v = c[k]
		case []any:
			i := -1
			if len(k) == 1 && k[0] >= '0' && k[0] <= '9' {
				i = int(k[0] - '0')
			}
			if i < 0 || i >= len(c) {
				return nil
			}
			v = c[i]
		default:
			return nil
		}
	}
	return v
}

// TestKubernetesManifests checks deploy/k8s: kinds and API versions, a Deployment of three
// replicas probing /healthz and /readyz on the http port 9090, selectors that match, secrets
// only by reference, and a kustomization listing every manifest.
func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	objs, files := k8sObjects(t)
	wantKinds := map[string]string{
		"Namespace": "v1", "ConfigMap": "v1", "Service": "v1", "Deployment": "apps/v1",
		"PodDisruptionBudget": "policy/v1", "ServiceMonitor": "monitoring.coreos.com/v1",
	}
	for kind, api := range wantKinds {
		o, ok := objs[kind]
		if !ok {
			t.Errorf("no %s manifest", kind)
			continue
		}
		if o.APIVersion != api {
			t.Errorf("%s: apiVersion %s, want %s", kind, o.APIVersion, api)
		}
	}
	for kind, o := range objs {
		if _, ok := wantKinds[kind]; !ok {
			t.Errorf("unexpected kind %s", kind)
		}
		if kind == "Secret" || len(o.StringData) > 0 {
			t.Errorf("%s: secrets must be referenced, never written in a manifest", kind)
		}
	}

	dep := objs["Deployment"]
	if r, _ := dep.Spec["replicas"].(uint64); r != 3 {
		t.Errorf("Deployment replicas = %v, want 3", dep.Spec["replicas"])
	}
	podLabels, _ := dig(dep.Spec, "template", "metadata", "labels").(map[string]any)
	c := dig(dep.Spec, "template", "spec", "containers", "0")
	if dig(dep.Spec, "template", "spec", "securityContext", "runAsNonRoot") != true {
		t.Error("Deployment: runAsNonRoot is not true")
	}
	if dig(c, "ports", "0", "name") != "http" || dig(c, "ports", "0", "containerPort") != uint64(9090) {
		t.Errorf("container port = %v, want http 9090", dig(c, "ports", "0"))
	}
	for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz", "startupProbe": "/healthz"} {
		if got := dig(c, probe, "httpGet", "path"); got != path {
			t.Errorf("%s path = %v, want %s", probe, got, path)
		}
		if got := dig(c, probe, "httpGet", "port"); got != "http" {
			t.Errorf("%s port = %v, want http", probe, got)
		}
	}
	envs, _ := dig(c, "env").([]any)
	for _, e := range envs {
		name, _ := dig(e, "name").(string)
		if dig(e, "value") != nil && secretName.MatchString(name) {
			t.Errorf("env %s has a literal value: use secretKeyRef", name)
		}
		if secretName.MatchString(name) && dig(e, "valueFrom", "secretKeyRef", "name") == nil {
			t.Errorf("env %s is not from a secretKeyRef", name)
		}
	}
	cm := objs["ConfigMap"]
	for k, v := range cm.Data {
		if secretName.MatchString(k) && !strings.HasPrefix(v.(string), "/") {
			t.Errorf("ConfigMap %s looks like a secret (only file paths of secrets belong here)", k)
		}
	}
	eps, err := proxmox.ParseEndpoints([]byte(cm.Data["endpoints.yaml"].(string)))
	if err != nil {
		t.Errorf("ConfigMap endpoints.yaml: %v", err)
	}
	for _, ep := range eps {
		if ep.TokenSecretFile == "" {
			t.Errorf("ConfigMap endpoints.yaml: endpoint %d should read its token from a mounted Secret file", ep.ID)
		}
	}
	for kind, sel := range map[string]any{
		"Deployment":          dig(dep.Spec, "selector", "matchLabels"),
		"PodDisruptionBudget": dig(objs["PodDisruptionBudget"].Spec, "selector", "matchLabels"),
		"Service":             dig(objs["Service"].Spec, "selector"),
	} {
		m, _ := sel.(map[string]any)
		if len(m) == 0 {
			t.Errorf("%s has no selector", kind)
		}
		for k, v := range m {
			if podLabels[k] != v {
				t.Errorf("%s selector %s=%v does not match the pod labels %v", kind, k, v, podLabels)
			}
		}
	}
	svc := objs["Service"]
	if dig(svc.Spec, "ports", "0", "name") != "http" || dig(svc.Spec, "ports", "0", "port") != uint64(9090) {
		t.Errorf("Service port = %v, want http 9090", dig(svc.Spec, "ports", "0"))
	}
	sm := objs["ServiceMonitor"]
	if dig(sm.Spec, "endpoints", "0", "port") != "http" || dig(sm.Spec, "endpoints", "0", "path") != "/metrics" {
		t.Errorf("ServiceMonitor endpoint = %v, want port http path /metrics", dig(sm.Spec, "endpoints", "0"))
	}
	svcLabels, _ := svc.Metadata["labels"].(map[string]any)
	smSel, _ := dig(sm.Spec, "selector", "matchLabels").(map[string]any)
	for k, v := range smSel {
		if svcLabels[k] != v {
			t.Errorf("ServiceMonitor selector %s=%v does not match the Service labels", k, v)
		}
	}

	var kust struct {
		Resources []string `yaml:"resources"`
	}
	readYAML(t, "k8s/kustomization.yaml", &kust)
	sort.Strings(kust.Resources)
	if !slices.Equal(kust.Resources, files) {
		t.Errorf("kustomization resources %v, want every manifest %v", kust.Resources, files)
	}
}

// unitDirectives reads a systemd unit into section → directive → values.
func unitDirectives(t *testing.T, path string) map[string]map[string][]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string][]string{}
	section := ""
	for line := range strings.Lines(string(raw)) {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
			out[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s: malformed line %q", path, line)
			}
			out[section][k] = append(out[section][k], v)
		}
	}
	return out
}

// TestSystemdUnit checks the unit's hardening and, where systemd-analyze exists, that systemd
// accepts it and rates its exposure low.
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	const unit = "systemd/proxbus.service"
	d := unitDirectives(t, unit)
	svc := d["Service"]
	want := map[string]string{
		"ExecStart": "/usr/local/bin/proxbus serve", "NoNewPrivileges": "yes", "ProtectSystem": "strict",
		"DynamicUser": "yes", "PrivateTmp": "yes", "KillSignal": "SIGTERM", "EnvironmentFile": "/etc/proxbus/proxbus.env",
		// DynamicUser cannot read /etc/proxbus: the files it needs are credentials.
		"LoadCredential": "endpoints.yaml:/etc/proxbus/credentials/endpoints.yaml", "Environment": "PROXBUS_ENDPOINTS_FILE=%d/endpoints.yaml",
	}
	for k, v := range want {
		if !slices.Contains(svc[k], v) {
			t.Errorf("[Service] %s = %v, want %s", k, svc[k], v)
		}
	}
	if d["Install"]["WantedBy"] == nil {
		t.Error("[Install] has no WantedBy")
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not found: only the directives were checked")
		return
	}
	// systemd-analyze checks that ExecStart exists: point it at this test binary.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "proxbus.service")
	unitText := strings.Replace(string(raw), "ExecStart=/usr/local/bin/proxbus", "ExecStart="+self, 1)
	if err := os.WriteFile(copyPath, []byte(unitText), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"verify", copyPath},
		// Exposure 0.0 (best) to 10.0; fail above 2.0.
		{"security", "--offline=yes", "--threshold=20", copyPath},
	} {
		out, err := exec.Command(analyze, args...).CombinedOutput()
		if err != nil {
			t.Errorf("systemd-analyze %s: %v\n%s", args[0], err, out)
		}
	}
}

// TestDockerfile checks the image recipe: a Go builder of the module's Go version, a static
// binary (CGO_ENABLED=0) on a distroless static base, a non-root user, and `proxbus serve`
// as the default command. (No Docker daemon here: the build itself is not run.)
func TestDockerfile(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if goVersion == nil {
		t.Fatal("go.mod has no go directive")
	}
	var froms []string
	var user, entrypoint, cmd string
	for line := range strings.Lines(string(raw)) {
		f := strings.Fields(line)
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			froms = append(froms, f[1])
		case "USER":
			user = f[1]
		case "ENTRYPOINT":
			entrypoint = strings.Join(f[1:], " ")
		case "CMD":
			cmd = strings.Join(f[1:], " ")
		}
	}
	text := string(raw)
	checks := []struct {
		name string
		ok   bool
	}{
		{"two stages", len(froms) == 2},
		{"builder golang:" + string(goVersion[1]), len(froms) > 0 && froms[0] == "golang:"+string(goVersion[1])},
		{"distroless static final stage", len(froms) == 2 && strings.HasPrefix(froms[1], "gcr.io/distroless/static")},
		{"CGO_ENABLED=0", strings.Contains(text, "CGO_ENABLED=0")},
		{"builds ./cmd/proxbus", strings.Contains(text, "./cmd/proxbus")},
		{"non-root user", strings.HasPrefix(user, "nonroot") || strings.HasPrefix(user, "65532")},
		{"entrypoint proxbus", entrypoint == `["/usr/local/bin/proxbus"]`},
		{"default command serve", cmd == `["serve"]`},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("Dockerfile: %s: not so (FROM %v, USER %q, ENTRYPOINT %s, CMD %s)", c.name, froms, user, entrypoint, cmd)
		}
	}
}
