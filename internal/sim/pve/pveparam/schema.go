package pveparam

import (
	"strconv"
	"strings"
)

// Schema is one parameter, or one key of a property string, as the PVE API schema
// declares it (pve-common JSONSchema's property schema, reduced to what requests use).
type Schema struct {
	Type       string            // "string", "integer", "number" or "boolean"
	Format     string            // a named format ("pve-vmid", "pve-node-list", "pve-qm-ipconfig"); "" for none
	Properties map[string]Schema // the keys of an inline property-string format; nil for none
	Pattern    string            // a Perl regular expression the whole value must match
	Enum       []string
	Minimum    *float64
	Maximum    *float64
	MaxLength  int // in characters; 0: no limit
	MinLength  int
	Optional   bool
	Requires   string // another property that must be present when this one is
	DefaultKey bool   // property strings: the key a value without "key=" belongs to
	Alias      string // property strings: this key is another name for Alias
	KeyAlias   string // property strings: with Alias, the key that records which name was used
}

// Method is the schema of one API method: its parameters by schema name ("net[n]" for the
// indexed keys net0, net1, …) and, for each indexed prefix, how many indexes exist.
type Method struct {
	Params  map[string]Schema
	Indexed map[string]int // "net" → 32: net0…net31
}

// Lookup returns the schema of method ("POST") at path as the PVE schema writes it
// ("/nodes/{node}/qemu"); false when it is not one proxbus uses.
func Lookup(method, path string) (Method, bool) {
	m, ok := methods[method+" "+path]
	return m, ok
}

// param returns the schema of the parameter named name: a plain one, or an indexed one
// whose index is a canonical decimal below the prefix's count (qemu-server declares
// net0…net31 one by one: net01 and net32 are not parameters).
func (m Method) param(name string) (Schema, bool) {
	if s, ok := m.Params[name]; ok {
		return s, true
	}
	i := strings.IndexFunc(name, func(r rune) bool { return r >= '0' && r <= '9' })
	if i <= 0 {
		return Schema{}, false
	}
	prefix, digits := name[:i], name[i:]
	count, ok := m.Indexed[prefix]
	if !ok {
		return Schema{}, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || strconv.Itoa(n) != digits || n >= count {
		return Schema{}, false
	}
	s, ok := m.Params[prefix+"[n]"]
	return s, ok
}

// num is a bound in the generated table.
func num(v float64) *float64 { return &v }
