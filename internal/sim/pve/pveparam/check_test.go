package pveparam_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/internal/sim/pve/pveparam"
)

// checkCase is one request: want maps each parameter PVE refuses to the start of its
// message; nil when PVE accepts the request.
type checkCase struct {
	name         string
	method, path string            // the schema path
	pathParams   map[string]string // as the URL carries them
	body         string            // URL-encoded
	query        string
	json         bool // body is JSON
	want         map[string]string
}

func TestCheck(t *testing.T) {
	t.Parallel()
	guest := map[string]string{"node": "pve1", "vmid": "100"}
	snap := map[string]string{"node": "pve1", "vmid": "100", "snapname": "snap-1"}
	const create = "/nodes/{node}/qemu"
	const config = "/nodes/{node}/qemu/{vmid}/config"
	node := map[string]string{"node": "pve1"}
	cases := []checkCase{
		{name: "boolean 1", method: "GET", path: config, pathParams: guest, query: "current=1"},
		{name: "boolean 0", method: "GET", path: config, pathParams: guest, query: "current=0"},
		{name: "boolean true refused", method: "GET", path: config, pathParams: guest, query: "current=true",
			want: map[string]string{"current": "type check ('boolean') failed - got 'true'"}},
		{name: "boolean yes refused", method: "POST", path: "/nodes/{node}/qemu/{vmid}/snapshot", pathParams: guest, body: "snapname=s1&vmstate=yes",
			want: map[string]string{"vmstate": "type check ('boolean') failed - got 'yes'"}},
		{name: "JSON boolean", method: "POST", path: "/nodes/{node}/qemu/{vmid}/snapshot", pathParams: guest, json: true, body: `{"snapname":"s1","vmstate":true}`},
		{name: "JSON boolean for a string", method: "POST", path: "/nodes/{node}/qemu/{vmid}/snapshot", pathParams: guest, json: true, body: `{"snapname":true}`,
			want: map[string]string{"snapname": "type check ('string') failed - got JSON::PP::Boolean"}},
		{name: "vmid 0100", method: "POST", path: "/nodes/{node}/qemu/{vmid}/status/start", pathParams: map[string]string{"node": "pve1", "vmid": "0100"},
			want: map[string]string{"vmid": "invalid format - value does not look like a valid VM ID"}},
		{name: "vmid +100", method: "POST", path: "/nodes/{node}/qemu/{vmid}/status/start", pathParams: map[string]string{"node": "pve1", "vmid": "+100"},
			want: map[string]string{"vmid": "invalid format - value does not look like a valid VM ID"}},
		{name: "vmid 99", method: "POST", path: create, pathParams: node, body: "vmid=99",
			want: map[string]string{"vmid": "invalid format - value does not look like a valid VM ID"}},
		{name: "vmid missing", method: "POST", path: create, pathParams: node, body: "name=web",
			want: map[string]string{"vmid": "property is missing and it is not optional"}},
		{name: "empty value is absent", method: "POST", path: create, pathParams: node, body: "vmid=",
			want: map[string]string{"vmid": "property is missing and it is not optional"}},
		{name: "empty optional value is absent", method: "POST", path: create, pathParams: node, body: "vmid=100&name=&cores="},
		{name: "snapshot name with dash", method: "DELETE", path: "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}", pathParams: snap},
		{name: "snapshot name of one character", method: "POST", path: "/nodes/{node}/lxc/{vmid}/snapshot", pathParams: guest, body: "snapname=a",
			want: map[string]string{"snapname": "invalid format - invalid configuration ID 'a'"}},
		{name: "snapshot name in the rollback path", method: "POST", path: "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}/rollback",
			pathParams: map[string]string{"node": "pve1", "vmid": "100", "snapname": "1st"},
			want:       map[string]string{"snapname": "invalid format - invalid configuration ID '1st'"}},
		{name: "snapshot name of 41 characters", method: "POST", path: "/nodes/{node}/qemu/{vmid}/snapshot", pathParams: guest, body: "snapname=" + strings.Repeat("a", 41),
			want: map[string]string{"snapname": "value may only be 40 characters long"}},
		{name: "length in characters", method: "POST", path: "/storage", body: "storage=pbs1&type=pbs&password=" + strings.Repeat("%C3%A9", 256)},
		{name: "257 characters", method: "POST", path: "/storage", body: "storage=pbs1&type=pbs&password=" + strings.Repeat("%C3%A9", 257),
			want: map[string]string{"password": "value may only be 256 characters long"}},
		{name: "net31", method: "POST", path: create, pathParams: node, body: form("vmid", "100", "net31", "virtio,bridge=vmbr0")},
		{name: "indexes out of range", method: "POST", path: create, pathParams: node,
			body: form("vmid", "100", "net32", "virtio", "scsi31", "local:1", "ide4", "none", "virtio16", "local:1", "sata6", "local:1", "serial4", "socket", "ipconfig32", "ip=dhcp", "net01", "virtio"),
			want: map[string]string{"net32": "property is not defined in schema", "scsi31": "property is not defined in schema",
				"ide4": "property is not defined in schema", "virtio16": "property is not defined in schema",
				"sata6": "property is not defined in schema", "serial4": "property is not defined in schema",
				"ipconfig32": "property is not defined in schema", "net01": "property is not defined in schema"}},
		{name: "net options", method: "POST", path: create, pathParams: node,
			body: form("vmid", "100", "net0", "virtio,bridge=vmbr0,mtu=0", "net1", "virtio,queues=65", "net2", "virtio,rate=-1", "net3", "e1000=BC:24:11:00:00:01,tag=4095"),
			want: map[string]string{"net0": "invalid format - format error\nnet0.mtu: value must have a minimum value of 1",
				"net1": "invalid format - format error\nnet1.queues: value must have a maximum value of 64",
				"net2": "invalid format - format error\nnet2.rate: value must have a minimum value of 0",
				"net3": "invalid format - format error\nnet3.tag: value must have a maximum value of 4094"}},
		{name: "net with model as key", method: "POST", path: create, pathParams: node, body: form("vmid", "100", "net0", "virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1")},
		{name: "net model twice", method: "POST", path: create, pathParams: node, body: form("vmid", "100", "net0", "virtio,e1000=BC:24:11:00:00:01"),
			want: map[string]string{"net0": "invalid format - key alias 'model' is already defined"}},
		{name: "disk", method: "POST", path: create, pathParams: node,
			body: form("vmid", "100", "scsi0", "local-lvm:0,import-from=local:import/noble.qcow2,discard=on,ssd=1", "ide2", "local-lvm:cloudinit", "efidisk0", "local-lvm:1,efitype=4m,pre-enrolled-keys=1")},
		{name: "disk without volume", method: "POST", path: create, pathParams: node, body: form("vmid", "100", "scsi0", "discard=on"),
			want: map[string]string{"scsi0": "invalid format - format error\nscsi0.file: property is missing and it is not optional"}},
		{name: "create options", method: "POST", path: create, pathParams: node,
			body: form("vmid", "100", "name", "web-1", "memory", "2048", "balloon", "0", "cores", "2", "sockets", "1", "cpu", "x86-64-v2-AES,flags=+aes", "agent", "enabled=1,fstrim_cloned_disks=1", "machine", "q35", "boot", "order=scsi0;ide2;net0", "vga", "serial0", "ostype", "l26", "tags", "prod;web", "serial0", "socket", "ipconfig0", "ip=192.0.2.10/24,gw=192.0.2.1", "nameserver", "192.0.2.53 2001:db8::53", "sshkeys", "ssh-ed25519%20AAAA", "citype", "nocloud")},
		{name: "create refusals", method: "POST", path: create, pathParams: node,
			body: "vmid=100&name=web_1&memory=8&cores=0&agent=enabled%3Dmaybe&ostype=linux&tags=a/b&serial0=/tmp/x&ipconfig0=gw%3D192.0.2.1&nameserver=%5Bfe80::1%5D&sshkeys=ssh-ed25519+AAAA&description=" + strings.Repeat("x", 8193),
			want: map[string]string{"name": "invalid format - value does not look like a valid DNS name",
				"memory":      "invalid format - format error\nmemory.current: value must have a minimum value of 16",
				"cores":       "value must have a minimum value of 1",
				"agent":       "invalid format - format error\nagent.enabled: type check ('boolean') failed - got 'maybe'",
				"ostype":      "value 'linux' does not have a value in the enumeration 'other, wxp",
				"tags":        "invalid format - invalid characters in tag",
				"serial0":     "value does not match the regex pattern",
				"ipconfig0":   "invalid format - format error\nipconfig0.ip: missing property required by 'ipconfig0.gw'",
				"nameserver":  "invalid format - value does not look like a valid address: [fe80::1]",
				"sshkeys":     "invalid format - invalid urlencoded string: ssh-ed25519 AAAA",
				"description": "value may only be 8192 characters long"}},
		{name: "prune-backups repeated key", method: "POST", path: "/storage", body: form("storage", "pbs1", "type", "pbs", "prune-backups", "keep-last=1,keep-last=2"),
			want: map[string]string{"prune-backups": "invalid format - duplicate key in comma-separated list property: keep-last"}},
		{name: "server in brackets", method: "POST", path: "/storage", body: "storage=pbs1&type=pbs&server=%5Bfe80::1%5D",
			want: map[string]string{"server": "invalid format - value does not look like a valid server name or IP address"}},
		{name: "repeated key of a list format is joined", method: "POST", path: "/storage", body: "storage=pbs1&type=pbs&nodes=pve1&nodes=pve2"},
		{name: "repeated key of a string", method: "POST", path: "/storage", body: "storage=pbs1&type=pbs&datastore=a&datastore=b",
			want: map[string]string{"datastore": "type check ('string') failed - got ARRAY"}},
		{name: "query overrides body", method: "POST", path: "/storage", body: "storage=pbs1&type=nope", query: "type=pbs"},
		{name: "requires", method: "POST", path: "/nodes/{node}/storage/{storage}/download-url", pathParams: map[string]string{"node": "pve1", "storage": "local"},
			body: "content=import&filename=x.qcow2&url=https://example.com/x.qcow2&checksum=abc",
			want: map[string]string{"checksum-algorithm": "missing property required by 'checksum'"}},
		{name: "vzdump notes without storage", method: "POST", path: "/nodes/{node}/vzdump", pathParams: node, body: "vmid=100&notes-template=x&protected=1",
			want: map[string]string{"storage": "missing property required by"}},
		{name: "undeclared", method: "POST", path: "/nodes/{node}/status", pathParams: node, body: "command=reboot&force=1",
			want: map[string]string{"force": "property is not defined in schema and the schema does not allow additional properties"}},
		{name: "undeclared even without a value", method: "POST", path: "/nodes/{node}/status", pathParams: node, body: "command=reboot&force=",
			want: map[string]string{"force": "property is not defined in schema"}},
		{name: "an empty pair is an undefined parameter without a name", method: "GET", path: "/cluster/resources", query: "type=vm&&",
			want: map[string]string{}},
		{name: "an empty pair inside", method: "GET", path: "/cluster/resources", query: "type=vm&&x",
			want: map[string]string{"_root": "property is not defined in schema", "x": "property is not defined in schema"}},
		{name: "_dc is dropped", method: "GET", path: "/cluster/resources", query: "type=vm&_dc=123"},
		{name: "integer with sign", method: "GET", path: "/nodes/{node}/tasks/{upid}/log", pathParams: map[string]string{"node": "pve1", "upid": "x"}, query: "start=%2B5&limit=-1",
			want: map[string]string{"limit": "value must have a minimum value of 0"}},
		{name: "resize size", method: "PUT", path: "/nodes/{node}/qemu/{vmid}/resize", pathParams: guest, body: "disk=scsi0&size=%2B10G"},
		{name: "resize size refused", method: "PUT", path: "/nodes/{node}/qemu/{vmid}/resize", pathParams: guest, body: "disk=scsi31&size=10GB",
			want: map[string]string{"disk": "value 'scsi31' does not have a value in the enumeration", "size": "value does not match the regex pattern"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, ok := pveparam.Lookup(tc.method, tc.path)
			if !ok {
				t.Fatalf("no schema for %s %s", tc.method, tc.path)
			}
			ct := "application/x-www-form-urlencoded"
			if tc.json {
				ct = "application/json"
			}
			params, err := pveparam.Decode(tc.method, ct, tc.query, []byte(tc.body))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			for k, v := range tc.pathParams {
				params.Set(k, v)
			}
			got := m.Check(params)
			for k, want := range tc.want {
				if !strings.HasPrefix(got[k], want) {
					t.Errorf("%s: error %q, want %q…", k, got[k], want)
				}
			}
			for k, msg := range got {
				if _, expected := tc.want[k]; !expected {
					t.Errorf("%s: unexpected error %q", k, msg)
				}
			}
		})
	}
}

// form URL-encodes name, value pairs in order, as proxbus's client does.
func form(kv ...string) string {
	parts := make([]string, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		parts = append(parts, url.QueryEscape(kv[i])+"="+url.QueryEscape(kv[i+1]))
	}
	return strings.Join(parts, "&")
}

// TestRawEqualsSign: an "=" PVE reads unencoded ends the value (decode_urlencoded keeps the
// second field of split /=/), so a property string sent raw is cut short.
func TestRawEqualsSign(t *testing.T) {
	t.Parallel()
	got := pveparam.DecodeURLEncoded("net0=virtio,bridge=vmbr0")["net0"]
	if got.Text != "virtio,bridge" {
		t.Fatalf("net0 = %q, want %q", got.Text, "virtio,bridge")
	}
}

func TestDecodeJSONNumbers(t *testing.T) {
	t.Parallel()
	got, err := pveparam.Decode("POST", "application/json", "", []byte(`{"a":100,"b":1.50,"c":1e2,"d":-3,"e":0.1}`))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"a": "100", "b": "1.5", "c": "100", "d": "-3", "e": "0.1"} {
		if got[k].Text != want {
			t.Errorf("%s = %q, want %q as Perl prints it", k, got[k].Text, want)
		}
	}
}

func TestDecodeURLEncoded(t *testing.T) {
	t.Parallel()
	got := pveparam.DecodeURLEncoded("a=1&b=&c&d=x=y;e=%C3%A9+f&g=1&g=2&h=1&h&i==v&j=%C3%28%FF")
	want := map[string]pveparam.Value{
		"a": {Kind: pveparam.Scalar, Text: "1"},
		"b": {Kind: pveparam.Undefined},
		"c": {Kind: pveparam.Undefined},
		"d": {Kind: pveparam.Scalar, Text: "x"},
		"e": {Kind: pveparam.Scalar, Text: "é f"},
		"g": {Kind: pveparam.Array, Items: []string{"1", "2"}},
		"h": {Kind: pveparam.Undefined},
		"i": {Kind: pveparam.Scalar, Text: ""},
		"j": {Kind: pveparam.Scalar, Text: "\uFFFD(\uFFFD"}, // each malformed byte is one U+FFFD
	}
	for k, w := range want {
		g := got[k]
		if g.Kind != w.Kind || g.Text != w.Text || strings.Join(g.Items, ",") != strings.Join(w.Items, ",") {
			t.Errorf("%s = %+v, want %+v", k, g, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d parameters, want %d: %v", len(got), len(want), got)
	}
}
