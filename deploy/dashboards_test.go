package deploy_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/metrics"
)

// metricToken finds the metric names an expression uses: proxbus's own and the Go runtime
// and process collectors' (every other word of PromQL is a function, keyword or label).
var metricToken = regexp.MustCompile(`\b(?:proxbus|process|go)_[a-z0-9_]+\b`)

// exportedNames are the names proxbus's /metrics may show, with every optional collector on
// (as `proxbus serve` has them).
func exportedNames() []string {
	m := metrics.New(metrics.Options{
		PendingRepairs:   func(context.Context) (int, error) { return 0, nil },
		PendingApprovals: func(context.Context) (int, time.Time, error) { return 0, time.Time{}, nil },
		ConsumerReady:    func() bool { return true },
		Dependencies:     func() map[string]bool { return nil },
	})
	return m.Names()
}

// dashboardExprs returns the PromQL of every panel of grafana/proxbus.json, checking on the
// way what Grafana needs to import it: unique panel ids, core panel types on the 24-column
// grid, every panel but a row querying something through the Prometheus picked on import.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("grafana/proxbus.json")
	if err != nil {
		t.Fatal(err)
	}
	type datasource struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	}
	type variable struct {
		Name  string `json:"name"`
		Type  string `json:"type"`
		Query string `json:"query"`
	}
	var d struct {
		UID        string `json:"uid"`
		Templating struct {
			List []variable `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID         int        `json:"id"`
			Type       string     `json:"type"`
			Title      string     `json:"title"`
			Datasource datasource `json:"datasource"`
			GridPos    struct{ H, W, X, Y int }
			Targets    []struct {
				Expr       string     `json:"expr"`
				Datasource datasource `json:"datasource"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("grafana/proxbus.json: %v", err)
	}
	if d.UID == "" {
		t.Error("grafana/proxbus.json: no uid (links and provisioning need one)")
	}
	// The Prometheus is chosen on import: a datasource variable every query uses.
	const dsVar = "${datasource}"
	if !slices.Contains(d.Templating.List, variable{Name: "datasource", Type: "datasource", Query: "prometheus"}) {
		t.Error("grafana/proxbus.json: no datasource variable of type prometheus")
	}
	ids := map[int]bool{}
	var exprs []string
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d used twice", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, p.GridPos)
		}
		if !slices.Contains([]string{"row", "stat", "table", "timeseries"}, p.Type) {
			t.Errorf("panel %q: type %q is not a core panel this test knows", p.Title, p.Type)
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		if p.Datasource.UID != dsVar {
			t.Errorf("panel %q: datasource %+v, want the %s variable", p.Title, p.Datasource, dsVar)
		}
		for _, tg := range p.Targets {
			if tg.Datasource.UID != dsVar {
				t.Errorf("panel %q: a query's datasource %+v, want the %s variable", p.Title, tg.Datasource, dsVar)
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	return exprs
}

// alertExprs returns the expression of every rule of prometheus/alerts.yml.
func alertExprs(t *testing.T) []string {
	t.Helper()
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, "prometheus/alerts.yml", &f)
	var exprs []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	return exprs
}

// TestDashboardAndAlertsNameExportedMetrics: every metric the Grafana dashboard and the alert
// rules query is one proxbus exports (internal/metrics Names), so none of them stays empty
// after a rename; and each covers what docs/operations.md says it does.
func TestDashboardAndAlertsNameExportedMetrics(t *testing.T) {
	t.Parallel()
	exported := exportedNames()
	for file, exprs := range map[string][]string{"grafana/proxbus.json": dashboardExprs(t), "prometheus/alerts.yml": alertExprs(t)} {
		if len(exprs) == 0 {
			t.Errorf("%s: no queries", file)
		}
		used := map[string]bool{}
		for _, e := range exprs {
			names := metricToken.FindAllString(e, -1)
			if len(names) == 0 {
				t.Errorf("%s: %q names no metric", file, e)
			}
			for _, n := range names {
				used[n] = true
				if !slices.Contains(exported, n) {
					t.Errorf("%s: %q names %s, which proxbus does not export", file, e, n)
				}
			}
		}
		want := map[string][]string{
			"grafana/proxbus.json": {"proxbus_commands_total", "proxbus_commands_waiting", "proxbus_approvals_pending",
				"proxbus_command_oldest_waiting_seconds", "proxbus_approval_oldest_pending_seconds", "proxbus_dead_letters_total",
				"proxbus_journal_repairs_pending", "proxbus_proxmox_request_duration_seconds_bucket", "proxbus_proxmox_request_errors_total",
				"proxbus_netbox_request_duration_seconds_bucket", "proxbus_netbox_request_errors_total", "proxbus_build_info", "proxbus_consumer_ready"},
			"prometheus/alerts.yml": {"proxbus_dead_letters_total", "proxbus_journal_repairs_pending", "proxbus_command_oldest_waiting_seconds",
				"proxbus_dependency_up", "proxbus_proxmox_request_errors_total", "proxbus_consumer_ready"},
		}[file]
		for _, n := range want {
			if !used[n] {
				t.Errorf("%s does not use %s", file, n)
			}
		}
	}
}

// TestAlertRulesPromtool checks prometheus/alerts.yml with promtool (Debian's prometheus
// package) and runs its unit tests (prometheus/alerts_test.yml): each alert fires on its
// trouble and stays quiet on a healthy deployment.
func TestAlertRulesPromtool(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (apt-get install prometheus); CI installs it")
	}
	for _, args := range [][]string{{"check", "rules", "prometheus/alerts.yml"}, {"test", "rules", "prometheus/alerts_test.yml"}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}
