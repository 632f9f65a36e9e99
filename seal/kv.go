package seal

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
)

// KeysBucket is the KV bucket where producers find proxbus's public keys: the subject
// prefix upper-cased, then "_KEYS" (PROXBUS_KEYS).
func KeysBucket(s events.Subjects) string { return strings.ToUpper(s.Prefix) + "_KEYS" }

// PublicKeyName is the KV key of the sealing public keys in [KeysBucket]: one per line, the
// current key first (a second one only during a rotation). Producers seal to the first.
const PublicKeyName = "seal.public"

// ErrNoPublicKey is returned by [LookupPublicKey] when no public key is published.
var ErrNoPublicKey = errors.New("seal: no sealing public key is published (proxbus keys create --publish)")

// PublishPublicKeys stores the public keys (current first) in the keys bucket, creating it
// when absent.
func PublishPublicKeys(ctx context.Context, js jetstream.JetStream, s events.Subjects, public []string) error {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: KeysBucket(s),
		Description: "proxbus public keys: producers seal secret fields to seal.public (contract §8)"})
	if err != nil {
		return fmt.Errorf("seal: keys bucket %s: %w", KeysBucket(s), err)
	}
	if _, err := kv.PutString(ctx, PublicKeyName, strings.Join(public, "\n")+"\n"); err != nil {
		return fmt.Errorf("seal: keys bucket %s: %w", KeysBucket(s), err)
	}
	return nil
}

// LookupPublicKey returns the current sealing public key published in the keys bucket, or
// [ErrNoPublicKey].
func LookupPublicKey(ctx context.Context, js jetstream.JetStream, s events.Subjects) (string, error) {
	kv, err := js.KeyValue(ctx, KeysBucket(s))
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return "", ErrNoPublicKey
	}
	if err != nil {
		return "", fmt.Errorf("seal: keys bucket %s: %w", KeysBucket(s), err)
	}
	e, err := kv.Get(ctx, PublicKeyName)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", ErrNoPublicKey
	}
	if err != nil {
		return "", fmt.Errorf("seal: keys bucket %s: %w", KeysBucket(s), err)
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(e.Value())), "\n")
	if first = strings.TrimSpace(first); first == "" {
		return "", ErrNoPublicKey
	}
	return first, nil
}
