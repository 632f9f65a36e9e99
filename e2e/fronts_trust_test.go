package e2e_test

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/ingress"
	"github.com/proxbus/proxbus/sign"
)

// TestFrontsSealAndSign: the proxbox-api front, mounted by serve, seals the PBS password it
// is given and signs the command with the fronts' own key, so it runs on a proxbus that
// requires both (a plain or unsigned command would be refused 422 / 403), and its result
// names the fronts' key as the verified producer.
func TestFrontsSealAndSign(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := newSealKey(t)
	front, seed, err := sign.Generate()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	seedFile, producersFile := filepath.Join(dir, "front.nk"), filepath.Join(dir, "producers.yaml")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(producersFile, []byte("producers:\n  - key: "+front.Public()+"\n    name: http-fronts\n    endpoints: [1]\n    verbs: [storage.pbs.create]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.start(func(c *app.Config) {
		c.HTTPListener = ln
		c.Ingress = app.Ingress{ProxboxAPIKey: frontAPIKey, ResultTimeout: 30 * time.Second}
		c.Trust = app.Trust{SealKeyFiles: []string{key.file}, RequireSealedSecrets: true,
			ProducersFile: producersFile, RequireSignedCommands: true, FrontKeyFile: seedFile}
	})
	status, out := httpPost(t, "http://"+ln.Addr().String()+ingress.PBSPath+"?endpoint_id=1", []byte(pbs("frontpbs")),
		map[string]string{ingress.APIKeyHeader: frontAPIKey})
	var res events.Result
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("answer %d not a result: %s", status, out)
	}
	if status != 201 || res.Result != "created" || res.Producer != front.Public() {
		t.Fatalf("front: %d %s %s %s %v, producer %q; want 201 created by the fronts' key", status, res.Result, res.Reason, res.Detail, res.Fields, res.Producer)
	}
}

// frontAPIKey is long enough for serve's check of the proxbox-api key.
const frontAPIKey = "front-api-key-0123456789abcdef"
