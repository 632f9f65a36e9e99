package ingress

import (
	"crypto/hmac"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
)

// SignatureHeader is the header NetBox signs webhooks in.
const SignatureHeader = "X-Hook-Signature"

// Signature errors of [VerifySignature]; both are answered 401.
var (
	ErrSignatureMissing = errors.New("ingress: webhook signature missing")
	ErrSignatureInvalid = errors.New("ingress: webhook signature invalid")
)

// Sign returns what NetBox sends in X-Hook-Signature for body: the lowercase hex HMAC-SHA512
// of the exact body bytes keyed with secret (netbox extras/webhooks.py generate_signature).
func Sign(secret string, body []byte) string {
	mac := hmac.New(sha512.New, []byte(secret))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// VerifySignature checks the X-Hook-Signature of a request against body. The header must be
// present once and equal Sign(secret, body) exactly: NetBox writes lowercase hex, so an
// uppercase rendering is refused like any other mismatch (accepting more encodings would widen
// what a forger may send for no producer that needs it). The comparison is constant-time.
func VerifySignature(secret string, h http.Header, body []byte) error {
	values := h.Values(SignatureHeader)
	if len(values) == 0 || values[0] == "" {
		return ErrSignatureMissing
	}
	if len(values) > 1 {
		return ErrSignatureInvalid
	}
	want := Sign(secret, body)
	if subtle.ConstantTimeCompare([]byte(values[0]), []byte(want)) != 1 {
		return ErrSignatureInvalid
	}
	return nil
}
