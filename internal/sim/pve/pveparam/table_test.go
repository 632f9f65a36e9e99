package pveparam

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/internal/sim/pve/pveparam/internal/schemagen"
	"github.com/proxbus/proxbus/internal/testenv"
)

// TestTableIsCurrent regenerates the table from the PVE schema and proxmox.UsedAPI and
// fails when table_gen.go differs: run `go generate ./internal/sim/pve/pveparam`.
func TestTableIsCurrent(t *testing.T) {
	t.Parallel()
	schema := testenv.SharedContract(t, "pve", "pve-9.2-apidoc.json")
	want, err := schemagen.Generate(schema, proxmox.UsedAPI())
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	got, err := os.ReadFile("table_gen.go")
	if err != nil {
		t.Fatalf("read table_gen.go: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("table_gen.go is stale: run `go generate ./internal/sim/pve/pveparam` (with ../shared/contracts present) and commit the result")
	}
}

// TestTableCoversUsedAPI: every method and parameter proxbus uses has a schema.
func TestTableCoversUsedAPI(t *testing.T) {
	t.Parallel()
	pathParam := regexp.MustCompile(`\{([^}]+)\}`)
	for _, u := range proxmox.UsedAPI() {
		m, ok := Lookup(u.Method, u.Path)
		if !ok {
			t.Errorf("%s %s: no schema", u.Method, u.Path)
			continue
		}
		names := append([]string(nil), u.Params...)
		for _, p := range pathParam.FindAllStringSubmatch(u.Path, -1) {
			names = append(names, p[1])
		}
		for _, n := range names {
			if _, ok := m.Params[n]; !ok {
				t.Errorf("%s %s: no schema for %q", u.Method, u.Path, n)
			}
		}
	}
}

// TestTableFormatsAndPatterns: every format the table names is ported and every pattern
// compiles, so no parameter fails for a reason PVE does not have.
func TestTableFormatsAndPatterns(t *testing.T) {
	t.Parallel()
	var walk func(where string, s Schema)
	walk = func(where string, s Schema) {
		if s.Format != "" {
			if err := checkFormat(s.Format, "", where); err != nil && strings.Contains(err.Error(), "undefined format") {
				t.Errorf("%s: format %q is not ported", where, s.Format)
			}
		}
		if s.Pattern != "" {
			if _, err := compilePerl(s.Pattern); err != nil {
				t.Errorf("%s: pattern %q: %v", where, s.Pattern, err)
			}
		}
		for k, sub := range s.Properties {
			walk(where+"."+k, sub)
		}
	}
	for key, m := range methods {
		for name, s := range m.Params {
			walk(key+" "+name, s)
		}
	}
	for _, name := range []string{"prune-backups", "pve-qm-ipconfig", "pve-qm-boot", "pve-vm-cpu-conf"} {
		h, _ := hashFormat(name)
		for k, s := range h.props {
			walk(name+"."+k, s)
		}
	}
}
