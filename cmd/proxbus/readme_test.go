package main

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// readmeNATSPub finds the README's `nats pub` example: the subject, the body and the -H
// headers, over its continuation lines.
var readmeNATSPub = regexp.MustCompile(`nats --server \S+ pub (\S+) '([^']*)'((?:\s*\\\n|\s+-H \S+)+)`)

// TestReadmeNATSPub publishes the README's `nats pub` example as the nats CLI would (its
// subject, body and headers) to a serving proxbus: the command runs, and `proxbus events --id`
// as the README shows it follows it to its result.
func TestReadmeNATSPub(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := readmeNATSPub.FindStringSubmatch(string(raw))
	if m == nil {
		t.Fatal("README.md has no `nats --server … pub SUBJECT 'BODY' -H …` example")
	}
	msg := nats.NewMsg(m[1])
	msg.Data = []byte(m[2])
	for _, h := range regexp.MustCompile(`-H (\S+)`).FindAllStringSubmatch(m[3], -1) {
		k, v, ok := strings.Cut(h[1], ":")
		if !ok {
			t.Fatalf("header %q has no colon", h[1])
		}
		msg.Header.Set(k, v)
	}
	env := devEnv(t)
	nc, err := nats.Connect(env.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	id, source := msg.Header.Get("ce-id"), msg.Header.Get("ce-source")
	var out strings.Builder
	if err := cmdEvents(context.Background(), []string{"--id", id, "--source", source, "--nats-url", env.NATSURL}, &out, &strings.Builder{}); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`result vm\.start 20\d`).MatchString(out.String()) {
		t.Errorf("the README's command did not succeed:\n%s", out.String())
	}
}
