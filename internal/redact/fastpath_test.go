package redact

import "testing"

// TestTextSkipsOnlyWhatTheExpressionCannotMatch pins Text's shortcut: it may skip the regular
// expression only for text in which the expression finds nothing — whatever the case of the
// words, and with Unicode case folding (ſ folds to s, K to k) for non-ASCII text.
func TestTextSkipsOnlyWhatTheExpressionCannotMatch(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"", "storage created", "created pbs1 on pve1 (UPID:pve1:0000:...)",
		"password=hunter22", "PASSWORD: hunter22", "Secret=x1234", "api_TOKEN=abcd1234",
		`{"cloud_init":{"password":"hunter22"}}`, "pa\u017fsword=hunter22", "to\u212aen=abcd1234",
		"passwor d=x", "tok en=x", "ünïcode without names", "token", "password",
	} {
		matches := secretAssignment.MatchString(s)
		if matches && !MayNameSecret(s) {
			t.Errorf("%q: the expression matches but the shortcut skips it", s)
		}
		if matches && Text(s) == s {
			t.Errorf("%q: the expression matches but Text left it unchanged", s)
		}
	}
}
