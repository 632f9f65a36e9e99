package main

import (
	"fmt"
	"os"
	"time"
)

// Range of --endpoints-reload-interval.
const (
	minEndpointsReload = time.Second
	maxEndpointsReload = 24 * time.Hour
)

// endpointFlags are serve's flags of the endpoints read from NetBox (docs/operations.md).
type endpointFlags struct {
	EndpointsFromNetBox     bool          `name:"endpoints-from-netbox" help:"Read the Proxmox endpoints from NetBox's netbox-proxbox ProxmoxEndpoints instead of --endpoints-file, again every --endpoints-reload-interval and on NetBox's ProxmoxEndpoint webhook (POST /webhooks/netbox/endpoints); each token secret is PROXBUS_ENDPOINT_<ID>_TOKEN_SECRET, in --endpoint-secrets-file or the environment."`
	EndpointSecretsFile     string        `name:"endpoint-secrets-file" help:"File of PROXBUS_ENDPOINT_<ID>_TOKEN_SECRET=… lines (systemd EnvironmentFile syntax), read again with the endpoints (--endpoints-from-netbox)."`
	EndpointCAFile          string        `name:"endpoint-ca-file" help:"PEM file of the CAs trusted for endpoints read from NetBox whose verify_ssl is true (default: the system roots)."`
	EndpointsReloadInterval time.Duration `name:"endpoints-reload-interval" default:"${endpoints_reload}" help:"How often the endpoints are read from NetBox again (--endpoints-from-netbox)."`
}

// reloadInterval is --endpoints-reload-interval when the endpoints are read from NetBox, else 0.
func (f endpointFlags) reloadInterval() time.Duration {
	if !f.EndpointsFromNetBox {
		return 0
	}
	return f.EndpointsReloadInterval
}

// preflight reports a combination of the endpoint flags that cannot work, and a secrets or CA
// file that cannot be read, each naming its flag.
func (f endpointFlags) preflight(e *cliEnv, endpointsFile string) []error {
	var errs []error
	if !f.EndpointsFromNetBox {
		for _, name := range []string{"endpoint-secrets-file", "endpoint-ca-file", "endpoints-reload-interval"} {
			if e.explicit(name) {
				errs = append(errs, fmt.Errorf("%s applies to endpoints read from NetBox: add %s, or leave it out", e.named(name), e.named("endpoints-from-netbox")))
			}
		}
		return errs
	}
	if endpointsFile != "" {
		errs = append(errs, fmt.Errorf("%s and %s: the endpoints come from the file or from NetBox; give one", e.named("endpoints-file"), e.named("endpoints-from-netbox")))
	}
	for _, file := range []struct{ name, path string }{{"endpoint-secrets-file", f.EndpointSecretsFile}, {"endpoint-ca-file", f.EndpointCAFile}} {
		if file.path == "" {
			continue
		}
		if fh, err := os.Open(file.path); err != nil {
			// The *PathError names the file and the cause, never the content.
			errs = append(errs, fmt.Errorf("%s: %w", e.named(file.name), err))
		} else {
			_ = fh.Close()
		}
	}
	return errs
}
