// Command gen writes pveparam's table_gen.go from the PVE API schema for the methods of
// proxmox.UsedAPI. Run by `go generate` in internal/sim/pve/pveparam; where the schema is
// absent (a clone without ../shared) it says so and leaves the committed table alone.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"

	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/internal/sim/pve/pveparam/internal/schemagen"
)

func main() {
	schema := flag.String("schema", "", "path of the PVE API schema (pve-9.2-apidoc.json)")
	out := flag.String("out", "table_gen.go", "file to write")
	flag.Parse()
	if err := run(*schema, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(schema, out string) error {
	raw, err := os.ReadFile(schema)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(os.Stderr, "gen: %s is absent (the published contracts live in <repo root>/../shared/contracts/): %s left unchanged\n", schema, out)
		return nil
	}
	if err != nil {
		return fmt.Errorf("read schema: %w", err)
	}
	src, err := schemagen.Generate(raw, proxmox.UsedAPI())
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, src, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
}
