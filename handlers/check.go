package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// ErrUnknownVerb is wrapped by the error of [Registry.Check] for a verb the registry does not
// hold (the error is an [*UnknownVerbError]).
var ErrUnknownVerb = errors.New("unknown verb")

// UnknownVerbError is a verb the registry does not hold, with the registered names closest
// to it (by edit distance, at most three, closest first; none when no name is close).
type UnknownVerbError struct {
	Verb    string
	Closest []string
}

func (e *UnknownVerbError) Error() string {
	if len(e.Closest) == 0 {
		return fmt.Sprintf("unknown verb %q", e.Verb)
	}
	return fmt.Sprintf("unknown verb %q; did you mean %s?", e.Verb, strings.Join(e.Closest, ", "))
}

// Unwrap returns [ErrUnknownVerb].
func (e *UnknownVerbError) Unwrap() error { return ErrUnknownVerb }

// Undeclared is a top-level field of the data that the verb does not declare, and the
// declared name closest to it ("" when none is close enough to suggest).
type Undeclared struct {
	Name    string
	Closest string
}

// CheckResult is what the pipeline's validation (contract §4 step 2) finds in one command's
// data, for a client on the user's own terminal: unlike the pipeline's answer it names the
// undeclared fields. It never holds a value of the data.
type CheckResult struct {
	// NotObject: the data is not a JSON object (absent or null data reads as {}).
	NotObject bool
	// Failed are the declared fields the pipeline would name in its 422 invalid_body answer
	// (wrong type, breaking their rule, or required and absent), sorted.
	Failed []string
	// Absent are the names in Failed that the data does not hold (or holds as null): required
	// fields that are missing.
	Absent []string
	// Undeclared are the top-level fields the verb does not declare, sorted by name.
	Undeclared []Undeclared
	// UnnamedUndeclared: undeclared fields are present that cannot be named, inside an object
	// of the data (the verb's nested objects are read without keeping their names).
	UnnamedUndeclared bool
	// Declared are the fields the verb declared while reading this data, sorted (a field read
	// only in some cases, such as vm.provision's source kinds, is listed when it was read).
	Declared []string
	// DeclaredPaths are Declared and the fields the verb declared inside nested objects (and
	// inside a list's objects) as parent.child paths, sorted.
	DeclaredPaths []string
	// NeedsEndpoint: the command must carry endpointid; the gate (contract §4 step 1) answers
	// 403 endpoint_id_required without it. True for every verb but the control verbs.
	NeedsEndpoint bool
}

// Valid reports whether the pipeline would accept the data (no 422 invalid_body).
func (c CheckResult) Valid() bool {
	return !c.NotObject && len(c.Failed) == 0 && len(c.Undeclared) == 0 && !c.UnnamedUndeclared
}

// checker is implemented by every [Spec]: its data read through [Fields], as prepare reads it.
type checker interface {
	checkFields(data json.RawMessage) (*Fields, error)
}

// checkFields decodes data with the verb's own Decode, exactly as prepare does, and returns
// the fields it read.
func (s Spec[In]) checkFields(data json.RawMessage) (*Fields, error) {
	f, err := newFields(data)
	if err != nil {
		return nil, err
	}
	f.sealing = sealing{unopened: true}
	s.Decode(f)
	return f, nil
}

// Check validates data against the verb's declared fields with the pipeline's own code (the
// verb's Decode and the same verdict as its 422 invalid_body answer), and returns what it
// found. An unknown verb is an [*UnknownVerbError] naming the closest registered verbs.
func (r *Registry) Check(verb string, data json.RawMessage) (CheckResult, error) {
	v, ok := r.Lookup(verb)
	if !ok {
		return CheckResult{}, &UnknownVerbError{Verb: verb, Closest: closestNames(verb, r.Names(), 3)}
	}
	res := CheckResult{NeedsEndpoint: v.VerbAccess() != Control}
	c, ok := v.(checker)
	if !ok { // a verb not built from a Spec: the pipeline's answer alone, without names
		if _, out := v.prepare(data); out != nil {
			if len(out.Fields) > 0 {
				res.Failed = out.Fields
			}
			res.NotObject = out.Detail == "data must be a JSON object"
			res.UnnamedUndeclared = out.Detail == "undeclared fields present"
		}
		return res, nil
	}
	f, err := c.checkFields(data)
	if err != nil {
		res.NotObject = true
		return res, nil
	}
	if out := f.outcome(); out != nil && len(out.Fields) > 0 {
		res.Failed = out.Fields
	}
	for _, name := range res.Failed {
		if !f.Has(name) {
			res.Absent = append(res.Absent, name)
		}
	}
	for name := range f.declared {
		res.Declared = append(res.Declared, name)
	}
	sort.Strings(res.Declared)
	res.DeclaredPaths = f.declaredPaths()
	for name := range f.raw {
		if !f.declared[name] {
			u := Undeclared{Name: name}
			if best := closestNames(name, res.Declared, 1); len(best) > 0 {
				u.Closest = best[0]
			}
			res.Undeclared = append(res.Undeclared, u)
		}
	}
	sort.Slice(res.Undeclared, func(i, j int) bool { return res.Undeclared[i].Name < res.Undeclared[j].Name })
	res.UnnamedUndeclared = f.nestedUndeclared
	return res, nil
}

// closestNames returns up to n candidates close to name, closest first (ties by name): those
// within an edit distance (case-insensitive, a transposition counting one) of a third of
// name's length (at least 2, and less than its length), and those whose last dot-separated
// part is name ("stop" → "vm.stop").
func closestNames(name string, candidates []string, n int) []string {
	type scored struct {
		name string
		dist int
	}
	lower := strings.ToLower(name)
	limit := max(2, len(lower)/3)
	var found []scored
	for _, c := range candidates {
		d := editDistance(lower, strings.ToLower(c))
		switch {
		case d <= limit && d < len(lower):
			found = append(found, scored{c, d})
		case strings.HasSuffix(strings.ToLower(c), "."+lower):
			found = append(found, scored{c, limit + 1})
		}
	}
	slices.SortFunc(found, func(a, b scored) int {
		if a.dist != b.dist {
			return a.dist - b.dist
		}
		return strings.Compare(a.name, b.name)
	})
	var out []string
	for _, s := range found {
		if len(out) == n {
			break
		}
		out = append(out, s.name)
	}
	return out
}

// editDistance is the optimal string alignment distance of a and b, by bytes: insertions,
// deletions, substitutions and transpositions of adjacent bytes each count one.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
