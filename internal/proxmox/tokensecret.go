package proxmox

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// ErrNoSecret is wrapped when an endpoint's token secret cannot be resolved.
var ErrNoSecret = errors.New("proxmox: token secret unavailable")

// TokenSecret resolves the endpoint's API token secret from the environment variable named
// by TokenSecretEnv (looked up with getenv; nil means os.Getenv) or from the file named by
// TokenSecretFile, trimmed of surrounding white space. An unset or empty variable, an
// unreadable or empty file, or neither source configured → an error wrapping [ErrNoSecret]
// that names the source but never contains the secret.
func (e EndpointConfig) TokenSecret(getenv func(string) string) (Secret, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	switch {
	case e.TokenSecretEnv != "":
		v := strings.TrimSpace(getenv(e.TokenSecretEnv))
		if v == "" {
			return "", fmt.Errorf("%w: endpoint %d: environment variable %s is unset or empty", ErrNoSecret, e.ID, e.TokenSecretEnv)
		}
		return Secret(v), nil
	case e.TokenSecretFile != "":
		data, err := os.ReadFile(e.TokenSecretFile)
		if err != nil {
			// The *PathError names the file and the cause, never the content.
			return "", fmt.Errorf("%w: endpoint %d: %w", ErrNoSecret, e.ID, err)
		}
		v := strings.TrimSpace(string(data))
		if v == "" {
			return "", fmt.Errorf("%w: endpoint %d: file %s is empty", ErrNoSecret, e.ID, e.TokenSecretFile)
		}
		return Secret(v), nil
	default:
		return "", fmt.Errorf("%w: endpoint %d: neither token_secret_env nor token_secret_file is set", ErrNoSecret, e.ID)
	}
}
