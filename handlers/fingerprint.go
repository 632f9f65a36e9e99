package handlers

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/proxbus/proxbus/internal/redact"
)

// fingerprint is the sha256 (hex) of the canonical JSON of in: in encoded by json.Marshal,
// decoded into an any (numbers become float64s), every secret-named member removed at any
// depth ([redact.Strip]) and encoded again (object members sorted by name). Fingerprints are
// stored with Idempotency-Key records, so this form must never change: a stored fingerprint
// that no longer matched its own command's would turn a redelivery into
// idempotency_key_reused.
//
// It returns an error when in cannot be encoded as JSON, or its JSON not decoded into an any
// (a number beyond a float64's range).
func fingerprint(in any) (string, error) {
	raw, err := json.Marshal(in)
	if err != nil {
		return "", fmt.Errorf("fingerprint: %w", err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", fmt.Errorf("fingerprint: %w", err)
	}
	canon, err := json.Marshal(redact.Strip(v))
	if err != nil {
		return "", fmt.Errorf("fingerprint: %w", err)
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}
