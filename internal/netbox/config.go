package netbox

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/proxbus/proxbus/internal/config"
)

// DefaultTimeout bounds one request to NetBox when [Config.Timeout] is zero.
const DefaultTimeout = 10 * time.Second

// Config says how to reach NetBox.
type Config struct {
	// URL is the base URL, e.g. https://netbox.example.net (no /api; a trailing /api is removed).
	URL string
	// Token is the API token. A v2 token ("nbt_<key>.<token>", NetBox 4.5+) is sent as
	// "Authorization: Bearer <token>", anything else (a v1 40-hex key) as "Token <token>".
	Token string
	// Timeout bounds each request, answer body included, through the request's context;
	// DefaultTimeout when zero.
	Timeout time.Duration
	// HTTPClient is optional (TLS settings, transport wrappers). It is copied, never modified.
	// Its own Timeout should be zero: Timeout already bounds every request.
	HTTPClient *http.Client
}

// What [New] refuses, each wrapped together with config.ErrInvalid, so that a caller can name
// its own setting (a flag) for it.
var (
	// ErrBadURL: Config.URL does not parse, is not http(s), has no host, or carries
	// credentials, a query or a fragment.
	ErrBadURL = errors.New("unusable NetBox URL")
	// ErrBadToken: Config.Token is empty or contains whitespace.
	ErrBadToken = errors.New("unusable NetBox token")
)

// baseURL validates raw and returns it without a trailing slash or /api.
func baseURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", fmt.Errorf("netbox: %w: %w: it does not parse", config.ErrInvalid, ErrBadURL)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("netbox: %w: %w: its scheme must be http or https", config.ErrInvalid, ErrBadURL)
	}
	if u.Host == "" {
		return "", fmt.Errorf("netbox: %w: %w: it has no host", config.ErrInvalid, ErrBadURL)
	}
	if u.User != nil {
		return "", fmt.Errorf("netbox: %w: %w: it must not contain credentials", config.ErrInvalid, ErrBadURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("netbox: %w: %w: it must not have a query or fragment", config.ErrInvalid, ErrBadURL)
	}
	p := strings.TrimRight(u.Path, "/")
	p = strings.TrimSuffix(p, "/api")
	u.Path, u.RawPath = p, ""
	return strings.TrimRight(u.String(), "/"), nil
}

// authHeader returns the Authorization header value for token.
func authHeader(token string) (string, error) {
	t := strings.TrimSpace(token)
	if t == "" {
		return "", fmt.Errorf("netbox: %w: %w: none is set", config.ErrInvalid, ErrBadToken)
	}
	if strings.ContainsAny(t, " \t\r\n") {
		return "", fmt.Errorf("netbox: %w: %w: it contains whitespace", config.ErrInvalid, ErrBadToken)
	}
	if strings.HasPrefix(t, "nbt_") {
		return "Bearer " + t, nil
	}
	return "Token " + t, nil
}

// tokenSecrets returns the literal values that must be cut out of any error text: the token
// and, for a v2 token, its secret part.
func tokenSecrets(token string) []string {
	t := strings.TrimSpace(token)
	out := []string{t}
	if strings.HasPrefix(t, "nbt_") {
		if _, secret, ok := strings.Cut(t, "."); ok {
			out = append(out, secret)
		}
	}
	return out
}
