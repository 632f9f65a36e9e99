package nodeshell

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// hashers are the checksum tools the shell knows.
var hashers = map[string]func() hash.Hash{
	"md5sum": md5.New, "sha1sum": sha1.New, "sha224sum": sha256.New224, "sha256sum": sha256.New,
	"sha384sum": sha512.New384, "sha512sum": sha512.New,
}

// run executes one command line, writing to stdout and stderr, and returns its exit status.
func (s *Server) run(line string, stdout, stderr io.Writer) int {
	argv, err := splitWords(line)
	s.mu.Lock()
	s.commands = append(s.commands, line)
	var f *fault
	var faulty bool
	if err == nil && len(argv) > 0 {
		f, faulty = s.takeFault(argv[0])
	}
	s.mu.Unlock()
	s.log.Debug("nodeshell: command", "argv0", first(argv))
	if err != nil {
		fmt.Fprintf(stderr, "bash: -c: %v\n", err)
		return 2
	}
	if len(argv) == 0 {
		return 0
	}
	if faulty {
		fmt.Fprintln(stderr, f.stderr)
		return f.exit
	}
	name, args := argv[0], argv[1:]
	switch {
	case name == "mkdir":
		return s.mkdir(args, stderr)
	case hashers[name] != nil:
		return s.checksum(name, args, stdout, stderr)
	case name == "rm":
		return s.rm(args, stderr)
	case name == "wget":
		return s.wget(args, stderr)
	case name == "mv":
		return s.mv(args, stderr)
	}
	fmt.Fprintf(stderr, "bash: line 1: %s: command not found\n", name)
	return 127
}

func first(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	return argv[0]
}

// operands splits args into the options it allows (flags without values) and operands;
// "--" ends the options. An unknown option → an error naming it.
func operands(args []string, allowed string) ([]string, error) {
	var out []string
	opts := true
	for _, a := range args {
		switch {
		case opts && a == "--":
			opts = false
		case opts && strings.HasPrefix(a, "-") && len(a) > 1:
			for _, r := range a[1:] {
				if !strings.ContainsRune(allowed, r) {
					return nil, fmt.Errorf("invalid option -- '%c'", r)
				}
			}
		default:
			out = append(out, a)
		}
	}
	return out, nil
}

// local maps an absolute node path into the root; relative paths are refused.
func (s *Server) local(p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", errors.New("relative paths are not simulated")
	}
	return filepath.Join(s.root, filepath.FromSlash(filepath.Clean(p))), nil
}

func (s *Server) mkdir(args []string, stderr io.Writer) int {
	dirs, err := operands(args, "p")
	if err != nil || len(dirs) == 0 {
		fmt.Fprintf(stderr, "mkdir: %s\n", orText(err, "missing operand"))
		return 1
	}
	for _, d := range dirs {
		lp, err := s.local(d)
		if err == nil {
			err = os.MkdirAll(lp, 0o755)
		}
		if err != nil {
			fmt.Fprintf(stderr, "mkdir: cannot create directory '%s': %v\n", d, err)
			return 1
		}
	}
	return 0
}

func (s *Server) checksum(tool string, args []string, stdout, stderr io.Writer) int {
	files, err := operands(args, "")
	if err != nil || len(files) == 0 {
		fmt.Fprintf(stderr, "%s: %s\n", tool, orText(err, "missing operand"))
		return 1
	}
	code := 0
	for _, f := range files {
		sum, err := s.hashFile(tool, f)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %s: %s\n", tool, f, errText(err))
			code = 1
			continue
		}
		fmt.Fprintf(stdout, "%s  %s\n", sum, f)
	}
	return code
}

// hashFile is the hex digest of node file f.
func (s *Server) hashFile(tool, f string) (string, error) {
	lp, err := s.local(f)
	if err != nil {
		return "", err
	}
	fh, err := os.Open(lp)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	h := hashers[tool]()
	if _, err := io.Copy(h, fh); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (s *Server) rm(args []string, stderr io.Writer) int {
	files, err := operands(args, "f")
	if err != nil {
		fmt.Fprintf(stderr, "rm: %v\n", err)
		return 1
	}
	for _, f := range files {
		lp, err := s.local(f)
		if err == nil {
			err = os.Remove(lp)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(stderr, "rm: cannot remove '%s': %s\n", f, errText(err))
			return 1
		}
	}
	return 0
}

func (s *Server) mv(args []string, stderr io.Writer) int {
	ops, err := operands(args, "f")
	if err != nil || len(ops) != 2 {
		fmt.Fprintf(stderr, "mv: %s\n", orText(err, "expected SOURCE DEST"))
		return 1
	}
	src, err1 := s.local(ops[0])
	dst, err2 := s.local(ops[1])
	if err = errors.Join(err1, err2); err == nil {
		err = os.Rename(src, dst)
	}
	if err != nil {
		fmt.Fprintf(stderr, "mv: cannot move '%s' to '%s': %s\n", ops[0], ops[1], errText(err))
		return 1
	}
	return 0
}

// wget supports "wget -q -O FILE [--] URL"; exit statuses as GNU wget (4 network failure,
// 8 server error response).
func (s *Server) wget(args []string, stderr io.Writer) int {
	var out, rawURL string
	rest := args
	for len(rest) > 0 {
		a := rest[0]
		rest = rest[1:]
		switch {
		case a == "-q":
		case a == "-O" && len(rest) > 0:
			out, rest = rest[0], rest[1:]
		case a == "--":
			if len(rest) == 1 {
				rawURL, rest = rest[0], nil
			}
		case !strings.HasPrefix(a, "-") && rawURL == "":
			rawURL = a
		default:
			fmt.Fprintf(stderr, "wget: unsupported argument '%s'\n", a)
			return 2
		}
	}
	if out == "" || rawURL == "" {
		fmt.Fprintln(stderr, "wget: missing URL or -O FILE")
		return 2
	}
	lp, err := s.local(out)
	if err != nil {
		fmt.Fprintf(stderr, "wget: %v\n", err)
		return 3
	}
	req, err := http.NewRequestWithContext(s.ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		fmt.Fprintf(stderr, "%s: Invalid URL.\n", rawURL)
		return 1
	}
	resp, err := s.http.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "wget: unable to resolve or connect: %v\n", err)
		return 4
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		fmt.Fprintf(stderr, "wget: server returned error: HTTP/1.1 %s\n", resp.Status)
		return 8
	}
	return writeBody(lp, resp.Body, out, stderr)
}

// writeBody stores body at lp (GNU wget creates the file and leaves partial content on a
// read error).
func writeBody(lp string, body io.Reader, name string, stderr io.Writer) int {
	fh, err := os.Create(lp)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s\n", name, errText(err))
		return 3
	}
	_, cerr := io.Copy(fh, body)
	if err := errors.Join(cerr, fh.Close()); err != nil {
		fmt.Fprintf(stderr, "wget: read error: %v\n", err)
		return 4
	}
	return 0
}

// errText is coreutils' text of a file error.
func errText(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "No such file or directory"
	case errors.Is(err, fs.ErrPermission):
		return "Permission denied"
	}
	return err.Error()
}

func orText(err error, def string) string {
	if err != nil {
		return err.Error()
	}
	return def
}

// splitWords splits a command line as a POSIX shell would for words made of plain
// characters, single-quoted and double-quoted strings and backslash escapes. Shell
// operators (; | & < > $ `) are not simulated and refused.
func splitWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unexpected EOF while looking for matching `''")
			}
			cur.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			j := i + 1
			for ; j < len(line) && line[j] != '"'; j++ {
				if line[j] == '\\' && j+1 < len(line) && strings.IndexByte("\"\\$`", line[j+1]) >= 0 {
					j++
				} else if strings.IndexByte("$`", line[j]) >= 0 {
					return nil, fmt.Errorf("expansion %q is not simulated", line[j])
				}
				cur.WriteByte(line[j])
			}
			if j >= len(line) {
				return nil, errors.New("unexpected EOF while looking for matching `\"'")
			}
			i = j
			inWord = true
		case c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
			inWord = true
		case strings.IndexByte(";|&<>$`(){}*?", c) >= 0:
			return nil, fmt.Errorf("shell syntax %q is not simulated", c)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
