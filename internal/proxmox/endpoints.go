package proxmox

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/proxbus/proxbus/internal/config"
)

// Defaults applied by [ParseEndpoints] to fields left out of the endpoints file.
const (
	DefaultTimeout     = 30 * time.Second // per request
	DefaultMaxParallel = 4                // concurrent commands against one cluster
)

// EndpointConfig is one entry of the endpoints file (contract §10): how to reach one Proxmox
// VE cluster, known to NetBox as the ProxmoxEndpoint with the same ID.
type EndpointConfig struct {
	ID   int64  `yaml:"id"`
	Name string `yaml:"name"`
	// URLs are the cluster's API base URLs (scheme, host, port), tried in order; "/api2/json"
	// is appended. A URL given with "/api2/json" already is accepted as is.
	URLs []string `yaml:"urls"`
	// TokenID is the API token id, USER@REALM!TOKENID.
	TokenID string `yaml:"token_id"`
	// Exactly one of TokenSecretEnv (environment variable name) or TokenSecretFile (path)
	// names where the token secret is read from; see [EndpointConfig.TokenSecret].
	TokenSecretEnv  string    `yaml:"token_secret_env"`
	TokenSecretFile string    `yaml:"token_secret_file"`
	TLS             TLSConfig `yaml:"tls"`
	// ReadOnly forces the write gate closed whatever NetBox says.
	ReadOnly bool `yaml:"read_only"`
	// MaxParallel bounds concurrent commands against this cluster; 0 means DefaultMaxParallel.
	MaxParallel int       `yaml:"max_parallel"`
	SSH         SSHConfig `yaml:"ssh"`
	// Approval lists the verbs whose commands on this endpoint need a second person's
	// approval before they run (contract §4b).
	Approval ApprovalConfig `yaml:"approval"`
	// Timeout bounds each HTTP request; 0 means DefaultTimeout.
	Timeout time.Duration `yaml:"timeout"`
}

// ApprovalConfig is an endpoint's two-person rule: the verbs whose commands wait for a
// command.approve from an actor other than their own.
type ApprovalConfig struct {
	Verbs []string `yaml:"verbs"`
}

// Needs reports whether commands of verb need approval.
func (a ApprovalConfig) Needs(verb string) bool { return slices.Contains(a.Verbs, verb) }

// TLSConfig selects how the cluster's certificate is verified. At most one field may be set:
// CAFile trusts only the CAs in that PEM file; Fingerprint pins the leaf certificate's SHA-256
// (colon-separated hex, any case) and accepts nothing else; InsecureSkipVerify disables
// verification. With none set the system roots are used.
type TLSConfig struct {
	CAFile             string `yaml:"ca_file"`
	Fingerprint        string `yaml:"fingerprint"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
}

// SSHConfig is how proxbus reaches the cluster's nodes over SSH (image downloads). Either
// all three fields are set or none.
type SSHConfig struct {
	User           string `yaml:"user"`
	KeyFile        string `yaml:"key_file"`
	KnownHostsFile string `yaml:"known_hosts_file"`
}

// Enabled reports whether SSH access is configured.
func (s SSHConfig) Enabled() bool { return s.User != "" || s.KeyFile != "" || s.KnownHostsFile != "" }

type endpointsFile struct {
	Endpoints []rawEndpoint `yaml:"endpoints"`
}

// rawEndpoint is EndpointConfig as written in the file: the timeout is decoded by
// ParseEndpoints so a bad value is reported with its field name.
type rawEndpoint struct {
	ID              int64          `yaml:"id"`
	Name            string         `yaml:"name"`
	URLs            []string       `yaml:"urls"`
	TokenID         string         `yaml:"token_id"`
	TokenSecretEnv  string         `yaml:"token_secret_env"`
	TokenSecretFile string         `yaml:"token_secret_file"`
	TLS             TLSConfig      `yaml:"tls"`
	ReadOnly        bool           `yaml:"read_only"`
	MaxParallel     int            `yaml:"max_parallel"`
	SSH             SSHConfig      `yaml:"ssh"`
	Approval        ApprovalConfig `yaml:"approval"`
	Timeout         string         `yaml:"timeout"`
}

func (r rawEndpoint) config() (EndpointConfig, error) {
	e := EndpointConfig{
		ID: r.ID, Name: r.Name, URLs: r.URLs, TokenID: r.TokenID, TokenSecretEnv: r.TokenSecretEnv,
		TokenSecretFile: r.TokenSecretFile, TLS: r.TLS, ReadOnly: r.ReadOnly, MaxParallel: r.MaxParallel, SSH: r.SSH,
		Approval: r.Approval,
	}
	if r.Timeout != "" {
		d, err := time.ParseDuration(r.Timeout)
		if err != nil {
			return e, fmt.Errorf("timeout: %q is not a duration such as 30s", r.Timeout)
		}
		e.Timeout = d
	}
	return e, nil
}

// tokenIDPattern is PVE's USER@REALM!TOKENID.
var tokenIDPattern = regexp.MustCompile(`^[^\s@:!]+@[A-Za-z][A-Za-z0-9.\-_]*![A-Za-z][A-Za-z0-9.\-_]*$`)

// ParseEndpoints decodes and validates an endpoints file. It is strict: unknown keys,
// duplicate ids, a missing id, urls or token_id, anything but exactly one of
// token_secret_env/token_secret_file, conflicting TLS settings or a malformed fingerprint
// are errors wrapping [config.ErrInvalid] that name the entry and the field. Defaults
// (Timeout, MaxParallel) are filled in and URLs normalised (no trailing "/" or "/api2/json").
// Secrets are not read here.
func ParseEndpoints(data []byte) ([]EndpointConfig, error) {
	var f endpointsFile
	if len(bytes.TrimSpace(data)) > 0 {
		if err := config.UnmarshalYAMLStrict(data, &f); err != nil {
			return nil, fmt.Errorf("proxmox: endpoints file: %w", err)
		}
	}
	seen := make(map[int64]int, len(f.Endpoints))
	out := make([]EndpointConfig, 0, len(f.Endpoints))
	for i, raw := range f.Endpoints {
		where := fmt.Sprintf("endpoints[%d]", i)
		if raw.ID != 0 {
			where = fmt.Sprintf("endpoints[%d] (id %d)", i, raw.ID)
		}
		e, err := raw.config()
		if err != nil {
			return nil, fmt.Errorf("proxmox: endpoints file: %w: %s: %w", config.ErrInvalid, where, err)
		}
		if err := normalise(&e, true); err != nil {
			return nil, fmt.Errorf("proxmox: endpoints file: %w: %s: %w", config.ErrInvalid, where, err)
		}
		if j, dup := seen[e.ID]; dup {
			return nil, fmt.Errorf("proxmox: endpoints file: %w: %s: id: duplicate of endpoints[%d]", config.ErrInvalid, where, j)
		}
		seen[e.ID] = i
		out = append(out, e)
	}
	return out, nil
}

// LoadEndpoints reads the endpoints file at path and parses it with [ParseEndpoints].
func LoadEndpoints(path string) ([]EndpointConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("proxmox: read endpoints file: %w", err)
	}
	cfgs, err := ParseEndpoints(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfgs, nil
}

// normalise validates one entry and fills in its defaults. fromFile requires a token secret
// source (NewClient is handed the secret itself).
func normalise(e *EndpointConfig, fromFile bool) error {
	if e.ID <= 0 {
		return errors.New("id: required, a positive integer (the NetBox ProxmoxEndpoint id)")
	}
	if len(e.URLs) == 0 {
		return errors.New("urls: required, at least one https://host:8006 URL")
	}
	urls := make([]string, len(e.URLs))
	for i, raw := range e.URLs {
		u, err := normaliseURL(raw)
		if err != nil {
			return fmt.Errorf("urls[%d]: %w", i, err)
		}
		urls[i] = u
	}
	e.URLs = urls
	if e.TokenID == "" {
		return errors.New("token_id: required (USER@REALM!TOKENID)")
	}
	if !tokenIDPattern.MatchString(e.TokenID) {
		return errors.New("token_id: must have the form USER@REALM!TOKENID")
	}
	switch {
	case fromFile && e.TokenSecretEnv == "" && e.TokenSecretFile == "":
		return errors.New("token_secret_env or token_secret_file: one is required")
	case e.TokenSecretEnv != "" && e.TokenSecretFile != "":
		return errors.New("token_secret_env and token_secret_file: set only one")
	}
	if err := validateTLS(e.TLS); err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	if e.MaxParallel < 0 {
		return errors.New("max_parallel: must not be negative")
	}
	if e.MaxParallel == 0 {
		e.MaxParallel = DefaultMaxParallel
	}
	if e.Timeout < 0 {
		return errors.New("timeout: must not be negative")
	}
	if e.Timeout == 0 {
		e.Timeout = DefaultTimeout
	}
	if e.SSH.Enabled() {
		switch {
		case e.SSH.User == "":
			return errors.New("ssh.user: required when ssh is configured")
		case e.SSH.KeyFile == "":
			return errors.New("ssh.key_file: required when ssh is configured")
		case e.SSH.KnownHostsFile == "":
			return errors.New("ssh.known_hosts_file: required when ssh is configured")
		}
	}
	if e.Name == "" {
		e.Name = fmt.Sprintf("endpoint-%d", e.ID)
	}
	return nil
}

// normaliseURL checks an API base URL and strips a trailing "/" and "/api2/json".
func normaliseURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", fmt.Errorf("not a URL: %w", err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return "", errors.New("scheme must be https (or http)")
	}
	if u.Host == "" {
		return "", errors.New("host missing")
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", errors.New("must not contain credentials, a query or a fragment")
	}
	p := strings.TrimSuffix(strings.TrimRight(u.Path, "/"), "/api2/json")
	if p != "" {
		return "", errors.New("must not contain a path other than /api2/json")
	}
	return u.Scheme + "://" + u.Host, nil
}
