package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"

	"golang.org/x/term"
)

// outputFormat is how a client command prints what it found: human lines (text, the default)
// or machine-readable JSON (one document, or one document per line for lists and tails).
type outputFormat string

const (
	outputText outputFormat = "text"
	outputJSON outputFormat = "json"
)

// outputOf validates the --output value.
func outputOf(v *string) (outputFormat, error) {
	switch f := outputFormat(*v); f {
	case outputText, outputJSON:
		return f, nil
	default:
		return "", fmt.Errorf("%w: --output must be text or json (got %q)", errUsage, *v)
	}
}

// writeJSONLine writes v as one compact JSON document and a newline.
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// rawOrString keeps b as JSON when it is valid JSON, else as a JSON string.
func rawOrString(b []byte) any {
	if len(b) > 0 && json.Valid(b) {
		return json.RawMessage(b)
	}
	return string(b)
}

// isTerminal reports whether w is a terminal (a character device on an *os.File).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// versionInfo is `proxbus version --output json`.
type versionInfo struct {
	Version string `json:"version"`
	Go      string `json:"go"`
	OS      string `json:"os"`
	Arch    string `json:"arch"`
}

// versionCmd is `proxbus version`: `proxbus <version>`, or a JSON document.
type versionCmd struct{ outputFlags }

// Run prints the version.
func (c *versionCmd) Run(e *cliEnv) error {
	format, err := outputOf(&c.Output)
	if err != nil {
		return err
	}
	if format == outputJSON {
		return writeJSONLine(e.stdout, versionInfo{Version: versionString(), Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH})
	}
	_, err = fmt.Fprintln(e.stdout, "proxbus", versionString())
	return err
}
