package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// flagSet is a FlagSet whose defaults come from PROXBUS_* environment variables, and which
// checks every value it was told the range of: [flagSet.problems] reports all bad values at
// once.
type flagSet struct {
	*flag.FlagSet
	getenv  func(string) string
	checks  []func() error
	envErrs map[string]error // flag name → why its environment variable was not usable
}

func newFlagSet(name string, stderr io.Writer) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &flagSet{FlagSet: fs, getenv: os.Getenv, envErrs: map[string]error{}}
}

// Parse parses flags and positional arguments in any order ("dlq show 12 --nats-url U").
// Positional arguments are available from Args as usual.
func (f *flagSet) Parse(args []string) error {
	var positional []string
	for {
		if err := f.FlagSet.Parse(args); err != nil {
			return err
		}
		args = f.FlagSet.Args()
		if len(args) == 0 {
			break
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
	return f.FlagSet.Parse(append([]string{"--"}, positional...))
}

// parseWithArg parses args that carry one positional argument (a command id), before, between
// or after the flags, and returns it ("" when there is none).
func (f *flagSet) parseWithArg(args []string) (string, error) {
	if err := f.Parse(args); err != nil {
		return "", err
	}
	return f.Arg(0), nil
}

func envName(flagName string) string {
	return "PROXBUS_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func (f *flagSet) str(name, def, help string) *string {
	if v := f.getenv(envName(name)); v != "" {
		def = v
	}
	return f.String(name, def, help+" ($"+envName(name)+")")
}

func (f *flagSet) integer(name string, def int, help string) *int {
	if raw := f.getenv(envName(name)); raw != "" {
		if v, err := strconv.Atoi(raw); err == nil {
			def = v
		} else {
			f.envErrs[name] = fmt.Errorf("$%s %q: not an integer", envName(name), raw)
		}
	}
	return f.Int(name, def, help+" ($"+envName(name)+")")
}

func (f *flagSet) duration(name string, def time.Duration, help string) *time.Duration {
	if raw := f.getenv(envName(name)); raw != "" {
		if v, err := time.ParseDuration(raw); err == nil {
			def = v
		} else {
			f.envErrs[name] = fmt.Errorf("$%s %q: not a duration (e.g. 30s, 5m)", envName(name), raw)
		}
	}
	return f.Duration(name, def, help+" ($"+envName(name)+")")
}

func (f *flagSet) boolean(name string, def bool, help string) *bool {
	if raw := f.getenv(envName(name)); raw != "" {
		if v, err := strconv.ParseBool(raw); err == nil {
			def = v
		} else {
			f.envErrs[name] = fmt.Errorf("$%s %q: not true or false", envName(name), raw)
		}
	}
	return f.Bool(name, def, help+" ($"+envName(name)+")")
}

// intIn is [flagSet.integer] whose value must lie in [lo, hi] (see [flagSet.checkInt]).
func (f *flagSet) intIn(name string, def, lo, hi int, help string) *int {
	p := f.integer(name, def, help)
	f.checkInt(name, p, lo, hi)
	return p
}

// checkInt makes [flagSet.problems] report *p outside [lo, hi].
func (f *flagSet) checkInt(name string, p *int, lo, hi int) {
	f.checks = append(f.checks, func() error {
		if *p < lo || *p > hi {
			return fmt.Errorf("%s %d: must be %d–%d", f.shown(name), *p, lo, hi)
		}
		return nil
	})
}

// durationIn is [flagSet.duration] whose value must lie in [lo, hi] (hi 0: no maximum).
func (f *flagSet) durationIn(name string, def, lo, hi time.Duration, help string) *time.Duration {
	p := f.duration(name, def, help)
	f.checks = append(f.checks, func() error {
		switch {
		case hi == 0 && *p < lo:
			return fmt.Errorf("%s %s: must be at least %s", f.shown(name), *p, lo)
		case hi != 0 && (*p < lo || *p > hi):
			return fmt.Errorf("%s %s: must be %s–%s", f.shown(name), *p, lo, hi)
		}
		return nil
	})
	return p
}

// oneOf is [flagSet.str] whose value must be one of values.
func (f *flagSet) oneOf(name, def string, values []string, help string) *string {
	p := f.str(name, def, help)
	f.checkOneOf(name, p, values)
	return p
}

// checkOneOf makes [flagSet.problems] report *p not in values.
func (f *flagSet) checkOneOf(name string, p *string, values []string) {
	f.checks = append(f.checks, func() error {
		if !slices.Contains(values, *p) {
			return fmt.Errorf("%s %q: must be %s", f.shown(name), *p, orList(values))
		}
		return nil
	})
}

// orList is "a, b or c".
func orList(values []string) string {
	if len(values) < 2 {
		return strings.Join(values, "")
	}
	return strings.Join(values[:len(values)-1], ", ") + " or " + values[len(values)-1]
}

// set reports whether flag name was given on the command line.
func (f *flagSet) set(name string) bool {
	found := false
	f.Visit(func(fl *flag.Flag) { found = found || fl.Name == name })
	return found
}

// explicit reports whether flag name was given on the command line or by its environment
// variable, as opposed to left at its default.
func (f *flagSet) explicit(name string) bool {
	return f.set(name) || (f.getenv(envName(name)) != "" && f.envErrs[name] == nil)
}

// shown is "--name", plus where the value came from when that was its environment variable.
func (f *flagSet) shown(name string) string {
	if !f.set(name) && f.getenv(envName(name)) != "" {
		return "--" + name + " (from $" + envName(name) + ")"
	}
	return "--" + name
}

// problems returns every bad value after Parse (unusable environment variables of flags
// not given on the command line, then the checks, in the order the flags were added) and
// extra, as one [*flagErrors], or nil when there is none.
func (f *flagSet) problems(extra ...error) error {
	var errs []error
	f.VisitAll(func(fl *flag.Flag) {
		if err := f.envErrs[fl.Name]; err != nil && !f.set(fl.Name) {
			errs = append(errs, err)
		}
	})
	for _, check := range f.checks {
		if err := check(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, err := range extra {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return &flagErrors{errs: errs}
}

// flagErrors is every bad flag value of one command line. It wraps errUsage (exit code 2)
// and each error.
type flagErrors struct{ errs []error }

func (e *flagErrors) Error() string {
	if len(e.errs) == 1 {
		return errUsage.Error() + ": " + e.errs[0].Error()
	}
	lines := make([]string, len(e.errs))
	for i, err := range e.errs {
		lines[i] = "  " + err.Error()
	}
	return fmt.Sprintf("%s: %d invalid flags:\n%s", errUsage, len(e.errs), strings.Join(lines, "\n"))
}

func (e *flagErrors) Unwrap() []error { return append([]error{errUsage}, e.errs...) }

// secretFlag is a secret given inline (--name) or in a file (--name-file), never both.
type secretFlag struct {
	name         string
	inline, file *string
	fs           *flagSet
}

// secret adds --name and --name-file (and their PROXBUS_* variables).
func (f *flagSet) secret(name, help string) *secretFlag {
	return &secretFlag{
		name:   name,
		inline: f.str(name, "", help),
		file:   f.str(name+"-file", "", "file holding "+help+", trailing newline trimmed (instead of --"+name+")"),
		fs:     f,
	}
}

// value is the secret: the inline value, or the file's content without its trailing
// newline. Both set, an unreadable file or an empty one is an error naming the flags and the
// file, never the content.
func (s *secretFlag) value() (string, error) {
	if *s.file == "" {
		return *s.inline, nil
	}
	fileFlag := s.fs.shown(s.name + "-file")
	if *s.inline != "" {
		return "", fmt.Errorf("%s and %s: set only one of them", s.fs.shown(s.name), fileFlag)
	}
	data, err := os.ReadFile(*s.file)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", fmt.Errorf("%s %s: cannot read it: %w", fileFlag, *s.file, err)
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	if v == "" {
		return "", fmt.Errorf("%s %s: the file is empty", fileFlag, *s.file)
	}
	return v, nil
}
