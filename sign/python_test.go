package sign_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/sign"
)

// TestPythonExample runs docs/producers.md's Python signing example with python3 and checks
// that it signs exactly as this package does: same producer key, same signature, over the
// same canonical form. It is skipped where python3 or its cryptography package is missing.
func TestPythonExample(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/producers.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```python\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/producers.md has no python block")
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the Python example is not checked")
	}
	if err := exec.Command(python, "-c", "import cryptography").Run(); err != nil {
		t.Skip("python3 has no cryptography package: the Python example is not checked")
	}
	c := sampleCommand()
	c.Actor = "sync:alice ü" // a value beyond ASCII: lengths are in bytes
	signer, err := sign.NewSigner([]byte(testSeed))
	if err != nil {
		t.Fatal(err)
	}
	want, err := signer.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	attrs, _ := json.Marshal(map[string]string{"id": c.ID, "source": c.Source, "type": c.Type, "time": "2026-12-02T03:04:05Z",
		"endpointid": "7", "idempotencykey": c.IdempotencyKey, "actor": c.Actor})
	driver := string(m[1]) + `
import json, sys
h = sign_command(sys.argv[1], json.loads(sys.argv[2]), sys.argv[3].encode())
print(h["ce-producer"])
print(h["ce-signature"])
`
	script := filepath.Join(t.TempDir(), "example.py")
	if err := os.WriteFile(script, []byte(driver), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(python, script, testSeed, string(attrs), string(c.Data))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, stderr.String())
	}
	lines := strings.Fields(string(out))
	if len(lines) != 2 || lines[0] != want.Producer || lines[1] != want.Signature {
		t.Errorf("the Python example signs as\n%v\nwant\n[%s %s]", lines, want.Producer, want.Signature)
	}
}

// TestDocumentedCanonicalForm checks docs/producers.md's example of the canonical form
// against Canonical, byte for byte.
func TestDocumentedCanonicalForm(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/producers.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```\n(proxbus-command-signature-v1\n.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/producers.md has no example of the canonical form")
	}
	if got := string(sign.Canonical(sampleCommand())); got != string(m[1]) {
		t.Errorf("documented canonical form\n%q\nCanonical\n%q", m[1], got)
	}
}
