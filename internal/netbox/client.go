package netbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	gonetbox "github.com/netbox-community/go-netbox/v4"

	"github.com/proxbus/proxbus/internal/httpbody"
)

// maxBody bounds how much of an answer the client reads.
const maxBody = 4 << 20

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
// returns an error wrapping ErrConfig; the error never contains the token.
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
		return nil, fmt.Errorf("%w: negative timeout", ErrConfig)
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	// Each request is bounded by a context deadline of timeout (send, FindJournalEntry), not
	// by http.Client.Timeout: over a wrapped transport (metrics, tracing) net/http enforces the
	// client's own Timeout with two goroutines and a timer per request.
	hc := &http.Client{}
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient
		hc = &c
	}

	nc := gonetbox.NewConfiguration()
	nc.Servers = gonetbox.ServerConfigurations{{URL: base, Description: "NetBox"}}
	nc.HTTPClient = hc
	nc.UserAgent = "proxbus"
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

// Ping checks that NetBox answers an authenticated GET /api/status/ with 200. It is the
// readiness probe; it returns ErrUnauthorized for a bad token and ErrUnavailable when
// NetBox cannot be reached.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.get(ctx, "ping", "/api/status/")
	return err
}

// get performs an authenticated GET of path (below the base URL) and returns the body of a
// 2xx answer; anything else is classified into an *Error.
func (c *Client) get(ctx context.Context, op, path string) ([]byte, error) {
	return c.send(ctx, op, http.MethodGet, path, nil)
}

// send performs an authenticated request of path (below the base URL) with an optional JSON
// body and returns the body of a 2xx answer; anything else is classified into an *Error.
func (c *Client) send(ctx context.Context, op, method, path string, jsonBody []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if jsonBody != nil {
		rd = bytes.NewReader(jsonBody)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, newError(op, ErrRejected, 0, nil, "", err, c.secrets)
	}
	req.Header.Set("Authorization", c.auth)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "proxbus")
	if jsonBody != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.transportError(op, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := httpbody.Read(resp, maxBody)
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

// apiResult classifies the outcome of a go-netbox call. ok is true for a 2xx answer; body is
// the answer's body (go-netbox leaves it readable).
func (c *Client) apiResult(op string, resp *http.Response, err error) (body []byte, ok bool, _ error) {
	if resp == nil {
		if err == nil {
			err = errors.New("no answer")
		}
		return nil, false, c.transportError(op, err)
	}
	if resp.Body != nil {
		b, rerr := httpbody.Read(resp, maxBody)
		_ = resp.Body.Close()
		if rerr != nil {
			return nil, false, c.transportError(op, rerr)
		}
		body = b
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return body, false, classify(op, resp.StatusCode, body, c.secrets)
	}
	return body, true, nil
}
