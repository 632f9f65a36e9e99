package buildinfo

import (
	"runtime/debug"
	"testing"
)

// TestFromBuildInfo pins the version line and the commit from the build info: the module
// version, or devel, with the commit (12 hex digits, +dirty for a modified tree) and its time.
func TestFromBuildInfo(t *testing.T) {
	t.Parallel()
	setting := func(kv ...string) []debug.BuildSetting {
		var out []debug.BuildSetting
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	tests := []struct {
		name       string
		bi         debug.BuildInfo
		want       string
		wantCommit string
	}{
		{"go install in a checkout", debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: setting("vcs.revision", "0123456789abcdef0123", "vcs.time", "2026-12-01T10:00:00Z", "vcs.modified", "false")},
			"devel (commit 0123456789ab, 2026-12-01T10:00:00Z)", "0123456789ab"},
		{"modified tree", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: setting("vcs.revision", "abc", "vcs.modified", "true")},
			"devel (commit abc+dirty)", "abc+dirty"},
		{"go install module@version", debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3", ""},
		{"pseudo-version naming the commit", debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261202014111-f84ecf1f2b99"},
			Settings: setting("vcs.revision", "f84ecf1f2b992c15cdd5", "vcs.time", "2026-12-02T01:41:11Z")},
			"v0.0.0-20261202014111-f84ecf1f2b99 (2026-12-02T01:41:11Z)", "f84ecf1f2b99"},
		{"dirty pseudo-version", debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261202014111-f84ecf1f2b99+dirty"},
			Settings: setting("vcs.revision", "f84ecf1f2b992c15cdd5", "vcs.modified", "true")},
			"v0.0.0-20261202014111-f84ecf1f2b99+dirty", "f84ecf1f2b99+dirty"},
		{"no vcs", debug.BuildInfo{}, "devel", ""},
	}
	for _, tt := range tests {
		i := FromBuildInfo(&tt.bi)
		if got := i.String(); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
		if i.Commit != tt.wantCommit {
			t.Errorf("%s: commit %q, want %q", tt.name, i.Commit, tt.wantCommit)
		}
	}
}
