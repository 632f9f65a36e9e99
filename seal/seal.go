// Package seal keeps secret values of commands encrypted while they travel and rest on the
// bus (contract §8). A producer seals each secret field to proxbus's public key (an age
// X25519 recipient, "age1…"): the field's value becomes {"sealed": "<age armored
// ciphertext>"}. Only proxbus, holding the identity ("AGE-SECRET-KEY-1…"), opens it, right
// before the Proxmox call that needs it; the commands stream, the dead letters and every
// record keep only the ciphertext.
//
// Secret fields are those the rest of proxbus treats as write-only: any member whose name
// contains "password", "secret" or "token" (case-insensitive), at any depth.
package seal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"filippo.io/age"
	"filippo.io/age/armor"

	"github.com/proxbus/proxbus/internal/redact"
)

// Member is the name of the one member of a sealed value's JSON object.
const Member = "sealed"

// armorHeader begins every armored age ciphertext.
const armorHeader = armor.Header

// MaxSealedBytes bounds one sealed value's armored text; a secret is small.
const MaxSealedBytes = 16 << 10

var (
	// ErrNoRecipient is returned when sealing without a recipient.
	ErrNoRecipient = errors.New("seal: no public key to seal to")
	// ErrBadKey is returned for a public key or identity that does not parse.
	ErrBadKey = errors.New("seal: not an age X25519 key")
	// ErrCannotOpen is returned when no identity opens a sealed value, or it is not a
	// well-formed armored age ciphertext.
	ErrCannotOpen = errors.New("seal: the sealed value cannot be opened with proxbus's keys")
)

// Sealed is the JSON form of a sealed value: {"sealed": "<armored ciphertext>"}.
type Sealed struct {
	Sealed string `json:"sealed"`
}

// Key is a proxbus key pair.
type Key struct {
	// Identity is the private key, "AGE-SECRET-KEY-1…"; it never leaves the servers.
	Identity string
	// Public is the public key producers seal to, "age1…".
	Public string
}

// GenerateKey creates a new key pair.
func GenerateKey() (Key, error) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return Key{}, fmt.Errorf("seal: generate key: %w", err)
	}
	return Key{Identity: id.String(), Public: id.Recipient().String()}, nil
}

// PublicOf returns the public key of an identity.
func PublicOf(identity string) (string, error) {
	id, err := age.ParseX25519Identity(strings.TrimSpace(identity))
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrBadKey, err)
	}
	return id.Recipient().String(), nil
}

func parseRecipients(publicKeys []string) ([]age.Recipient, error) {
	if len(publicKeys) == 0 {
		return nil, ErrNoRecipient
	}
	rs := make([]age.Recipient, 0, len(publicKeys))
	for _, k := range publicKeys {
		r, err := age.ParseX25519Recipient(strings.TrimSpace(k))
		if err != nil {
			return nil, fmt.Errorf("%w: public key: %w", ErrBadKey, err)
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// Seal encrypts value to every public key ("age1…"; during a key rotation, both).
func Seal(value string, publicKeys ...string) (Sealed, error) {
	rs, err := parseRecipients(publicKeys)
	if err != nil {
		return Sealed{}, err
	}
	return sealTo(value, rs)
}

func sealTo(value string, rs []age.Recipient) (Sealed, error) {
	var buf bytes.Buffer
	aw := armor.NewWriter(&buf)
	w, err := age.Encrypt(aw, rs...)
	if err != nil {
		return Sealed{}, fmt.Errorf("seal: encrypt: %w", err)
	}
	if _, err := io.WriteString(w, value); err != nil {
		return Sealed{}, fmt.Errorf("seal: encrypt: %w", err)
	}
	if err := w.Close(); err != nil {
		return Sealed{}, fmt.Errorf("seal: encrypt: %w", err)
	}
	if err := aw.Close(); err != nil {
		return Sealed{}, fmt.Errorf("seal: armor: %w", err)
	}
	return Sealed{Sealed: buf.String()}, nil
}

// SealData returns a copy of a verb's JSON data with every secret field (see the package
// documentation) that holds a string replaced by its [Sealed] form; a value sealed already,
// and members whose names are not secret, are kept as they are. Members keep their order.
func SealData(data json.RawMessage, publicKeys ...string) (json.RawMessage, error) {
	rs, err := parseRecipients(publicKeys)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return data, nil
	}
	var out bytes.Buffer
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := rewrite(dec, &out, "", func(s string) (json.RawMessage, error) {
		sealed, err := sealTo(s, rs)
		if err != nil {
			return nil, err
		}
		return json.Marshal(sealed)
	}); err != nil {
		return nil, fmt.Errorf("seal: data: %w", err)
	}
	return out.Bytes(), nil
}

// rewrite copies the next JSON value from dec to out, replacing the string value of every
// secret-named member through replace. name is the member name of the value ("" at the top
// and in arrays).
func rewrite(dec *json.Decoder, out *bytes.Buffer, name string, replace func(string) (json.RawMessage, error)) error {
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	trimmed := bytes.TrimSpace(raw)
	switch {
	case len(trimmed) > 0 && trimmed[0] == '"' && redact.IsSecretName(name):
		var s string
		if err := json.Unmarshal(trimmed, &s); err != nil {
			return err
		}
		rep, err := replace(s)
		if err != nil {
			return err
		}
		out.Write(rep)
		return nil
	case len(trimmed) > 0 && trimmed[0] == '{':
		return rewriteObject(trimmed, out, replace)
	case len(trimmed) > 0 && trimmed[0] == '[':
		var items []json.RawMessage
		if err := json.Unmarshal(trimmed, &items); err != nil {
			return err
		}
		out.WriteByte('[')
		for i, item := range items {
			if i > 0 {
				out.WriteByte(',')
			}
			if err := rewrite(json.NewDecoder(bytes.NewReader(item)), out, "", replace); err != nil {
				return err
			}
		}
		out.WriteByte(']')
		return nil
	}
	out.Write(trimmed)
	return nil
}

// rewriteObject copies a JSON object, member by member in their order.
func rewriteObject(obj json.RawMessage, out *bytes.Buffer, replace func(string) (json.RawMessage, error)) error {
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil { // {
		return err
	}
	out.WriteByte('{')
	first := true
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := tok.(string)
		key, _ := json.Marshal(name)
		if !first {
			out.WriteByte(',')
		}
		first = false
		out.Write(key)
		out.WriteByte(':')
		if err := rewrite(dec, out, name, replace); err != nil {
			return err
		}
	}
	out.WriteByte('}')
	return nil
}

// Parse reports whether raw, a JSON value, is a sealed value, and returns its armored text.
// A sealed value is an object with exactly the member "sealed", a string holding an armored
// age ciphertext of at most [MaxSealedBytes].
func Parse(raw json.RawMessage) (string, bool) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' || len(trimmed) > 2*MaxSealedBytes {
		return "", false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(trimmed, &m) != nil || len(m) != 1 {
		return "", false
	}
	var s string
	if json.Unmarshal(m[Member], &s) != nil || !IsArmored(s) {
		return "", false
	}
	return s, true
}

// IsArmored reports whether s looks like an armored age ciphertext (its header line), at most
// [MaxSealedBytes] long. It says nothing about whether it opens.
func IsArmored(s string) bool {
	return len(s) <= MaxSealedBytes && strings.HasPrefix(strings.TrimLeft(s, " \t\r\n"), armorHeader)
}

// PlainSecrets returns the dotted paths of the secret fields of data (see the package
// documentation) that hold a value other than a sealed one and other than null, sorted;
// arrays add no path element. Data that is not JSON has none.
func PlainSecrets(data json.RawMessage) []string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return nil
	}
	var names []string
	plainIn(v, "", &names)
	sort.Strings(names)
	return names
}

func plainIn(v any, path string, names *[]string) {
	switch t := v.(type) {
	case map[string]any:
		for k, val := range t {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if redact.IsSecretName(k) {
				if val != nil && !isSealedValue(val) {
					*names = append(*names, p)
				}
				continue
			}
			plainIn(val, p, names)
		}
	case []any:
		for _, val := range t {
			plainIn(val, path, names)
		}
	}
}

func isSealedValue(v any) bool {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return false
	}
	s, ok := m[Member].(string)
	return ok && IsArmored(s)
}
