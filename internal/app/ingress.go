package app

import (
	"fmt"
	"net/http"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/ingress"
)

// Ingress configures the HTTP fronts that turn requests into commands (docs/ingress.md). Each
// front is mounted only when its credential is set: nothing that publishes commands is ever
// served anonymously. Both need the HTTP server (Config.HTTPAddr).
type Ingress struct {
	// WebhookSecret enables POST /webhooks/netbox, verified with X-Hook-Signature.
	WebhookSecret string
	// WebhookRulesFile maps plain NetBox webhook bodies to commands; empty: only structured
	// CloudEvent bodies make commands.
	WebhookRulesFile string
	// WebhookVerbs are the verbs the webhook may publish (ingress.Config.WebhookVerbs):
	// exact verbs or "prefix.*"; empty: every verb but command.*, which no front publishes.
	WebhookVerbs []string
	// ProxboxAPIKey enables the proxbox-api compatible POST /proxmox/storage/pbs, which
	// requires it in X-Proxbox-API-Key.
	ProxboxAPIKey string
	// ResultTimeout is how long the proxbox-api front waits for a result (default
	// ingress.DefaultResultTimeout).
	ResultTimeout time.Duration
}

// MinIngressSecretLength is the fewest characters the webhook secret and the proxbox-api key
// may have: a short one is guessed, and the log redactor does not cut values under four
// characters out of free text.
const MinIngressSecretLength = 16

// enabled reports whether any front is configured.
func (i Ingress) enabled() bool { return i.WebhookSecret != "" || i.ProxboxAPIKey != "" }

// secrets are the credentials the logs must never show.
func (i Ingress) secrets() []string { return []string{i.WebhookSecret, i.ProxboxAPIKey} }

// check refuses a configuration that cannot work, before anything is connected.
func (i Ingress) check(httpOn bool) (*ingress.Rules, error) {
	if !i.enabled() {
		if i.WebhookRulesFile != "" {
			return nil, fmt.Errorf("%w: a webhook rules file needs the webhook secret (PROXBUS_WEBHOOK_SECRET)", config.ErrInvalid)
		}
		return nil, nil
	}
	if !httpOn {
		return nil, fmt.Errorf("%w: the webhook ingress and the proxbox-api front need the HTTP server (PROXBUS_HTTP_ADDR)", config.ErrInvalid)
	}
	for _, c := range []struct{ what, value, also string }{
		{"the webhook secret (PROXBUS_WEBHOOK_SECRET)", i.WebhookSecret, ", and set the same in NetBox's webhook"},
		{"the proxbox-api key (PROXBUS_PROXBOX_API_KEY)", i.ProxboxAPIKey, ", and the same in proxbox's settings"},
	} {
		if c.value != "" && len(c.value) < MinIngressSecretLength {
			return nil, fmt.Errorf("%w: %s has %d characters; give one of at least %d (e.g. `openssl rand -hex 24`)%s",
				config.ErrInvalid, c.what, len(c.value), MinIngressSecretLength, c.also)
		}
	}
	if len(i.WebhookVerbs) > 0 && i.WebhookSecret == "" {
		return nil, fmt.Errorf("%w: webhook verbs (PROXBUS_WEBHOOK_VERBS) need the webhook secret (PROXBUS_WEBHOOK_SECRET)", config.ErrInvalid)
	}
	var rules *ingress.Rules
	if i.WebhookRulesFile != "" {
		var err error
		if rules, err = ingress.LoadRules(i.WebhookRulesFile); err != nil { // its errors wrap config.ErrInvalid
			return nil, fmt.Errorf("webhook rules %s (PROXBUS_WEBHOOK_RULES): %w", i.WebhookRulesFile, err)
		}
	}
	if err := ingress.CheckVerbs(i.WebhookVerbs, rules); err != nil {
		return nil, fmt.Errorf("webhook rules %s and verbs (PROXBUS_WEBHOOK_RULES, PROXBUS_WEBHOOK_VERBS): %w", i.WebhookRulesFile, err)
	}
	return rules, nil
}

// mount adds the configured fronts to mux. identityTTL is the store's command identity window
// (store.Options.DedupeTTL; 0: its default): no webhook older than that is accepted.
// endpointsChanged, when set, serves the ProxmoxEndpoint webhook (ingress.EndpointsWebhookPath);
// prepare, when set, finishes every command a front publishes (sealing, signing).
func (i Ingress) mount(mux *http.ServeMux, rules *ingress.Rules, deps RouteDeps, identityTTL time.Duration, endpointsChanged func(int64),
	prepare func(events.Command) (events.Command, error)) error {
	srv, err := ingress.New(ingress.Config{
		EndpointsChanged: endpointsChanged,
		JetStream:        deps.JetStream, Subjects: deps.Subjects,
		WebhookSecret: i.WebhookSecret, Rules: rules, WebhookVerbs: i.WebhookVerbs, FrontAPIKey: i.ProxboxAPIKey,
		ResultTimeout: i.ResultTimeout, MaxAge: identityTTL, Logger: deps.Logger.With("component", "ingress"),
		Prepare: prepare,
	})
	if err != nil {
		return err
	}
	srv.Routes(mux)
	return nil
}
