package netbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	gonetbox "github.com/netbox-community/go-netbox/v4"

	"github.com/proxbus/proxbus/internal/config"
)

// maxBody bounds the size of any answer the client reads.
const maxBody = 4 << 20

// userAgent is the User-Agent of every request.
const userAgent = "proxbus"

// Client talks to one NetBox. It is safe for concurrent use.
type Client struct {
	api     *gonetbox.APIClient
	http    *http.Client
	base    string
	auth    string
	secrets []string
	timeout time.Duration
}

// New validates cfg and returns a client. It makes no request. A bad URL or a missing token
// returns an error wrapping config.ErrInvalid; the error never contains the token.
func New(cfg Config) (*Client, error) {
	base, err := baseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	auth, err := authHeader(cfg.Token)
	if err != nil {
		return nil, err
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("netbox: %w: negative timeout", config.ErrInvalid)
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	hc := &http.Client{}
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient
		hc = &c
	}
	hc.Transport = limitBodies{next: hc.Transport}

	nc := gonetbox.NewConfiguration()
	nc.Servers = gonetbox.ServerConfigurations{{URL: base, Description: "NetBox"}}
	nc.HTTPClient = hc
	nc.UserAgent = userAgent
	nc.AddDefaultHeader("Authorization", auth)

	return &Client{
		api:     gonetbox.NewAPIClient(nc),
		http:    hc,
		base:    base,
		auth:    auth,
		secrets: tokenSecrets(cfg.Token),
		timeout: timeout,
	}, nil
}

// BaseURL returns the normalised base URL (no trailing slash, no /api).
func (c *Client) BaseURL() string { return c.base }

// Ping checks that NetBox answers an authenticated GET /api/status/ with its status document
// (a JSON object naming the netbox-version). It is the start-up and readiness probe; it
// returns ErrUnauthorized for a refused token (401/403), ErrUnavailable when NetBox cannot be
// reached or is busy (network errors, timeouts, 408, 429, 5xx), ErrNotNetBox when the URL
// answers but not as NetBox (404, or a 2xx that is not the status document) and ErrRejected
// for any other answer.
func (c *Client) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	status, resp, err := c.api.StatusAPI.StatusRetrieve(ctx).Execute()
	undecoded, err := c.check("ping", resp, err)
	switch {
	case errors.Is(err, ErrNotFound):
		return newError("ping", ErrNotNetBox, http.StatusNotFound, nil, "GET /api/status/ is not found", nil, c.secrets)
	case err != nil:
		return err
	case undecoded != nil:
		status = nil
		if json.Unmarshal(undecoded, &status) != nil {
			return newError("ping", ErrNotNetBox, resp.StatusCode, nil, "the answer to GET /api/status/ is not JSON", nil, c.secrets)
		}
	}
	if v, ok := status["netbox-version"].(string); !ok || v == "" {
		return newError("ping", ErrNotNetBox, resp.StatusCode, nil, "the answer to GET /api/status/ names no netbox-version", nil, c.secrets)
	}
	return nil
}

// check classifies the outcome of a go-netbox call, whose request ran under a deadline of the
// client's timeout. It returns a nil error for a 2xx answer. undecoded is the raw body of a
// 2xx answer that go-netbox's strict model decoding refused, nil when the model decoded.
func (c *Client) check(op string, resp *http.Response, err error) (undecoded []byte, _ error) {
	if err == nil && resp != nil {
		return nil, nil
	}
	var apiErr *gonetbox.GenericOpenAPIError
	switch {
	case resp == nil:
		// http.Client.Do reports every failure to get an answer as a *url.Error; anything
		// else is go-netbox refusing to build the request.
		if err == nil {
			err = errors.New("no answer")
		}
		var uerr *url.Error
		if errors.As(err, &uerr) {
			return nil, c.transportError(op, err)
		}
		return nil, newError(op, ErrRejected, 0, nil, "", err, c.secrets)
	case !errors.As(err, &apiErr):
		// The answer's body could not be read: cut off, too large, or out of time.
		return nil, c.transportError(op, err)
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return nil, classify(op, resp.StatusCode, apiErr.Body(), c.secrets)
	default:
		return apiErr.Body(), nil
	}
}

// get performs an authenticated GET of path (below the base URL) with plain net/http and
// returns the body of a 2xx answer; anything else is classified into an *Error. It is for the
// requests go-netbox cannot make (see the package doc).
func (c *Client) get(ctx context.Context, op, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, newError(op, ErrRejected, 0, nil, "", err, c.secrets)
	}
	req.Header.Set("Authorization", c.auth)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.transportError(op, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body) // at most maxBody: see limitBodies
	if err != nil {
		return nil, c.transportError(op, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, classify(op, resp.StatusCode, body, c.secrets)
	}
	return body, nil
}

// transportError wraps a failure to get an answer at all: always transient.
func (c *Client) transportError(op string, err error) *Error {
	return newError(op, ErrUnavailable, 0, nil, "", err, c.secrets)
}

// limitBodies is the client's transport: it fails the read of any answer body longer than
// maxBody, for go-netbox's reads and the client's own alike.
type limitBodies struct {
	next http.RoundTripper // http.DefaultTransport when nil
}

// RoundTrip sends r through the wrapped transport and bounds the answer's body.
func (l limitBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	next := l.next
	if next == nil {
		next = http.DefaultTransport
	}
	resp, err := next.RoundTrip(r)
	if resp != nil && resp.Body != nil {
		resp.Body = http.MaxBytesReader(nil, resp.Body, maxBody)
	}
	return resp, err
}
