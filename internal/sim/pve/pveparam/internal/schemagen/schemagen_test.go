package schemagen

import (
	"errors"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/internal/proxmox"
)

const tinySchema = `[{"path":"/nodes","children":[{"path":"/nodes/{node}/qemu","info":{"POST":{"parameters":{"properties":{
 "node":{"type":"string","format":"pve-node"},
 "vmid":{"type":"integer","format":"pve-vmid","minimum":100,"maximum":999999999},
 "net[n]":{"type":"string","optional":1,"format":{"model":{"type":"string","default_key":1,"enum":["virtio","e1000"]},"mtu":{"type":"integer","optional":1,"minimum":1}}},
 "foo[n]":{"type":"string","optional":1},
 "name":{"type":"string","optional":1,"maxLength":64,"pattern":"[a-z]+"}}}}}}]}]`

func TestGenerate(t *testing.T) {
	t.Parallel()
	src, err := Generate([]byte(tinySchema), []proxmox.APIUse{{Method: "POST", Path: "/nodes/{node}/qemu", Params: []string{"vmid", "net[n]", "name"}}})
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	for _, want := range []string{
		`"POST /nodes/{node}/qemu": {`,
		`"node": {Type: "string", Format: "pve-node"}`,
		`"vmid": {Type: "integer", Format: "pve-vmid", Minimum: num(100), Maximum: num(999999999)}`,
		`"mtu":   {Type: "integer", Minimum: num(1), Optional: true}`,
		`"model": {Type: "string", Enum: []string{"virtio", "e1000"}, DefaultKey: true}`,
		`"name": {Type: "string", Pattern: "[a-z]+", MaxLength: 64, Optional: true}`,
		`Indexed: map[string]int{"net": 32}`,
	} {
		if !strings.Contains(string(src), want) {
			t.Errorf("generated table lacks %s:\n%s", want, src)
		}
	}
	if strings.Contains(string(src), "foo") {
		t.Error("a parameter UsedAPI does not list is in the table")
	}
	again, _ := Generate([]byte(tinySchema), []proxmox.APIUse{{Method: "POST", Path: "/nodes/{node}/qemu", Params: []string{"vmid", "net[n]", "name"}}})
	if string(again) != string(src) {
		t.Error("Generate is not deterministic")
	}
}

func TestGenerateRefuses(t *testing.T) {
	t.Parallel()
	for name, uses := range map[string][]proxmox.APIUse{
		"required parameter not listed": {{Method: "POST", Path: "/nodes/{node}/qemu", Params: []string{"name"}}},
		"unknown path":                  {{Method: "GET", Path: "/nope"}},
		"unknown method":                {{Method: "GET", Path: "/nodes/{node}/qemu"}},
		"undeclared parameter":          {{Method: "POST", Path: "/nodes/{node}/qemu", Params: []string{"vmid", "bar"}}},
		"index range unknown":           {{Method: "POST", Path: "/nodes/{node}/qemu", Params: []string{"vmid", "foo[n]"}}},
	} {
		if _, err := Generate([]byte(tinySchema), uses); !errors.Is(err, ErrSchema) {
			t.Errorf("%s: err = %v, want ErrSchema", name, err)
		}
	}
}
