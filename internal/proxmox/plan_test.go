package proxmox

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"

	"github.com/proxbus/proxbus/internal/redact"
)

// TestPlanningRecordsWrites pins the dry-run client (contract §4a): a write is recorded with
// its parameters, secrets replaced, and answered with a planned UPID that waiting ends at
// once; a node command is recorded, not run.
func TestPlanningRecordsWrites(t *testing.T) {
	t.Parallel()
	plan := &Plan{}
	c := (&Client{secrets: []string{"token-secret-value"}}).Planning(plan)
	var upid string
	err := c.do(context.Background(), request{method: http.MethodPost, path: "/nodes/pve1/qemu/100/clone",
		form: url.Values{"newid": {"420"}, "cipassword": {"s3cr3t"}, "note": {"uses token-secret-value"}}, secrets: []string{"s3cr3t"}}, &upid)
	if err != nil {
		t.Fatal(err)
	}
	if !IsPlannedUPID(upid) {
		t.Fatalf("answer %q is not a planned UPID", upid)
	}
	if u, _ := ParseUPID(upid); u.Node != "pve1" || u.ID != "100" || u.Type != "clone" {
		t.Errorf("planned UPID %+v, want node pve1, id 100, type clone", u)
	}
	if err := c.WaitTask(context.Background(), "pve1", upid); err != nil {
		t.Errorf("waiting for a planned task: %v", err)
	}
	sh, _ := c.NodeShell(context.Background(), "pve1.example.net")
	if _, err := sh.Run(context.Background(), "curl -fsSL https://img.example/x.img"); !errors.Is(err, ErrPlannedShell) {
		t.Errorf("node command in a dry run: %v, want ErrPlannedShell", err)
	}
	w := plan.Writes()
	if len(w) != 2 || w[0].Method != "POST" || w[0].Path != "/nodes/pve1/qemu/100/clone" || w[1].Method != "SSH" {
		t.Fatalf("writes %+v", w)
	}
	want := map[string]string{"newid": "420", "cipassword": redact.Placeholder, "note": "uses " + redact.Placeholder}
	for k, v := range want {
		if w[0].Params[k] != v {
			t.Errorf("param %s = %q, want %q", k, w[0].Params[k], v)
		}
	}
	if w[1].Params["command"] != "curl" {
		t.Errorf("node command recorded as %q, want only its name", w[1].Params["command"])
	}
}
