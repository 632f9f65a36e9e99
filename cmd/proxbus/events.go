package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
)

// cmdEvents tails events, one JSON line per event: all of them, or one command's.
func cmdEvents(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("events", stderr)
	natsURL := fs.str("nats-url", "nats://127.0.0.1:4222", "NATS server URL")
	natsSec := addNATSSecurityFlags(fs)
	prefix := fs.str("subject-prefix", "proxbus", "subject prefix")
	id := fs.String("id", "", "follow one command (its CloudEvents id)")
	source := fs.String("source", "urn:proxbus:cli", "the command's source (needed only for ids that are not plain tokens)")
	all := fs.Bool("all", false, "start with the oldest stored event instead of new ones")
	if err := fs.Parse(args); err != nil {
		return err
	}
	nc, js, err := app.ConnectClient(*natsURL, natsSec.security())
	if err != nil {
		return err
	}
	defer nc.Close()
	subjects := events.NewSubjects(*prefix)
	filter := ""
	if *id != "" {
		filter = subjects.Follow(events.Ref(*source, *id))
	}
	err = app.Tail(ctx, js, subjects, filter, *all || *id != "", func(subject string, ev events.Received) bool {
		fmt.Fprintf(stdout, "{\"subject\":%q,\"type\":%q,\"id\":%q,\"data\":%s}\n", subject, ev.Type, ev.ID, ev.Data)
		return true
	})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
