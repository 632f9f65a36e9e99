package proxmox

import (
	"fmt"
	"slices"

	"github.com/proxbus/proxbus/internal/config"
)

// Clients is the registry of clients built from the endpoints file, keyed by endpoint id.
// It is immutable after [NewClients] and safe for concurrent use.
type Clients struct {
	byID    map[int64]*Client
	ids     []int64
	secrets []string
}

// NewClients resolves every endpoint's token secret (with getenv; nil means os.Getenv) and
// builds its client with opts. It fails on the first endpoint whose secret cannot be
// resolved or whose client cannot be built, and on duplicate ids; errors name the endpoint
// and never contain a secret.
func NewClients(cfgs []EndpointConfig, getenv func(string) string, opts ...ClientOption) (*Clients, error) {
	cs := &Clients{byID: make(map[int64]*Client, len(cfgs))}
	for _, cfg := range cfgs {
		if _, dup := cs.byID[cfg.ID]; dup {
			return nil, fmt.Errorf("proxmox: endpoints file: %w: endpoint %d: duplicate id", config.ErrInvalid, cfg.ID)
		}
		secret, err := cfg.TokenSecret(getenv)
		if err != nil {
			return nil, err
		}
		c, err := NewClient(cfg, secret, opts...)
		if err != nil {
			return nil, err
		}
		cs.byID[cfg.ID] = c
		cs.ids = append(cs.ids, cfg.ID)
		cs.secrets = append(cs.secrets, secret.Reveal())
	}
	slices.Sort(cs.ids)
	return cs, nil
}

// Get returns the client of endpoint id and whether there is one.
func (cs *Clients) Get(id int64) (*Client, bool) {
	c, ok := cs.byID[id]
	return c, ok
}

// IDs returns the endpoint ids, ascending (a fresh slice).
func (cs *Clients) IDs() []int64 { return slices.Clone(cs.ids) }

// Secrets returns every token secret (a fresh slice), for log redaction
// (redact.NewHandler). Never log or store the result.
func (cs *Clients) Secrets() []string { return slices.Clone(cs.secrets) }
