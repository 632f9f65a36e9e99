package app

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/proxbus/proxbus/internal/health"
	"github.com/proxbus/proxbus/internal/netbox"
)

// netboxProbeEvery bounds how often /readyz asks NetBox itself: a probe's answer is reused for
// this long, so that many probes (several kubelets, a scraper) cost one request.
const netboxProbeEvery = time.Second

// netboxProbe is /readyz's NetBox check. The health tracker learns of NetBox only from the
// requests commands make, so an idle replica would say "ok" long after NetBox went away:
// the probe pings NetBox (GET /api/status/) at most every netboxProbeEvery, so /readyz
// reflects a lost NetBox within one probe interval, and a refused token as the tracker
// records it.
type netboxProbe struct {
	nb      *netbox.Client
	tracker *health.Tracker
	now     func() time.Time

	mu      sync.Mutex
	checked time.Time
	err     error // the last probe's transport failure, as a *waitError; nil when it answered
}

// Check pings NetBox unless it did within netboxProbeEvery, then answers as the tracker does
// (a refused token first), else with the probe's failure.
func (p *netboxProbe) Check(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := p.now(); now.Sub(p.checked) >= netboxProbeEvery {
		p.err = nil
		if err := p.nb.Ping(ctx); err != nil && !errors.Is(err, netbox.ErrUnauthorized) { // a refusal: the tracker has it
			p.err = waiting("unreachable", err)
		}
		p.checked = p.now()
	}
	if err := p.tracker.Check("netbox"); err != nil {
		return err
	}
	return p.err
}
