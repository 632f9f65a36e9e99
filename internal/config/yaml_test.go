package config

import (
	"errors"
	"strings"
	"testing"
)

// TestUnmarshalYAMLStrict: documents that crash goccy/go-yaml v1.19.2 (upstream #735) become
// configuration errors instead of panics, without quoting the document; ordinary syntax and
// unknown-key errors stay the decoder's; a good document decodes.
func TestUnmarshalYAMLStrict(t *testing.T) {
	t.Parallel()
	type doc struct {
		Rules []struct {
			Name string `yaml:"name"`
		} `yaml:"rules"`
	}
	tests := []struct {
		name      string
		in        string
		wantErr   bool
		wantPanic bool
	}{
		{name: "good", in: "rules:\n  - name: a\n"},
		{name: "tagged flow mapping into a list (#735)", in: "rules: ! {a:\n- b}", wantErr: true, wantPanic: true},
		{name: "syntax error", in: "rules: [a\n", wantErr: true},
		{name: "unknown key", in: "rulez: []\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var d doc
			err := UnmarshalYAMLStrict([]byte(tt.in), &d)
			if !tt.wantErr {
				if err != nil || len(d.Rules) != 1 || d.Rules[0].Name != "a" {
					t.Fatalf("= %v, %+v", err, d)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if errors.Is(err, ErrYAMLDecoder) != tt.wantPanic {
				t.Errorf("errors.Is(%v, ErrYAMLDecoder) = %v, want %v", err, !tt.wantPanic, tt.wantPanic)
			}
			if tt.wantPanic && strings.Contains(err.Error(), "{a:") {
				t.Errorf("error quotes the document: %v", err)
			}
		})
	}
}
