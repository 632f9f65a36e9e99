package proxmox_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// benchStorageCount is the number of storages in the GET /storage answer of the decode
// benchmarks (the pipeline benchmark's cluster has about this many).
const benchStorageCount = 100

// benchStorageJSON renders storage i as PVE would, with every JSON value kind: strings,
// numbers (integer and fraction), booleans, null, a nested object and array, a string with
// escapes and, on every tenth storage, a secret-named key PVE should never return.
func benchStorageJSON(i int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"storage":"pbs-%03d","type":"pbs","content":"backup","server":"10.0.%d.%d",`, i, i/250, i%250)
	fmt.Fprintf(&b, `"port":8007,"datastore":"store%d","namespace":"lab/team-%d","username":"backup@pbs!pve",`, i, i%7)
	b.WriteString(`"fingerprint":"ab:cd:ef:01:23:45:67:89:ab:cd:ef:01:23:45:67:89:ab:cd:ef:01:23:45:67:89:ab:cd:ef:01:23:45:67:89",`)
	fmt.Fprintf(&b, `"prune-backups":"keep-all=1","shared":1,"disable":%t,"nodes":null,"ratio":0.75,`, i%3 == 0)
	fmt.Fprintf(&b, `"digest":"%040x",`, i*7919)
	b.WriteString(`"comment":"line one\nsaid \"hi\" \u00e9t\u00e9",`)
	b.WriteString(`"options":{"keep":[1,2,{"x":"}"}],"mode":"a b"},"tags":["a","b"]`)
	if i%10 == 0 {
		b.WriteString(`,"password":"hunter22","api-token":"t0k3n"`)
	}
	b.WriteString("}")
	return b.String()
}

// benchBodies are the canned answers: GET /storage (the list) and GET /storage/{id}.
func benchBodies() (list, one []byte) {
	items := make([]string, benchStorageCount)
	for i := range items {
		items[i] = benchStorageJSON(i)
	}
	list = []byte(`{"data":[` + strings.Join(items, ",") + `]}`)
	one = []byte(`{"data":` + benchStorageJSON(10) + `}`)
	return list, one
}

// cannedTransport answers every request in memory: GET /api2/json/storage with list, any
// other path with one. It keeps the network out of the decode benchmarks.
type cannedTransport struct{ list, one []byte }

func (c cannedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	body := c.one
	if strings.HasSuffix(r.URL.Path, "/api2/json/storage") {
		body = c.list
	}
	return &http.Response{
		StatusCode:    http.StatusOK,
		Status:        "200 OK",
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": []string{"application/json;charset=UTF-8"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       r,
	}, nil
}

// benchClient is a client whose requests are answered by cannedTransport.
func benchClient(b *testing.B) *proxmox.Client {
	b.Helper()
	list, one := benchBodies()
	cfg := proxmox.EndpointConfig{
		ID: 1, Name: "bench", URLs: []string{"https://pve.invalid:8006"}, TokenID: "proxbus@pve!bench",
		Timeout: 5 * time.Second,
	}
	c, err := proxmox.NewClient(cfg, proxmox.Secret("bench-secret-0123456789"),
		proxmox.WithLogger(slog.New(slog.DiscardHandler)),
		proxmox.WithHTTPClient(&http.Client{Transport: cannedTransport{list: list, one: one}}))
	if err != nil {
		b.Fatalf("NewClient: %v", err)
	}
	return c
}

// BenchmarkStoragesDecode measures Client.Storages (GET /storage) on a 100-storage answer
// served from memory: go-proxmox's envelope handling, our decode and the redaction.
func BenchmarkStoragesDecode(b *testing.B) {
	c := benchClient(b)
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		got, err := c.Storages(ctx)
		if err != nil || len(got) != benchStorageCount {
			b.Fatalf("Storages = %d items, %v", len(got), err)
		}
	}
}

// BenchmarkStorageDecode measures Client.Storage (GET /storage/{id}), a single object.
func BenchmarkStorageDecode(b *testing.B) {
	c := benchClient(b)
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		got, err := c.Storage(ctx, "pbs-010")
		if err != nil || got["storage"] != "pbs-010" {
			b.Fatalf("Storage = %v, %v", got, err)
		}
	}
}
