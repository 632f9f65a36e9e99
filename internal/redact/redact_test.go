package redact_test

import (
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/internal/redact"
)

func TestIsSecretName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		want bool
	}{
		{"password", true},
		{"Password", true},
		{"PASSWORD", true},
		{"token_secret", true},
		{"X-Auth-Token", true},
		{"cloud_init.password", true},
		{"client_secret", true},
		{"api-token", true},
		// The documented rule is a case-insensitive substring match, so any name merely
		// containing "token" is secret too.
		{"tokenized", true},
		{"username", false},
		{"user", false},
		{"fingerprint", false},
		{"storage", false},
		{"pass", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := redact.IsSecretName(tt.name); got != tt.want {
				t.Errorf("IsSecretName(%q) = %v, want %v", tt.name, got, tt.want)
			}
		})
	}
}

// decode unmarshals doc with numbers kept as json.Number, failing the test when it is not JSON.
func decode(t *testing.T, doc []byte) any {
	t.Helper()
	var v any
	dec := json.NewDecoder(strings.NewReader(string(doc)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, doc)
	}
	return v
}

func TestJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string // a JSON document compared structurally
	}{
		{
			name: "flat",
			in:   `{"storage":"pbs1","password":"hunter2"}`,
			want: `{"storage":"pbs1","password":"[redacted]"}`,
		},
		{
			name: "nested object",
			in:   `{"cloud_init":{"user":"root","password":"hunter2","sshkeys":"ssh-ed25519 AAAA"}}`,
			want: `{"cloud_init":{"user":"root","password":"[redacted]","sshkeys":"ssh-ed25519 AAAA"}}`,
		},
		{
			name: "objects inside arrays",
			in:   `{"tokens_used":3,"list":[{"Token":"t1","id":1},{"id":2,"deep":[{"client_secret":"s"}]}]}`,
			want: `{"tokens_used":"[redacted]","list":[{"Token":"[redacted]","id":1},{"id":2,"deep":[{"client_secret":"[redacted]"}]}]}`,
		},
		{
			name: "secret key holding an object is replaced whole",
			in:   `{"secret":{"a":"b","n":1}}`,
			want: `{"secret":"[redacted]"}`,
		},
		{
			name: "top-level array",
			in:   `[{"password":"x"},"plain",7]`,
			want: `[{"password":"[redacted]"},"plain",7]`,
		},
		{
			name: "numbers and scalars kept exactly",
			in:   `{"big":12345678901234567890,"f":1.50,"e":1e3,"neg":-0,"t":true,"n":null,"s":"a<b&c"}`,
			want: `{"big":12345678901234567890,"f":1.50,"e":1e3,"neg":-0,"t":true,"n":null,"s":"a<b&c"}`,
		},
		{
			name: "no secret",
			in:   `{"storage":"pbs1","port":8007}`,
			want: `{"storage":"pbs1","port":8007}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := redact.JSON([]byte(tt.in))
			got, want := decode(t, out), decode(t, []byte(tt.want))
			if !reflect.DeepEqual(got, want) {
				t.Errorf("JSON(%s)\n got %s\nwant %s", tt.in, out, tt.want)
			}
		})
	}
}

func TestJSONNumbersLiteral(t *testing.T) {
	t.Parallel()
	// Numbers must not go through float64: the literal text survives.
	out := string(redact.JSON([]byte(`{"big":12345678901234567890,"f":1.50,"e":1e3}`)))
	for _, lit := range []string{"12345678901234567890", "1.50", "1e3"} {
		if !strings.Contains(out, lit) {
			t.Errorf("JSON output %s lost number literal %s", out, lit)
		}
	}
}

func TestJSONInvalidFallsBackToText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"truncated", `{"storage":"pbs1","password":"hunter2"`, `{"storage":"pbs1","password":"[redacted]"`},
		{"not json", `password=hunter2 and more`, `password=[redacted] and more`},
		{"trailing document", `{"a":1} token=abc`, `{"a":1} token=[redacted]`},
		{"empty", ``, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := string(redact.JSON([]byte(tt.in)))
			if got != tt.want {
				t.Errorf("JSON(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if want := redact.Text(tt.in); got != want {
				t.Errorf("JSON(%q) = %q, want the Text fallback %q", tt.in, got, want)
			}
			if strings.Contains(got, "hunter2") || strings.Contains(got, "abc") {
				t.Errorf("JSON(%q) leaked the secret: %q", tt.in, got)
			}
		})
	}
}

func TestValueDoesNotMutateInput(t *testing.T) {
	t.Parallel()
	in := map[string]any{"password": "hunter2", "nested": map[string]any{"token": "t"}, "list": []any{map[string]any{"secret": "s"}}}
	got := redact.Value(in).(map[string]any)
	if got["password"] != redact.Placeholder || got["nested"].(map[string]any)["token"] != redact.Placeholder {
		t.Errorf("Value did not redact: %v", got)
	}
	if got["list"].([]any)[0].(map[string]any)["secret"] != redact.Placeholder {
		t.Errorf("Value did not redact inside a list: %v", got)
	}
	if in["password"] != "hunter2" || in["nested"].(map[string]any)["token"] != "t" || in["list"].([]any)[0].(map[string]any)["secret"] != "s" {
		t.Errorf("Value mutated its input: %v", in)
	}
}

func TestStrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"flat", `{"storage":"pbs1","password":"x"}`, `{"storage":"pbs1"}`},
		{"nested", `{"cloud_init":{"user":"root","Password":"x"},"port":8007}`, `{"cloud_init":{"user":"root"},"port":8007}`},
		{"in arrays", `[{"id":1,"api_token":"x"},{"id":2}]`, `[{"id":1},{"id":2}]`},
		{"only secrets", `{"secret":"x","token":"y"}`, `{}`},
		{"scalar", `"password"`, `"password"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := decode(t, []byte(tt.in))
			got := redact.Strip(in)
			if want := decode(t, []byte(tt.want)); !reflect.DeepEqual(got, want) {
				t.Errorf("Strip(%s) = %#v, want %#v", tt.in, got, want)
			}
			// The input is not modified.
			if again := decode(t, []byte(tt.in)); !reflect.DeepEqual(in, again) {
				t.Errorf("Strip mutated its input: %#v", in)
			}
		})
	}
}

func TestText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"key=value", "password=hunter2", "password=[redacted]"},
		{"key=value in a query", "user=root&password=hunter2&x=1", "user=root&password=[redacted]&x=1"},
		{"quoted json pair", `{"token": "abc def"}`, `{"token": "[redacted]"}`},
		{"colon form", "secret: zzz", "secret: [redacted]"},
		{"case and suffix", "Token_Secret=aa, next", "Token_Secret=[redacted], next"},
		{"header", "X-Auth-Token: abc123", "X-Auth-Token: [redacted]"},
		{"dotted name", "cloud_init.password=pw;rest", "cloud_init.password=[redacted];rest"},
		{"two assignments", "password=a token=b", "password=[redacted] token=[redacted]"},
		{"ordinary text", "storage pbs1 created on node pve1", "storage pbs1 created on node pve1"},
		{"word without assignment", "the password was rejected", "the password was rejected"},
		{"username", "username=root@pam!proxbus", "username=root@pam!proxbus"},
		{"empty", "", ""},
		{"escaped quote inside the value", `{"password":"ab\"cd", "x":1`, `{"password":"[redacted]", "x":1`},
		{"single-quoted value with a space", "password = 'my pass' next", "password = '[redacted]' next"},
		{"unterminated quoted value", `{"password":"abc`, `{"password":"[redacted]"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := redact.Text(tt.in); got != tt.want {
				t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		secrets []string
		want    string
	}{
		{"every occurrence", "auth failed for s3cr3t-value (s3cr3t-value)", []string{"s3cr3t-value"}, "auth failed for [redacted] ([redacted])"},
		{"inside a word", "xxs3cr3tyy", []string{"s3cr3t"}, "xx[redacted]yy"},
		{"several secrets", "a=AAAA b=BBBB", []string{"AAAA", "BBBB"}, "a=[redacted] b=[redacted]"},
		{"four bytes is cut", "id abcd", []string{"abcd"}, "id [redacted]"},
		{"shorter than four ignored", "the abc of it", []string{"abc", "", "a"}, "the abc of it"},
		{"no secrets still applies Text", "password=hunter2 ok", nil, "password=[redacted] ok"},
		{"absent secret", "nothing here", []string{"s3cr3t"}, "nothing here"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := redact.Values(tt.in, tt.secrets...); got != tt.want {
				t.Errorf("Values(%q, %q) = %q, want %q", tt.in, tt.secrets, got, tt.want)
			}
		})
	}
}

// TestValueKeepsSealedSecrets: a sealed secret (package seal) is only ciphertext and is kept,
// so a dead letter of a sealed command can be replayed; anything merely shaped like one is
// redacted.
func TestValueKeepsSealedSecrets(t *testing.T) {
	t.Parallel()
	// an age file's armor: the header line of a real age file, then nothing of value
	armored := "-----BEGIN AGE ENCRYPTED FILE-----\n" +
		base64.StdEncoding.EncodeToString([]byte("age-encryption.org/v1\n-> X25519 abc\nxyz\n--- mac\n")) +
		"\n-----END AGE ENCRYPTED FILE-----\n"
	tests := []struct {
		name string
		val  any
		kept bool
	}{
		{"sealed", map[string]any{"sealed": armored}, true},
		{"plain text in the armor", map[string]any{"sealed": "-----BEGIN AGE ENCRYPTED FILE-----\nhunter2\n-----END AGE ENCRYPTED FILE-----\n"}, false},
		{"another member beside it", map[string]any{"sealed": armored, "plain": "hunter2"}, false},
		{"a plain string", "hunter2", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := redact.Value(map[string]any{"password": tt.val}).(map[string]any)["password"]
			if kept := got != redact.Placeholder; kept != tt.kept {
				t.Errorf("kept = %v, want %v (%v)", kept, tt.kept, got)
			}
		})
	}
}
