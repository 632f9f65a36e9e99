package events

import "testing"

// secretKeyCases are result outputs with and without secret-named members.
var secretKeyCases = []struct {
	doc  string
	want bool
}{
	{`{"storage":"pbs1","type":"pbs"}`, false},
	{`{"vm":101,"password":"hunter22"}`, true},
	{`{"cloud_init":{"Password":"x"},"vmid":100}`, true},
	{`[{"a":1},{"b":[{"api_token":"x"}]}]`, true},
	{`[[[{"deep":[{"x":{"my_secret":null}}]}]]]`, true},
	{`{"":{"":{"secretive":true}}}`, true},
	{`{"note":"the password is not a name here","secret?":0}`, true},
	{`{"note":"the password is only a value"}`, false},
	{`{"x":"\"password\":1"}`, false},
	{`{"a":[],"b":{},"c":"token"}`, false},
	{`["password","secret","token"]`, false},
	{`{"passwor":{"d":1}}`, false},
	{`{"PASSWORD":1}`, true},
	{"  { \"password\" : 1 }  ", true},
	{`{"pass\u0077ord":"x"}`, true}, // escaped: only the decoded name says password
	{`{"tok\u0065n":1}`, true},
	{`{"\u0053ECRET":1}`, true},
	{`{"a\"secret":1}`, true},
	{`{"a":"\u0000","token":1}`, true},
	{`{"a":1e400,"password":1}`, true}, // a number beyond a float64 is still JSON
	{`{"a":1,"a":{"token":2}}`, true},  // repeated names are accepted, as json.Unmarshal does
	{`{"a":{"token":2},"a":1}`, true},  // and every occurrence is read, not only the last
	{`{"to\u212aen":"x"}`, true},       // K (Kelvin) lower-cases to k
	{`{"pa\u017fsword":"x"}`, false},   // ſ does not lower-case to s
	{`{"pässword":1}`, false},
	{`{"pa\ud800ss":"x"}`, false},
	{"{\"pass\xffword\":1}", false},
	{"{\"password\xff\":1}", true},
	{`"password"`, false},
	{`42`, false},
	{`null`, false},
	{`{"password":`, false}, // not JSON
	{``, false},
	{`{"a":1} {"password":2}`, false}, // two documents are not JSON
	{`{"password":1} x`, false},
	{"\xef\xbb\xbf{\"token\":1}", false}, // a byte order mark is not JSON
}

// TestHasSecretKey pins which outputs are redacted before they are published.
func TestHasSecretKey(t *testing.T) {
	t.Parallel()
	for _, tc := range secretKeyCases {
		if got := hasSecretKey([]byte(tc.doc)); got != tc.want {
			t.Errorf("hasSecretKey(%q) = %v, want %v", tc.doc, got, tc.want)
		}
	}
}
