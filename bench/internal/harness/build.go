package harness

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// BuildProxbus compiles the proxbus binary to out. It builds in the product's own module (the
// benchmarks' module requires it through a replace), so the binary has exactly the product's
// dependencies and versions; output of a failed build is in the error.
func BuildProxbus(ctx context.Context, out string) error {
	dir, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/proxbus/proxbus").Output()
	if err != nil {
		return fmt.Errorf("find the proxbus module: %w", err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/proxbus")
	cmd.Dir = strings.TrimSpace(string(dir))
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/proxbus in %s: %w\n%s", cmd.Dir, err, buf.Bytes())
	}
	return nil
}
