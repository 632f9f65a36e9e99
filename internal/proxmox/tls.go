package proxmox

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// ErrCertificateMismatch is wrapped (inside [ErrUnreachable]) when the server's certificate
// does not have the pinned fingerprint. Nothing is sent to such a server.
var ErrCertificateMismatch = errors.New("proxmox: TLS certificate fingerprint mismatch")

// validateTLS checks that at most one verification mode is chosen and that a fingerprint
// is well formed.
func validateTLS(t TLSConfig) error {
	n := 0
	for _, set := range []bool{t.CAFile != "", t.Fingerprint != "", t.InsecureSkipVerify} {
		if set {
			n++
		}
	}
	if n > 1 {
		return errors.New("set only one of ca_file, fingerprint, insecure_skip_verify")
	}
	if t.Fingerprint != "" {
		if _, err := ParseFingerprint(t.Fingerprint); err != nil {
			return fmt.Errorf("fingerprint: %w", err)
		}
	}
	return nil
}

// ParseFingerprint decodes a SHA-256 certificate fingerprint written as 32 colon-separated
// hex pairs (any case), e.g. "AB:CD:…". Anything else is an error.
func ParseFingerprint(s string) ([]byte, error) {
	parts := strings.Split(strings.TrimSpace(s), ":")
	if len(parts) != sha256.Size {
		return nil, fmt.Errorf("want %d colon-separated hex pairs, got %d", sha256.Size, len(parts))
	}
	out := make([]byte, 0, sha256.Size)
	for _, p := range parts {
		if len(p) != 2 {
			return nil, fmt.Errorf("%q is not a hex pair", p)
		}
		b, err := hex.DecodeString(p)
		if err != nil {
			return nil, fmt.Errorf("%q is not a hex pair", p)
		}
		out = append(out, b[0])
	}
	return out, nil
}

// FormatFingerprint renders a SHA-256 digest the way PVE shows fingerprints: upper-case hex
// pairs joined by colons.
func FormatFingerprint(sum []byte) string {
	pairs := make([]string, len(sum))
	for i, b := range sum {
		pairs[i] = strings.ToUpper(hex.EncodeToString([]byte{b}))
	}
	return strings.Join(pairs, ":")
}

// CertificateFingerprint returns the SHA-256 fingerprint of a DER certificate in
// [FormatFingerprint] form.
func CertificateFingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return FormatFingerprint(sum[:])
}

// buildTLSConfig turns the endpoint's TLS settings into a client config:
//   - Fingerprint: chain verification is replaced by comparing the leaf certificate's SHA-256
//     with the pin; a mismatch fails the handshake (no fallback to any other check).
//   - CAFile: only the CAs in that file are trusted.
//   - InsecureSkipVerify: no verification.
//   - otherwise the system roots.
func buildTLSConfig(t TLSConfig) (*tls.Config, error) {
	if err := validateTLS(t); err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case t.Fingerprint != "":
		want, err := ParseFingerprint(t.Fingerprint)
		if err != nil {
			return nil, fmt.Errorf("fingerprint: %w", err)
		}
		// The standard chain check is replaced, not skipped: VerifyConnection runs on every
		// handshake (including resumed ones) and refuses any leaf but the pinned one.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return fmt.Errorf("%w: server presented no certificate", ErrCertificateMismatch)
			}
			got := sha256.Sum256(cs.PeerCertificates[0].Raw)
			if subtle.ConstantTimeCompare(got[:], want) != 1 {
				return fmt.Errorf("%w: server presented %s", ErrCertificateMismatch, FormatFingerprint(got[:]))
			}
			return nil
		}
	case t.CAFile != "":
		pemData, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemData) {
			return nil, fmt.Errorf("ca_file: %s contains no PEM certificate", t.CAFile)
		}
		cfg.RootCAs = pool
	case t.InsecureSkipVerify:
		cfg.InsecureSkipVerify = true
	}
	return cfg, nil
}
