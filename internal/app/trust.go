package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/handlers"
	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/producers"
	"github.com/proxbus/proxbus/seal"
	"github.com/proxbus/proxbus/sign"
	"github.com/proxbus/proxbus/store"
)

// Trust is the sealed-secrets and signed-commands part of the [Config] (contract §8, §8a;
// docs/security.md).
type Trust struct {
	// SealKeyFiles are files holding one proxbus identity each (written by proxbus keys):
	// the current key first; a second one is accepted during a key rotation.
	SealKeyFiles []string
	// RequireSealedSecrets refuses a plain secret field with 422 secret_not_sealed.
	RequireSealedSecrets bool
	// ProducersFile maps producer keys to their rights (package producers); it is read again
	// when it changes.
	ProducersFile string
	// RequireSignedCommands refuses unsigned commands with 403 producer_not_allowed.
	RequireSignedCommands bool
	// FrontKeyFile is the NKey user seed the HTTP fronts sign their commands with; "": they
	// publish unsigned commands.
	FrontKeyFile string
}

// commandRecords tells whether a command has a record in the store (store.Store).
type commandRecords interface {
	Record(ctx context.Context, c store.CommandKey) (store.RecordState, []byte, error)
}

// admission is the consumer middleware that runs only the commands gate allows (contract
// §8a): a refused one is answered 403 (reason producer_not_allowed or signature_invalid) and
// dead-lettered, and nothing else is written for it.
//
// A command that has a record already was admitted before: refused now for its rights (the
// producers file changed while it ran, or a copy of it arrived), it still goes to the
// pipeline, which resumes or replays it and never dead-letters a command that may have
// written. Refused for its signature, the message is dead-lettered without a result, so that
// the admitted command's own result is not taken by the refusal's.
func admission(gate *producers.Gate, records commandRecords, pub handlers.Publisher, log *slog.Logger) consumer.Middleware {
	return func(next consumer.Handler) consumer.Handler {
		return consumer.HandlerFunc(func(ctx context.Context, cmd events.Command, d events.Delivery) events.Disposition {
			refusal := gate.Check(cmd)
			if refusal == nil {
				return next.Handle(ctx, cmd, d)
			}
			state, _, err := records.Record(ctx, store.CommandKey{Source: cmd.Source, ID: cmd.ID})
			switch {
			case err != nil:
				log.Warn("a refused producer's command could not be looked up; it will be redelivered", "command_id", cmd.ID, "err", err)
				return events.Disposition{Action: events.Redeliver, Delay: time.Second}
			case state != store.Absent && refusal.Rights:
				return next.Handle(ctx, cmd, d)
			case state != store.Absent:
				log.Warn("command refused: producer; a command of that id was admitted before, its result stands", "command_id", cmd.ID, "reason", refusal.Reason)
				return events.Disposition{Action: events.DeadLetter, Reason: refusal.Reason}
			}
			o := events.OriginOf(cmd)
			o.Delivery, o.Producer = d.StreamSeq, "" // not a producer whose rights let it run
			res := events.Result{Status: http.StatusForbidden, Result: events.ResultRefused, Reason: refusal.Reason, Detail: refusal.Detail}
			if err := pub.Publish(context.WithoutCancel(ctx), o, res); err != nil {
				log.Warn("the refusal of a producer's command could not be published; it will be redelivered", "command_id", cmd.ID, "err", err)
				return events.Disposition{Action: events.Redeliver, Delay: time.Second}
			}
			log.Warn("command refused: producer", "command_id", cmd.ID, "verb", cmd.Verb, "reason", refusal.Reason, "detail", refusal.Detail)
			return events.Disposition{Action: events.DeadLetter, Reason: refusal.Reason}
		})
	}
}

// opener reads the identities of SealKeyFiles; nil when there are none.
func (t Trust) opener() (*seal.Opener, error) {
	if len(t.SealKeyFiles) == 0 {
		if t.RequireSealedSecrets {
			return nil, fmt.Errorf("%w: --require-sealed-secrets needs a sealing key (--seal-key-file, written by proxbus keys create)", config.ErrInvalid)
		}
		return nil, nil
	}
	if len(t.SealKeyFiles) > 2 {
		return nil, fmt.Errorf("%w: --seal-key-file: at most two keys (the new one and, during a rotation, the old one)", config.ErrInvalid)
	}
	ids := make([]string, 0, len(t.SealKeyFiles))
	for _, path := range t.SealKeyFiles {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%w: --seal-key-file %s: %w", config.ErrInvalid, path, err)
		}
		ids = append(ids, IdentityLine(string(b)))
	}
	o, err := seal.NewOpener(ids...)
	if err != nil {
		return nil, fmt.Errorf("%w: --seal-key-file: %w (write one with proxbus keys create)", config.ErrInvalid, err)
	}
	return o, nil
}

// frontPrepare is what the HTTP fronts do to each command they make: seal its secret fields
// to the current key of opener (when proxbus has one) and sign it with FrontKeyFile's key
// (when set), giving it its time first if it has none. Nil when there is nothing to do.
func (t Trust) frontPrepare(opener *seal.Opener, now func() time.Time) (func(events.Command) (events.Command, error), error) {
	var signer *sign.Signer
	if t.FrontKeyFile != "" {
		seed, err := os.ReadFile(t.FrontKeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: --front-key-file %s: %w", config.ErrInvalid, t.FrontKeyFile, err)
		}
		if signer, err = sign.NewSigner(seed); err != nil {
			return nil, fmt.Errorf("%w: --front-key-file %s: %w (write one with proxbus keys producer)", config.ErrInvalid, t.FrontKeyFile, err)
		}
	}
	if opener == nil && signer == nil {
		return nil, nil
	}
	return func(c events.Command) (events.Command, error) {
		if opener != nil && len(c.Data) > 0 {
			data, err := seal.SealData(c.Data, opener.Public()[0])
			if err != nil {
				return c, err
			}
			c.Data = data
		}
		if signer == nil {
			return c, nil
		}
		if c.Time.IsZero() {
			c.Time = now().UTC()
		}
		return signer.Sign(c)
	}, nil
}

// secretOpener is o as the pipeline takes it: nil when o is.
func secretOpener(o *seal.Opener) handlers.SecretOpener {
	if o == nil {
		return nil
	}
	return o
}

// IdentityLine returns the first line of an identity file that is not a # comment (age's
// own key files start with "# created: …" and "# public key: …").
func IdentityLine(s string) string {
	for line := range strings.Lines(s) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			return line
		}
	}
	return ""
}
