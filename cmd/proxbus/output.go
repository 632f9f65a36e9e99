package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/proxbus/proxbus/internal/buildinfo"
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
	_, err = fmt.Fprintf(w, "%s\n", jsonTerminalSafe(b))
	return err
}

// terminalUnsafe reports whether r may not reach a terminal as it is: a C0 control (tab and
// newline aside), DEL, a C1 control (0x9b is an 8-bit CSI) or a bidirectional formatting
// character (which can make text read differently from what it is).
func terminalUnsafe(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
		return true
	case r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
		return true
	}
	return false
}

// terminalText returns s fit to print on an operator's terminal: every character that
// [terminalUnsafe] refuses, and with singleLine also newline and tab, is shown as a Go
// escape (\x1b, \u202e), and each byte of invalid UTF-8 as \xNN, so a message can neither
// move the cursor, recolour the screen nor disguise itself.
func terminalText(s string, singleLine bool) string {
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case terminalUnsafe(r) || singleLine && (r == '\n' || r == '\t'):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}

// jsonTerminalSafe escapes the C1 and bidirectional formatting characters that
// encoding/json writes as they are ([terminalUnsafe]; it escapes the C0 ones itself). They
// can only sit inside JSON strings, where \uXXXX is their JSON spelling.
func jsonTerminalSafe(b []byte) []byte {
	if !bytes.ContainsFunc(b, func(r rune) bool { return r >= 0x80 && terminalUnsafe(r) }) {
		return b
	}
	var out bytes.Buffer
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r >= 0x80 && terminalUnsafe(r) {
			fmt.Fprintf(&out, `\u%04x`, r)
		} else {
			out.Write(b[:n])
		}
		b = b[n:]
	}
	return out.Bytes()
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
	Commit  string `json:"commit,omitempty"`
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
		bi := buildinfo.Read()
		return writeJSONLine(e.stdout, versionInfo{Version: bi.Version, Commit: bi.Commit, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH})
	}
	_, err = fmt.Fprintln(e.stdout, "proxbus", versionString())
	return err
}
