package sign_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/sign"
)

func newSigner(t testing.TB) *sign.Signer {
	t.Helper()
	s, seed, err := sign.Generate()
	if err != nil || !strings.HasPrefix(string(seed), "SU") {
		t.Fatalf("Generate: %v", err)
	}
	return s
}

func sampleCommand() events.Command {
	return events.Command{
		ID: "cmd-1", Source: "urn:example:sync", Type: "proxbus.vm.start", Verb: "vm.start",
		Time: time.Date(2026, 12, 2, 3, 4, 5, 0, time.UTC), EndpointID: 7, HasEndpointID: true,
		IdempotencyKey: "k-1", Actor: "sync:alice", Data: json.RawMessage(`{"vm":"web1"}`),
	}
}

// TestCanonical pins the canonical form byte for byte: docs/producers.md documents it, and a
// producer in another language reproduces it.
func TestCanonical(t *testing.T) {
	t.Parallel()
	c := sampleCommand()
	c.Expires = time.Date(2026, 12, 2, 3, 19, 5, 500000000, time.FixedZone("x", 3600))
	want := "proxbus-command-signature-v1\n" +
		"specversion 3\n1.0\n" +
		"id 5\ncmd-1\n" +
		"source 16\nurn:example:sync\n" +
		"type 16\nproxbus.vm.start\n" +
		"time 20\n2026-12-02T03:04:05Z\n" +
		"endpointid 1\n7\n" +
		"idempotencykey 3\nk-1\n" +
		"actor 10\nsync:alice\n" +
		"expires 22\n2026-12-02T02:19:05.5Z\n" +
		"dryrun 5\nfalse\n" +
		"data 13\n{\"vm\":\"web1\"}\n"
	if got := string(sign.Canonical(c)); got != want {
		t.Errorf("Canonical =\n%q\nwant\n%q", got, want)
	}
}

func TestSignVerify(t *testing.T) {
	t.Parallel()
	s, other := newSigner(t), newSigner(t)
	signed, err := s.Sign(sampleCommand())
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	if signed.Producer != s.Public() || !strings.HasPrefix(signed.Producer, "U") {
		t.Fatalf("Producer = %q", signed.Producer)
	}
	tests := []struct {
		name   string
		mutate func(*events.Command)
		want   error
	}{
		{"as signed", func(*events.Command) {}, nil},
		{"unsigned", func(c *events.Command) { c.Producer, c.Signature = "", "" }, sign.ErrUnsigned},
		{"another endpoint", func(c *events.Command) { c.EndpointID = 8 }, sign.ErrInvalid},
		{"endpoint dropped", func(c *events.Command) { c.HasEndpointID = false }, sign.ErrInvalid},
		{"another actor", func(c *events.Command) { c.Actor = "sync:bob" }, sign.ErrInvalid},
		{"another id", func(c *events.Command) { c.ID = "cmd-2" }, sign.ErrInvalid},
		{"later time", func(c *events.Command) { c.Time = c.Time.Add(time.Hour) }, sign.ErrInvalid},
		{"dry run flipped", func(c *events.Command) { c.DryRun = true }, sign.ErrInvalid},
		{"data changed", func(c *events.Command) { c.Data = json.RawMessage(`{"vm":"web2"}`) }, sign.ErrInvalid},
		{"data reformatted", func(c *events.Command) { c.Data = json.RawMessage(`{"vm": "web1"}`) }, sign.ErrInvalid},
		{"another producer's key", func(c *events.Command) { c.Producer = other.Public() }, sign.ErrInvalid},
		{"not a user key", func(c *events.Command) { c.Producer = "N" + c.Producer[1:] }, sign.ErrInvalid},
		{"not base64", func(c *events.Command) { c.Signature = "***" }, sign.ErrInvalid},
		{"signature missing", func(c *events.Command) { c.Signature = "" }, sign.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := signed
			tt.mutate(&c)
			if err := sign.Verify(c); !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Errorf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestSignedRoundTrip sends a signed command through both content modes of the events codec:
// the decoded command verifies.
func TestSignedRoundTrip(t *testing.T) {
	t.Parallel()
	s := newSigner(t)
	c := sampleCommand()
	c.Expires = c.Time.Add(15 * time.Minute)
	signed, err := s.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	subjects := events.NewSubjects("proxbus")
	for _, enc := range []struct {
		name string
		fn   func(events.Subjects, events.Command) (*nats.Msg, error)
	}{{"binary", events.EncodeBinary}, {"structured", events.EncodeStructured}} {
		t.Run(enc.name, func(t *testing.T) {
			t.Parallel()
			m, err := enc.fn(subjects, signed)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			got, err := events.Decode(m.Subject, m.Header, m.Data, subjects)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if err := sign.Verify(got); err != nil {
				t.Errorf("Verify after the round trip: %v", err)
			}
		})
	}
}

func TestNewSignerRefusesOtherSeeds(t *testing.T) {
	t.Parallel()
	acct, _ := nkeys.CreateAccount()
	seed, _ := acct.Seed()
	for _, s := range [][]byte{seed, []byte("SUnope"), nil} {
		if _, err := sign.NewSigner(s); !errors.Is(err, sign.ErrBadSeed) {
			t.Errorf("NewSigner(%.4s…) = %v, want ErrBadSeed", s, err)
		}
	}
}
