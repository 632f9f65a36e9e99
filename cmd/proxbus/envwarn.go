package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/proxbus/proxbus/internal/endpointset"
)

// otherEnv are the PROXBUS_* variables proxbus reads that are no flag's.
var otherEnv = []string{runDirEnv}

// retiredEnv are variables proxbus once documented or a manifest set, and the one to use
// instead.
var retiredEnv = map[string]string{
	"PROXBUS_MAX_DELIVER": "PROXBUS_MAX_ATTEMPTS", // JetStream's MaxDeliver: serve counts failed attempts instead
}

// knownEnv is every PROXBUS_* variable the command line reads: each flag's, of every
// subcommand, and [otherEnv].
func knownEnv(k *kong.Kong) map[string]bool {
	known := map[string]bool{}
	for _, n := range otherEnv {
		known[n] = true
	}
	_ = kong.Visit(k.Model, func(node kong.Visitable, next kong.Next) error {
		if f, ok := node.(*kong.Flag); ok && hasEnv(f) {
			known[envName(f.Name)] = true
		}
		return next(nil)
	})
	return known
}

// warnUnknownEnv warns on stderr of every PROXBUS_* variable of the environment that proxbus
// does not read (a misspelt or retired setting would otherwise be ignored silently), with the
// closest one it reads. also are more variables that are read (an endpoint's
// token_secret_env); PROXBUS_ENDPOINT_<ID>_TOKEN_SECRET, the secret of an endpoint read from
// NetBox, is always read.
func warnUnknownEnv(e *cliEnv, also ...string) {
	if e.known == nil {
		return
	}
	var unknown []string
	for _, kv := range e.environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "PROXBUS_") && !e.known[name] && !slices.Contains(also, name) && !strings.HasPrefix(name, "PROXBUS_TEST_") &&
			!endpointset.IsSecretVar(name) {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	for _, name := range unknown {
		msg := fmt.Sprintf("proxbus: warning: $%s is set but proxbus reads no such variable; it is ignored", name)
		if c := cmp.Or(retiredEnv[name], closestEnv(name, e.known)); c != "" {
			msg += fmt.Sprintf(" (did you mean $%s?)", c)
		}
		fmt.Fprintln(e.stderr, msg)
	}
}

// closestEnv is the known name nearest to name (edit distance at most a third of its
// length), or "".
func closestEnv(name string, known map[string]bool) string {
	best, bestD := "", len(name)/3+1
	for k := range known {
		if d := editDistance(name, k); d < bestD || (d == bestD && best != "" && k < best) {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
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
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
