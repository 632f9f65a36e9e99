package app

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/handlers"
	"github.com/proxbus/proxbus/internal/config"
)

// TestServeRefusesBadApprovalVerbs: an endpoint's approval list naming anything but a write
// verb stops serve before it connects, naming the endpoint, the field and the closest verb.
func TestServeRefusesBadApprovalVerbs(t *testing.T) {
	t.Parallel()
	e := newServeEnv(t)
	cfg := e.cfg
	cfg.Endpoints[1].Approval.Verbs = []string{"vm.delte", "vm.list"}
	err := Serve(context.Background(), cfg)
	if !errors.Is(err, config.ErrInvalid) || !errors.Is(err, handlers.ErrApprovalVerb) {
		t.Fatalf("Serve = %v, want config.ErrInvalid and handlers.ErrApprovalVerb", err)
	}
	for _, want := range []string{"endpoint 2: approval.verbs", `"vm.list"`, `"vm.delte"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %s", err, want)
		}
	}
}
