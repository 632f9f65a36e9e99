// Command clientgen writes package client's typed inputs from docs/asyncapi.yaml; `go generate
// ./client` runs it:
//
//	go run ./internal/clientgen/cmd/clientgen -asyncapi docs/asyncapi.yaml -out client/inputs_gen.go
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/proxbus/proxbus/internal/clientgen"
)

func main() {
	in := flag.String("asyncapi", "docs/asyncapi.yaml", "the AsyncAPI document")
	out := flag.String("out", "client/inputs_gen.go", "the Go file to write")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "clientgen:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	raw, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	doc, err := clientgen.Load(raw)
	if err != nil {
		return err
	}
	src, err := clientgen.Generate(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(out, src, 0o644)
}
