package ingress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/client"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/config"
)

// MaxBodyBytes bounds a request body; the commands stream refuses larger commands anyway
// (events.MaxCommandBytes).
const MaxBodyBytes = events.MaxCommandBytes

// Defaults of [Config].
const (
	DefaultSource        = "/netbox/webhook"
	DefaultFrontSource   = "/proxbox-api"
	DefaultResultTimeout = 60 * time.Second
	// DefaultMaxAge is the default of Config.MaxAge: the command identity window
	// (store.DefaultDedupeTTL).
	DefaultMaxAge = 24 * time.Hour
	// MaxClockSkew is how far in the future a webhook's time may lie (NetBox's clock ahead of
	// proxbus's); a later one is refused, or a signed body dated years ahead would stay
	// replayable long after its command's identity is forgotten.
	MaxClockSkew = 5 * time.Minute
)

// Paths served by [Server.Routes].
const (
	WebhookPath = "/webhooks/netbox"
	// EndpointsWebhookPath is the NetBox webhook of ProxmoxEndpoint changes (see
	// Config.EndpointsChanged).
	EndpointsWebhookPath = "/webhooks/netbox/endpoints"
	PBSPath              = "/proxmox/storage/pbs"
)

// Config configures a [Server]. The zero value of every field means its documented default
// (the Default… constants); a negative ResultTimeout is refused by [New] with an error
// wrapping config.ErrInvalid.
type Config struct {
	// JetStream publishes the commands (required).
	JetStream jetstream.JetStream
	// Conn is not used: the fronts publish and follow commands through JetStream with
	// [client.Client]. Deprecated: leave it unset.
	Conn *nats.Conn
	// Subjects names the subjects and streams (zero value: the default prefix).
	Subjects events.Subjects
	// WebhookSecret is the NetBox webhook's secret. Empty: POST /webhooks/netbox is not
	// mounted (a webhook that cannot be authenticated is never accepted).
	WebhookSecret string
	// Rules maps plain NetBox webhook bodies to commands. Nil: no rule, such bodies are
	// answered 204 (a structured CloudEvent is still accepted).
	Rules *Rules
	// WebhookVerbs are the verbs POST /webhooks/netbox may publish: exact verbs, or a prefix
	// and ".*" ("vm.*": every verb under vm.). Empty: every verb but the command.* verbs,
	// which no HTTP front ever publishes (an approval made with a webhook secret would defeat
	// the two-person rule). A rule whose verb is not allowed is refused by [New]. The
	// proxbox-api front publishes only [PBSVerb].
	WebhookVerbs []string
	// Source is the CloudEvents source of commands made from webhooks (default
	// DefaultSource).
	Source string
	// FrontSource is the CloudEvents source of commands made by the proxbox-api front
	// (default DefaultFrontSource).
	FrontSource string
	// FrontAPIKey is the X-Proxbox-API-Key the proxbox-api front requires, as proxbox-api
	// does. Empty: the front is not mounted (a write path is never anonymous).
	FrontAPIKey string
	// MaxAge is how old a webhook may be, by its signed time (a NetBox body's timestamp, a
	// CloudEvent's time): at most the command identity window (--dedupe-ttl), so that a
	// captured webhook sent again after its command's identity is forgotten is refused instead
	// of running again (default DefaultMaxAge).
	MaxAge time.Duration
	// Now is the clock the webhook's age is measured with (default time.Now).
	Now func() time.Time
	// ResultTimeout is how long the front waits for a result before answering 504 (default
	// DefaultResultTimeout).
	ResultTimeout time.Duration
	// EndpointsChanged, when set with WebhookSecret, mounts POST /webhooks/netbox/endpoints:
	// a NetBox webhook on the netbox-proxbox ProxmoxEndpoint model, verified as
	// /webhooks/netbox is, that calls it with the endpoint's id (0 when the body has none) so
	// the endpoints read from NetBox are read again. It publishes no command.
	EndpointsChanged func(id int64)
	// Logger receives one line per accepted or refused request, never a body value (default:
	// discard).
	Logger *slog.Logger
	// Prepare (optional) finishes each command the fronts make before it is published: it
	// seals its secret fields and signs it with the fronts' own key (contract §8, §8a), a
	// structured CloudEvent forwarded from a webhook included (re-encoded in structured mode).
	Prepare func(events.Command) (events.Command, error)
}

// Server serves the webhook ingress and the proxbox-api front. It is safe for concurrent use.
type Server struct {
	cfg Config
	log *slog.Logger
	// client publishes the commands and follows the front's to their results.
	client *client.Client
}

// New checks cfg and returns a server. It returns an error wrapping config.ErrInvalid, naming
// the field, when JetStream is missing, when a source is not a URI-reference or when
// ResultTimeout is negative.
func New(cfg Config) (*Server, error) {
	if cfg.JetStream == nil {
		return nil, fmt.Errorf("ingress: %w: JetStream is required", config.ErrInvalid)
	}
	if cfg.ResultTimeout < 0 {
		return nil, fmt.Errorf("ingress: %w: ResultTimeout %s is negative", config.ErrInvalid, cfg.ResultTimeout)
	}
	if cfg.MaxAge < 0 {
		return nil, fmt.Errorf("ingress: %w: MaxAge %s is negative", config.ErrInvalid, cfg.MaxAge)
	}
	config.Default(&cfg.MaxAge, DefaultMaxAge)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Subjects.Prefix == "" {
		cfg.Subjects = events.NewSubjects("")
	}
	if cfg.Source == "" {
		cfg.Source = DefaultSource
	}
	if cfg.FrontSource == "" {
		cfg.FrontSource = DefaultFrontSource
	}
	for _, src := range []string{cfg.Source, cfg.FrontSource} {
		if _, err := events.EncodeBinary(cfg.Subjects, events.Command{ID: "x", Source: src, Verb: "x"}); err != nil {
			return nil, fmt.Errorf("ingress: %w: source %q is not a URI-reference", config.ErrInvalid, src)
		}
	}
	if err := CheckVerbs(cfg.WebhookVerbs, cfg.Rules); err != nil {
		return nil, err
	}
	if cfg.ResultTimeout == 0 {
		cfg.ResultTimeout = DefaultResultTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// One publish, with JetStream's own retries: NetBox retries a webhook that got no answer.
	opts := []client.Option{client.WithSubjectPrefix(cfg.Subjects.Prefix), client.WithPublishRetry(false)}
	if cfg.Prepare != nil {
		opts = append(opts, client.WithPrepare(cfg.Prepare))
	}
	pc, err := client.New(cfg.JetStream, opts...)
	if err != nil {
		return nil, fmt.Errorf("ingress: %w", err)
	}
	return &Server{cfg: cfg, log: log.With("component", "ingress"), client: pc}, nil
}

// Routes mounts the enabled fronts on mux: POST /webhooks/netbox when a webhook secret is
// configured, POST /proxmox/storage/pbs when a front API key is configured.
func (s *Server) Routes(mux *http.ServeMux) {
	if s.cfg.WebhookSecret != "" {
		mux.HandleFunc("POST "+WebhookPath, s.handleWebhook)
		if s.cfg.EndpointsChanged != nil {
			mux.HandleFunc("POST "+EndpointsWebhookPath, s.handleEndpointsWebhook)
		}
	}
	if s.cfg.FrontAPIKey != "" {
		mux.HandleFunc("POST "+PBSPath, s.handlePBS)
	}
}

// readBody reads the whole body, at most MaxBodyBytes. A body announced or found larger is
// answered 413 (without reading past the limit) and ok is false.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.ContentLength > MaxBodyBytes {
		writeJSON(w, http.StatusRequestEntityTooLarge, errorBody{Reason: "body_too_large", Detail: fmt.Sprintf("the body exceeds %d bytes", MaxBodyBytes)})
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeJSON(w, http.StatusRequestEntityTooLarge, errorBody{Reason: "body_too_large", Detail: fmt.Sprintf("the body exceeds %d bytes", MaxBodyBytes)})
			return nil, false
		}
		writeJSON(w, http.StatusBadRequest, errorBody{Reason: "body_unreadable"})
		return nil, false
	}
	return body, true
}

// errorBody is every error answer: a machine-readable reason, optional fixed detail text and
// the names (never the values) of the fields at fault.
type errorBody struct {
	Reason string   `json:"reason"`
	Detail string   `json:"detail,omitempty"`
	Fields []string `json:"fields,omitempty"`
	Rule   string   `json:"rule,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the answers are JSON for programs, not HTML
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		b.Reset()
		b.WriteString(`{"reason":"internal_error"}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// CommandVerbPrefix begins the verbs that act on other commands (command.approve,
// command.reject, ...): no HTTP front publishes them, whatever its configuration.
const CommandVerbPrefix = "command."

// ErrVerbNotAllowed is wrapped when a front may not publish a verb: a command.* verb, or one
// outside its configured list.
var ErrVerbNotAllowed = errors.New("ingress: verb not allowed on this front")

// checkVerbPattern checks one entry of a verb list: a valid verb, or a verb prefix and ".*";
// never a command.* verb.
func checkVerbPattern(p string) error {
	v, _ := strings.CutSuffix(p, ".*")
	subjects := events.NewSubjects("")
	if _, ok := subjects.VerbOf(subjects.Command(v)); !ok {
		return errors.New("is not a verb (vm.start) or a verb prefix and .* (vm.*)")
	}
	if strings.HasPrefix(v+".", CommandVerbPrefix) {
		return fmt.Errorf("%w: command.* verbs are never published by an HTTP front", ErrVerbNotAllowed)
	}
	return nil
}

// CheckVerbs checks a webhook verb list (see Config.WebhookVerbs) and that every rule of rules
// (nil: none) makes a verb it allows. Its errors wrap config.ErrInvalid and name the entry or
// the rule.
func CheckVerbs(verbs []string, rules *Rules) error {
	for _, v := range verbs {
		if err := checkVerbPattern(v); err != nil {
			return fmt.Errorf("ingress: %w: webhook verbs: %q %w", config.ErrInvalid, v, err)
		}
	}
	for _, r := range rules.list() {
		if !verbAllowed(verbs, r.verb) {
			return fmt.Errorf("ingress: %w: rule %s: verb %s is not among the webhook verbs (%s)", config.ErrInvalid, r.name, r.verb, strings.Join(verbs, ", "))
		}
	}
	return nil
}

// verbAllowed reports whether a front whose verb list is allow may publish verb: never a
// command.* verb; any other when allow is empty; else one the list names.
func verbAllowed(allow []string, verb string) bool {
	if strings.HasPrefix(verb, CommandVerbPrefix) {
		return false
	}
	if len(allow) == 0 {
		return true
	}
	for _, p := range allow {
		if prefix, ok := strings.CutSuffix(p, "*"); ok && strings.HasSuffix(prefix, ".") {
			if strings.HasPrefix(verb, prefix) {
				return true
			}
		} else if p == verb {
			return true
		}
	}
	return false
}

// ErrPublish is wrapped when a command could not be stored in the commands stream.
var ErrPublish = errors.New("ingress: publish failed")
