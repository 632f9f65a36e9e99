package client

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/seal"
	"github.com/proxbus/proxbus/sign"
)

// TestSealingAndSigning pins WithSealing and WithSigner: the stored command holds its secret
// sealed to the key (it opens to the value; the plain value is nowhere in the message), and a
// signature over the command as stored, by the signer's key.
func TestSealingAndSigning(t *testing.T) {
	t.Parallel()
	js := streams(t, "")
	key, err := seal.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	signer, _, err := sign.Generate()
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(js, WithSigner(signer), WithSealing(key.Public))
	if err != nil {
		t.Fatal(err)
	}
	const secret = "canary-9f8e7d"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in := Raw{Verb: "storage.pbs.create", Data: json.RawMessage(`{"storage":"pbs1","password":"` + secret + `"}`)}
	if _, err := c.Publish(ctx, Command{Input: in, EndpointID: 1}, AwaitStreams()); err != nil {
		t.Fatal(err)
	}
	cmd, msg := stored(t, js, events.NewSubjects(""), "storage.pbs.create")
	if got := string(msg.Data) + string(cmd.Data); strings.Contains(got, secret) {
		t.Fatalf("the stored command holds the secret in the clear: %s", msg.Data)
	}
	var d struct {
		Password json.RawMessage `json:"password"`
	}
	if err := json.Unmarshal(cmd.Data, &d); err != nil {
		t.Fatal(err)
	}
	armored, ok := seal.Parse(d.Password)
	if !ok {
		t.Fatalf("password is %s, want a sealed value", d.Password)
	}
	opener, err := seal.NewOpener(key.Identity)
	if err != nil {
		t.Fatal(err)
	}
	if plain, err := opener.Open(armored); err != nil || plain != secret {
		t.Fatalf("the seal opens to %q, %v", plain, err)
	}
	if cmd.Producer != signer.Public() {
		t.Fatalf("producer %q, want the signer's %q", cmd.Producer, signer.Public())
	}
	if err := sign.Verify(cmd); err != nil {
		t.Fatalf("the stored command's signature: %v", err)
	}
	if _, err := New(js, WithSealing("not-a-key")); err == nil {
		t.Fatal("WithSealing accepted a key that is not an age public key")
	}
}
