package app

import (
	"fmt"
	"log/slog"
	"strconv"

	"github.com/proxbus/proxbus/internal/endpointset"
	"github.com/proxbus/proxbus/internal/health"
	"github.com/proxbus/proxbus/internal/netbox"
	"github.com/proxbus/proxbus/internal/proxmox"
)

// newEndpointSet is the set of endpoints read from NetBox with nb, their clients built with
// popts. A changed endpoint's cached allow_writes is forgotten and its health check names
// what to fix in NetBox.
func newEndpointSet(cfg Config, nb *netbox.Client, popts []proxmox.ClientOption, cache *netbox.EndpointCache,
	tracker *health.Tracker, log *slog.Logger) (*endpointset.Set, error) {
	return endpointset.New(endpointset.Config{
		Source: nb, SecretsFile: cfg.EndpointSecretsFile, Getenv: cfg.Getenv, CAFile: cfg.EndpointCAFile,
		Interval: cfg.EndpointsReloadInterval, ClientOptions: popts,
		OnChange: func(id int64) {
			cache.Forget(id)
			tracker.Register(health.Dependency{Name: endpointCheckName(id), What: "Proxmox endpoint " + strconv.FormatInt(id, 10),
				Fix: "fix the ProxmoxEndpoint's username and token_name in NetBox, or " + endpointset.SecretVar(id)})
		},
		Logger: log.With("component", "endpoints"),
	})
}

// endpointsReady is the /readyz check of the endpoints read from NetBox: the set's own problems
// (not read yet, unusable endpoints), else the first endpoint that is unreachable or refuses
// its token.
func endpointsReady(set *endpointset.Set, tracker *health.Tracker) error {
	if err := set.Check(); err != nil {
		return err
	}
	for _, ep := range set.Endpoints() {
		if err := tracker.Check(endpointCheckName(ep.ID)); err != nil {
			reason := "down"
			if r, ok := err.(interface{ ReadyReason() string }); ok {
				reason = r.ReadyReason()
			}
			return &endpointset.Problem{Reason: fmt.Sprintf("%s: %s", endpointCheckName(ep.ID), reason)}
		}
	}
	return nil
}
