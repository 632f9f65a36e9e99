package clientgen_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/internal/clientgen"
)

// TestGeneratedInputsAreCurrent: client/inputs_gen.go is what Generate makes of
// docs/asyncapi.yaml now; after a change to a verb's data schema, run go generate ./client.
func TestGeneratedInputsAreCurrent(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../docs/asyncapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := clientgen.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	want, err := clientgen.Generate(doc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../client/inputs_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("client/inputs_gen.go is stale: run go generate ./client")
	}
}

// TestGoNames: verbs and fields become Go names with Go's initialisms.
func TestGoNames(t *testing.T) {
	t.Parallel()
	doc, err := clientgen.Load([]byte(`
components:
  schemas:
    D:
      type: object
      required: [new_vmid]
      properties:
        new_vmid: {type: integer, minimum: 100}
        ipconfig0: {type: string}
        full_clone: {type: boolean, default: true}
        password: {type: string, writeOnly: true}
        data: {description: anything}
  messages:
    M:
      x-proxbus-verb: storage.pbs.create
      traits: [{$ref: '#/components/messageTraits/BinaryCommand'}]
      payload: {$ref: '#/components/schemas/D'}
`))
	if err != nil {
		t.Fatal(err)
	}
	src, err := clientgen.Generate(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"type StoragePBSCreate struct",
		"NewVMID int64 `json:\"new_vmid\"`",
		"IPConfig0 string `json:\"ipconfig0,omitempty\"`",
		"FullClone *bool `json:\"full_clone,omitempty\"`",
		"Password Secret `json:\"password,omitempty\"`",
		"Data json.RawMessage `json:\"data,omitempty\"`",
		`func (StoragePBSCreate) VerbName() string { return "storage.pbs.create" }`,
	} {
		if !bytes.Contains(src, []byte(want)) {
			t.Errorf("generated code lacks %q:\n%s", want, src)
		}
	}
}

// TestSamplesCoverEveryPath: the samples of a schema with its own properties and a choice of
// shapes hold the own properties in every sample and one branch's in each, so that together
// they name every path.
func TestSamplesCoverEveryPath(t *testing.T) {
	t.Parallel()
	doc, err := clientgen.Load([]byte(`
components:
  schemas:
    D:
      type: object
      required: [name]
      properties:
        name: {type: string}
        nics:
          type: array
          items:
            type: object
            properties: {index: {type: integer, minimum: 0}}
      oneOf:
        - {type: object, required: [cron], properties: {cron: {type: string}}}
        - {type: object, required: [every], properties: {every: {type: string, enum: [1h, 6h]}}}
  messages:
    M:
      x-proxbus-verb: schedule.add
      traits: [{$ref: '#/components/messageTraits/BinaryCommand'}]
      payload: {$ref: '#/components/schemas/D'}
`))
	if err != nil {
		t.Fatal(err)
	}
	verbs, err := doc.Verbs()
	if err != nil || len(verbs) != 1 {
		t.Fatalf("verbs %v, %v", verbs, err)
	}
	if got, want := strings.Join(doc.Paths(verbs[0]), " "), "cron every name nics nics.index"; got != want {
		t.Errorf("paths %q, want %q", got, want)
	}
	var got []string
	for _, s := range doc.Samples(verbs[0]) {
		got = append(got, string(s))
	}
	want := []string{`{"cron":"x","name":"x","nics":[{"index":0}]}`, `{"every":"1h","name":"x","nics":[{"index":0}]}`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("samples\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
