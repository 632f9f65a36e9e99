package proxmox_test

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/proxbus/proxbus/internal/testenv"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// schemaNode is one node of the PVE API schema tree (apidoc.json).
type schemaNode struct {
	Path     string                `json:"path"`
	Children []schemaNode          `json:"children"`
	Info     map[string]schemaInfo `json:"info"`
}

type schemaInfo struct {
	Parameters struct {
		Properties map[string]json.RawMessage `json:"properties"`
	} `json:"parameters"`
}

// TestUsedAPIMatchesSchema pins proxmox.UsedAPI against the published PVE 9.2 API schema:
// every method exists at its path and every parameter proxbus sends (and every path
// parameter) is declared for that method.
func TestUsedAPIMatchesSchema(t *testing.T) {
	t.Parallel()
	data := testenv.SharedContract(t, "pve", "pve-9.2-apidoc.json")
	var roots []schemaNode
	if err := json.Unmarshal(data, &roots); err != nil {
		t.Fatalf("decode schema: %v", err)
	}
	index := map[string]schemaNode{}
	var walk func(n schemaNode)
	walk = func(n schemaNode) {
		index[n.Path] = n
		for _, c := range n.Children {
			walk(c)
		}
	}
	for _, r := range roots {
		walk(r)
	}
	pathParam := regexp.MustCompile(`\{([^}]+)\}`)
	used := proxmox.UsedAPI()
	if len(used) == 0 {
		t.Fatal("UsedAPI is empty")
	}
	for _, use := range used {
		node, ok := index[use.Path]
		if !ok {
			t.Errorf("%s %s: path not in the schema", use.Method, use.Path)
			continue
		}
		info, ok := node.Info[use.Method]
		if !ok {
			t.Errorf("%s %s: method not in the schema", use.Method, use.Path)
			continue
		}
		for _, p := range use.Params {
			if _, ok := info.Parameters.Properties[p]; !ok {
				t.Errorf("%s %s: parameter %q not declared", use.Method, use.Path, p)
			}
		}
		for _, m := range pathParam.FindAllStringSubmatch(use.Path, -1) {
			if _, ok := info.Parameters.Properties[m[1]]; !ok {
				t.Errorf("%s %s: path parameter %q not declared", use.Method, use.Path, m[1])
			}
		}
	}
	// UsedAPI is a fresh slice: changing it does not change the next call.
	used[0].Path = "/changed"
	if proxmox.UsedAPI()[0].Path == "/changed" {
		t.Error("UsedAPI returned shared state")
	}
}
