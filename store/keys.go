package store

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// CommandKey identifies a command: its CloudEvents source and id.
type CommandKey struct {
	Source string `json:"source"`
	ID     string `json:"id"`
}

// Hash returns the lower-case hex SHA-256 of source + "\n" + id: the suffix of the command's
// identity and repair keys (and, cut to 32 digits, the contract's event ref for ids that
// cannot be used verbatim).
func (c CommandKey) Hash() string {
	sum := sha256.Sum256([]byte(c.Source + "\n" + c.ID))
	return hex.EncodeToString(sum[:])
}

// IdemScope is the scope of an Idempotency-Key: endpoint, verb, resource id and the key.
type IdemScope struct {
	EndpointID int64
	Verb       string
	Resource   string
	Key        string
}

// Hash returns the lower-case hex SHA-256 of endpoint|verb|resource|key, the suffix of the
// scope's idem key.
func (i IdemScope) Hash() string {
	sum := sha256.Sum256([]byte(strconv.FormatInt(i.EndpointID, 10) + "|" + i.Verb + "|" + i.Resource + "|" + i.Key))
	return hex.EncodeToString(sum[:])
}

func (s *Store) cmdKey(c CommandKey) string      { return s.opts.Prefix + ":cmd:" + c.Hash() }
func (s *Store) idemKey(i IdemScope) string      { return s.opts.Prefix + ":idem:" + i.Hash() }
func (s *Store) fenceKey() string                { return s.opts.Prefix + ":fence" }
func (s *Store) failuresKey(c CommandKey) string { return s.opts.Prefix + ":failures:" + c.Hash() }
func (s *Store) repairPrefix() string            { return s.opts.Prefix + ":repair:" }
func (s *Store) repairKey(c CommandKey) string   { return s.repairPrefix() + c.Hash() }
func (s *Store) repairsKey() string              { return s.opts.Prefix + ":repairs" }

// lockKey is the lease key of one resource: <prefix>:lock:<endpoint>:<kind>:<id>.
func (s *Store) lockKey(k ResourceKey) string {
	return s.opts.Prefix + ":lock:" + strconv.FormatInt(k.EndpointID, 10) + ":" + k.Kind + ":" + k.ID
}

// slotsKey is the slot set of one endpoint: <prefix>:slots:<endpoint>.
func (s *Store) slotsKey(endpointID int64) string {
	return s.opts.Prefix + ":slots:" + strconv.FormatInt(endpointID, 10)
}
