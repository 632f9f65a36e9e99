// Package producers decides which signed commands may run (contract §8a): it verifies a
// command's signature (package sign) and checks it against the producers file, which maps
// each producer's NKey public key to the endpoints, verbs and actors it may use. The file is
// read again whenever it changes on disk, so rights are granted and withdrawn without a
// restart.
//
// The producers file (YAML):
//
//	producers:
//	  - key: UB…            # the producer's NKey public user key
//	    name: netbox-sync   # for the logs (optional)
//	    endpoints: [1, 2]   # endpointid values it may name; none: only verbs without one
//	    verbs: [vm.start, vm.stop, "vm.snapshot.*"]  # exact, or a prefix ending in ".*"
//	    actor_prefix: "sync:" # its commands' actor must start with this ("" : any actor)
package producers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/sign"
)

// Reasons of a refusal, the result's reason (contract §8a).
const (
	ReasonNotAllowed       = "producer_not_allowed"
	ReasonSignatureInvalid = "signature_invalid"
)

// Producer is one entry of the producers file.
type Producer struct {
	Key         string   `yaml:"key"`
	Name        string   `yaml:"name"`
	Endpoints   []int64  `yaml:"endpoints"`
	Verbs       []string `yaml:"verbs"`
	ActorPrefix string   `yaml:"actor_prefix"`
}

type file struct {
	Producers []Producer `yaml:"producers"`
}

// Parse reads a producers file's contents. Every problem is an error wrapping
// config.ErrInvalid naming the entry.
func Parse(data []byte) (map[string]Producer, error) {
	var f file
	if err := config.UnmarshalYAMLStrict(data, &f); err != nil {
		return nil, err
	}
	out := make(map[string]Producer, len(f.Producers))
	var errs []error
	for i, p := range f.Producers {
		where := fmt.Sprintf("producers[%d]", i)
		switch {
		case !nkeys.IsValidPublicUserKey(p.Key):
			errs = append(errs, fmt.Errorf("%w: %s: key is not an NKey public user key (U…; nsc or nk -gen user -pubout)", config.ErrInvalid, where))
			continue
		case len(p.Verbs) == 0:
			errs = append(errs, fmt.Errorf("%w: %s (%s): verbs is empty: list what it may send", config.ErrInvalid, where, p.Key))
		}
		for _, v := range p.Verbs {
			if v == "" || (strings.Contains(v, "*") && !strings.HasSuffix(v, ".*")) {
				errs = append(errs, fmt.Errorf("%w: %s (%s): verb %q: exact, or a prefix ending in \".*\"", config.ErrInvalid, where, p.Key, v))
			}
		}
		for _, id := range p.Endpoints {
			if id <= 0 {
				errs = append(errs, fmt.Errorf("%w: %s (%s): endpoint %d is not a NetBox id", config.ErrInvalid, where, p.Key, id))
			}
		}
		if _, dup := out[p.Key]; dup {
			errs = append(errs, fmt.Errorf("%w: %s: key %s is listed twice", config.ErrInvalid, where, p.Key))
		}
		out[p.Key] = p
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// allows says why p may not send c, or "" when it may.
func (p Producer) allows(c events.Command) string {
	if !verbAllowed(p.Verbs, c.Verb) {
		return "its key may not send " + c.Verb
	}
	if c.HasEndpointID && !slices.Contains(p.Endpoints, c.EndpointID) {
		return fmt.Sprintf("its key may not act on endpoint %d", c.EndpointID)
	}
	if !strings.HasPrefix(c.Actor, p.ActorPrefix) {
		return fmt.Sprintf("its key may act only as actors starting with %q", p.ActorPrefix)
	}
	if c.Verb == scheduleAdd { // a schedule is no way around the key's rights (contract §11)
		verb, endpoint := scheduled(c.Data)
		if !verbAllowed(p.Verbs, verb) {
			return "its key may not schedule " + verb
		}
		if endpoint != 0 && !slices.Contains(p.Endpoints, endpoint) {
			return fmt.Sprintf("its key may not schedule commands on endpoint %d", endpoint)
		}
	}
	return ""
}

// scheduleAdd is the verb that makes a schedule; what it schedules is in its data.
const scheduleAdd = "schedule.add"

// scheduled is the verb and endpoint id a schedule.add's data schedules (0 when unreadable; an
// endpoint id may be a JSON number or a string of one, as a webhook rule renders it).
func scheduled(data json.RawMessage) (string, int64) {
	var d struct {
		Verb       string          `json:"verb"`
		EndpointID json.RawMessage `json:"endpoint_id"`
	}
	if json.Unmarshal(data, &d) != nil {
		return "", 0
	}
	id, _ := strconv.ParseInt(strings.Trim(string(d.EndpointID), `"`), 10, 64)
	return d.Verb, id
}

func verbAllowed(allow []string, verb string) bool {
	for _, p := range allow {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(verb, prefix) {
				return true
			}
		} else if p == verb {
			return true
		}
	}
	return false
}

// Refusal is why a command may not run: the result's reason and detail (which never quotes
// a value of the command but the verb, the endpoint and the actor prefix).
type Refusal struct {
	Reason, Detail string
	// Rights is set when the refusal comes from the producers file (the key is not in it, or
	// the command is outside its rights), which may change while a command runs; a refusal of
	// the message itself (its signature, a missing signature or time) is not.
	Rights bool
}

// Gate verifies commands and checks them against a producers file, read again when it
// changes. It is safe for concurrent use.
type Gate struct {
	path    string
	require bool

	mu      sync.Mutex
	stamp   fileStamp
	entries map[string]Producer
	loadErr error
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// New returns a Gate for the producers file at path ("" : no file, so no key has rights);
// with require, every command must be signed by a key of the file. The file is read now:
// an unreadable or invalid file is an error wrapping config.ErrInvalid.
func New(path string, require bool) (*Gate, error) {
	if require && path == "" {
		return nil, fmt.Errorf("%w: --require-signed-commands needs a producers file (--producers-file)", config.ErrInvalid)
	}
	g := &Gate{path: path, require: require}
	if path != "" {
		if err := g.reload(); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// reload reads the file when it changed since it was last read. A file that became invalid
// keeps the last valid rights and is reported by [Gate.Err].
func (g *Gate) reload() error {
	fi, err := os.Stat(g.path)
	if err != nil {
		g.loadErr = fmt.Errorf("%w: producers file %s: %w", config.ErrInvalid, g.path, err)
		return g.loadErr
	}
	st := fileStamp{mod: fi.ModTime(), size: fi.Size()}
	if st == g.stamp && g.entries != nil {
		return nil
	}
	data, err := os.ReadFile(g.path)
	if err != nil {
		g.loadErr = fmt.Errorf("%w: producers file %s: %w", config.ErrInvalid, g.path, err)
		return g.loadErr
	}
	entries, err := Parse(bytes.TrimSpace(data))
	if err != nil {
		g.loadErr = fmt.Errorf("producers file %s: %w", g.path, err)
		return g.loadErr
	}
	g.stamp, g.entries, g.loadErr = st, entries, nil
	return nil
}

// Err is the problem of the producers file's last reading, nil when it was read.
func (g *Gate) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.loadErr
}

// Check decides whether c may run: nil, or the refusal. A signed command's signature must
// verify (else signature_invalid) and its key must be in the file and allow the verb, the
// endpoint and the actor (else producer_not_allowed). An unsigned command runs unless the
// gate requires signatures. A signed command must carry its time, so that a replay of it
// after its identity is forgotten is expired (--command-max-age), not run again.
func (g *Gate) Check(c events.Command) *Refusal {
	err := sign.Verify(c)
	switch {
	case errors.Is(err, sign.ErrUnsigned):
		if g.require {
			return &Refusal{Reason: ReasonNotAllowed, Detail: "this proxbus runs signed commands only (producer and signature attributes, docs/producers.md)"}
		}
		return nil
	case err != nil:
		return &Refusal{Reason: ReasonSignatureInvalid, Detail: "the signature does not verify over the command's canonical form (docs/producers.md) with the producer's key"}
	case c.Time.IsZero():
		return &Refusal{Reason: ReasonNotAllowed, Detail: "a signed command must carry its time attribute"}
	}
	g.mu.Lock()
	if g.path != "" {
		_ = g.reload() // a broken file keeps the last rights; Err reports it
	}
	p, ok := g.entries[c.Producer]
	g.mu.Unlock()
	if !ok {
		return &Refusal{Reason: ReasonNotAllowed, Detail: "the producer's key is not in the producers file", Rights: true}
	}
	if why := p.allows(c); why != "" {
		return &Refusal{Reason: ReasonNotAllowed, Detail: why, Rights: true}
	}
	return nil
}
