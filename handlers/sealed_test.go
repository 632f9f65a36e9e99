package handlers

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/seal"
)

// TestPrepareSealedSecrets: a sealed secret field is opened to be validated, kept sealed in
// the prepared command (its fingerprint that of the plain one), refused as invalid when
// proxbus cannot open it, and under RequireSealedSecrets a plain one is refused with 422
// secret_not_sealed naming it, nested fields by their path.
func TestPrepareSealedSecrets(t *testing.T) {
	t.Parallel()
	key, err := seal.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	other, _ := seal.GenerateKey()
	opener, err := seal.NewOpener(key.Identity)
	if err != nil {
		t.Fatal(err)
	}
	sealTo := func(v, public string) any {
		s, err := seal.Seal(v, public)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	plainPBS := pbsBody(t, nil)
	wantFP := mustPreparePBS(t, plainPBS).fingerprint
	provision := func(password any) json.RawMessage {
		b, _ := json.Marshal(map[string]any{"source": map[string]any{"template_vmid": 9000}, "new_vmid": 341, "new_name": "web-341",
			"target_node": "pve1", "cloud_init": map[string]any{"user": "ops", "password": password}})
		return b
	}
	tests := []struct {
		name       string
		verb       Verb
		data       json.RawMessage
		s          sealing
		wantReason string
		wantFields []string
	}{
		{"sealed, opened", StoragePBSCreate(), pbsBody(t, map[string]any{"password": sealTo("pbs-secret", key.Public)}), sealing{opener: opener, require: true}, "", nil},
		{"sealed, nested", VMProvision(), provision(sealTo("ci-pass", key.Public)), sealing{opener: opener, require: true}, "", nil},
		{"sealed to another key", StoragePBSCreate(), pbsBody(t, map[string]any{"password": sealTo("pbs-secret", other.Public)}), sealing{opener: opener}, ReasonInvalidBody, []string{"password"}},
		{"sealed, no key", StoragePBSCreate(), pbsBody(t, map[string]any{"password": sealTo("pbs-secret", key.Public)}), sealing{}, ReasonInvalidBody, []string{"password"}},
		{"sealed value breaking the field's rule", VMProvision(), provision(sealTo(strings.Repeat("x", 300), key.Public)), sealing{opener: opener}, ReasonInvalidBody, []string{"cloud_init"}},
		{"plain, required sealed", StoragePBSCreate(), plainPBS, sealing{opener: opener, require: true}, ReasonSecretNotSealed, []string{"password"}},
		{"plain nested, required sealed", VMProvision(), provision("ci-pass"), sealing{opener: opener, require: true}, ReasonSecretNotSealed, []string{"cloud_init.password"}},
		{"plain, allowed", StoragePBSCreate(), plainPBS, sealing{opener: opener}, "", nil},
		{"plain text that looks sealed", StoragePBSCreate(), pbsBody(t, map[string]any{"password": sealTo("x", key.Public).(seal.Sealed).Sealed}), sealing{opener: opener}, ReasonInvalidBody, []string{"password"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, out := tt.verb.prepareSealed(tt.data, tt.s)
			switch {
			case tt.wantReason == "" && out != nil:
				t.Fatalf("prepare = %+v, want valid", out)
			case tt.wantReason != "" && (out == nil || out.Reason != tt.wantReason || out.Status != 422 || !slices.Equal(out.Fields, tt.wantFields)):
				t.Fatalf("prepare = %+v, want 422 %s %v", out, tt.wantReason, tt.wantFields)
			}
			if out != nil {
				if text := fmt.Sprintf("%+v", *out); strings.Contains(text, "pbs-secret") || strings.Contains(text, "ci-pass") {
					t.Errorf("the outcome echoes a secret: %s", text)
				}
				return
			}
			for _, s := range p.secrets {
				if s == "pbs-secret" || s == "ci-pass" {
					t.Errorf("the prepared command holds the opened secret")
				}
			}
			if tt.verb.VerbName() == "storage.pbs.create" && p.fingerprint != wantFP {
				t.Errorf("fingerprint %s, want the plain command's %s", p.fingerprint, wantFP)
			}
		})
	}
}

// TestCheckAcceptsSealedSecrets: a producer's own check (Registry.Check, no key) takes a
// sealed value as it is.
func TestCheckAcceptsSealedSecrets(t *testing.T) {
	t.Parallel()
	key, _ := seal.GenerateKey()
	data, err := seal.SealData(pbsBody(t, nil), key.Public)
	if err != nil {
		t.Fatal(err)
	}
	res, err := NewRegistry(Builtin()...).Check("storage.pbs.create", data)
	if err != nil || !res.Valid() {
		t.Errorf("Check = %+v, %v; want valid", res, err)
	}
}
