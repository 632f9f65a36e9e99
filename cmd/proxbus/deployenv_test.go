package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// deployEnvSetting matches a PROXBUS_* variable being set in a manifest: `NAME:` (a YAML
// map), `- name: NAME` (a Kubernetes env list), `NAME=` (an environment file, systemd's
// Environment=, a Dockerfile's ENV).
var deployEnvSetting = regexp.MustCompile(`(?m)(?:^|[\s"'=-])(?:name:\s*)?(PROXBUS_[A-Z0-9_]+)\s*(?:[:=]|$)`)

// deploySecretEnv matches an endpoints file's token_secret_env: a variable the endpoints
// read, not a flag's.
var deploySecretEnv = regexp.MustCompile(`token_secret_env:\s*(PROXBUS_[A-Z0-9_]+)`)

// TestDeployEnvIsRead pins that every PROXBUS_* variable the manifests of deploy/ set is one
// proxbus reads (a flag's, or an endpoint's token_secret_env): a misspelt or retired one
// would be ignored silently by serve.
func TestDeployEnvIsRead(t *testing.T) {
	t.Parallel()
	_, e, err := parseCLI(t, nil, "version")
	if err != nil {
		t.Fatal(err)
	}
	set := map[string][]string{} // variable → files that set it
	secrets := map[string]bool{}
	err = filepath.WalkDir("../../deploy", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, ".go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range deploySecretEnv.FindAllStringSubmatch(string(b), -1) {
			secrets[m[1]] = true
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			for _, m := range deployEnvSetting.FindAllStringSubmatch(line, -1) {
				set[m[1]] = append(set[m[1]], path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(set) < 10 {
		t.Fatalf("found only %d variables set in deploy/ (%v): the patterns no longer match the manifests", len(set), set)
	}
	for name, files := range set {
		if !e.known[name] && !secrets[name] {
			t.Errorf("%s is set in %s but proxbus reads no such variable", name, strings.Join(files, ", "))
		}
	}
}
