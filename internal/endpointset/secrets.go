package endpointset

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// SecretVar is the variable that holds endpoint id's token secret, in the secrets file or
// the environment: PROXBUS_ENDPOINT_<ID>_TOKEN_SECRET.
func SecretVar(id int64) string {
	return "PROXBUS_ENDPOINT_" + strconv.FormatInt(id, 10) + "_TOKEN_SECRET"
}

// IsSecretVar reports whether name has the form of [SecretVar]'s names.
func IsSecretVar(name string) bool {
	id, ok := strings.CutPrefix(name, "PROXBUS_ENDPOINT_")
	if !ok {
		return false
	}
	id, ok = strings.CutSuffix(id, "_TOKEN_SECRET")
	n, err := strconv.ParseInt(id, 10, 64)
	return ok && err == nil && n > 0 && strconv.FormatInt(n, 10) == id
}

// secretsFile is one read of the secrets file.
type secretsFile struct {
	path   string
	values map[string]string
	err    error // the file could not be read (never its content)
	bad    []int // lines that are not KEY=VALUE
}

// readSecrets reads path: KEY=VALUE lines, blank lines and lines starting with # ignored, an
// optional "export " before the key, the value trimmed and stripped of one pair of matching
// quotes. Only the keys of [SecretVar]'s form are kept.
func readSecrets(path string) secretsFile {
	f := secretsFile{path: path, values: map[string]string{}}
	if path == "" {
		return f
	}
	data, err := os.ReadFile(path)
	if err != nil {
		// The *PathError names the file and the cause, never the content.
		f.err = err
		return f
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			f.bad = append(f.bad, n)
			continue
		}
		if IsSecretVar(key) {
			f.values[key] = unquote(strings.TrimSpace(value))
		}
	}
	if err := sc.Err(); err != nil {
		f.err = fmt.Errorf("read %s: %w", path, err)
	}
	return f
}

// unquote strips one pair of matching surrounding quotes.
func unquote(v string) string {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1]
	}
	return v
}

// secret is endpoint id's token secret: from the file, else from getenv. missing says, when
// there is none, where it was looked for (never a value).
func (f secretsFile) secret(id int64, getenv func(string) string) (value string, missing string) {
	name := SecretVar(id)
	if v := strings.TrimSpace(f.values[name]); v != "" {
		return v, ""
	}
	if v := strings.TrimSpace(getenv(name)); v != "" {
		return v, ""
	}
	// The texts put no ":" or "=" after a word naming a secret: redact.Text would take what
	// follows for a value.
	switch {
	case f.path == "":
		return "", fmt.Sprintf("its token secret is missing; set %s in the environment, or in a secrets file (--endpoint-secrets-file)", name)
	case f.err != nil:
		return "", fmt.Sprintf("its token secret is missing; %s is not in the environment and the secrets file %s cannot be read (%s)", name, f.path, cause(f.err))
	}
	return "", fmt.Sprintf("its token secret is missing; set %s in %s", name, f.path)
}

// cause is what went wrong reading a file, without the path (named by the caller).
func cause(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
