package ingress_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/ingress"
	"github.com/proxbus/proxbus/internal/testenv"
	"github.com/proxbus/proxbus/seal"
	"github.com/proxbus/proxbus/sign"
)

// FuzzRulesMap renders the operators' rules (fuzzRules) over whatever webhook body the fuzzer
// makes, without NATS: parsing and rendering never panic, a rendering failure wraps
// ErrRender and never quotes the canary password a custom field may hold, and no rule ever
// makes a command.* verb.
func FuzzRulesMap(f *testing.F) {
	rules, err := ingress.ParseRules([]byte(fuzzRules))
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		`{"event":"created","timestamp":"2026-12-02T09:59:00+00:00","object_type":"netbox_proxbox.proxmoxendpoint","username":"alice","request_id":"r-1",` +
			`"data":{"id":3,"name":"pbs1","custom_fields":{"pbs_user":"u@pbs","pbs_password":"` + canary + `"}},"snapshots":null}`,
		`{"event":"created","model":"proxmoxendpoint","data":{"id":"3x","custom_fields":{"pbs_password":{"nested":"` + canary + `"}}}}`,
		`{"event":"updated","object_type":"virtualization.virtualmachine","data":{"id":42,"name":"db-01","status":{"value":"active"},` +
			`"custom_fields":{"proxmox_vm_id":101,"proxmox_endpoint_id":1}},"snapshots":{"prechange":{"password":"` + canary + `"}}}`,
		`{"event":"updated","object_type":"virtualization.virtualmachine","data":{"status":{"value":["active"]},"custom_fields":{"proxmox_endpoint_id":1e309}}}`,
		`{"event":"created","object_type":"netbox_proxbox.proxmoxendpoint","request":{"id":"r","user":"bob"},"data":{"custom_fields":{"pbs_password":null}}}`,
		`{}`, `[]`, `"x"`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		wh, err := ingress.ParseWebhook(body)
		if err != nil {
			return
		}
		m, matched, err := rules.Map(wh)
		if err != nil {
			if !errors.Is(err, ingress.ErrRender) {
				t.Errorf("Map: %v does not wrap ErrRender", err)
			}
			if strings.Contains(err.Error(), canary) {
				t.Errorf("the rendering error quotes the canary: %v", err)
			}
			return
		}
		if matched && strings.HasPrefix(m.Verb, ingress.CommandVerbPrefix) {
			t.Errorf("a rule made %s", m.Verb)
		}
	})
}

// FuzzProxboxFront drives POST /proxmox/storage/pbs with whatever body, endpoint_id and
// headers the fuzzer makes, with the fronts' sealing and signing on (Config.Prepare, as serve
// sets it): the handler always answers (no replica runs, so an accepted command ends in
// 504), never quotes the canary password, and every command it publishes is signed by the
// fronts' key and holds no plain secret field.
func FuzzProxboxFront(f *testing.F) {
	n, subjects, commands := fuzzNATS(f)
	key, err := seal.GenerateKey()
	if err != nil {
		f.Fatal(err)
	}
	signer, _, err := sign.Generate()
	if err != nil {
		f.Fatal(err)
	}
	prepare := func(c events.Command) (events.Command, error) {
		data, err := seal.SealData(c.Data, key.Public)
		if err != nil {
			return c, err
		}
		c.Data, c.Time = data, time.Now().UTC()
		return signer.Sign(c)
	}
	logs := &testenv.Buffer{}
	srv, err := ingress.New(ingress.Config{
		JetStream: n.JS, Conn: n.Conn, Subjects: subjects, FrontAPIKey: apiKey + "-0123456789", ResultTimeout: time.Millisecond,
		Prepare: prepare, Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		f.Fatal(err)
	}
	mux := http.NewServeMux()
	srv.Routes(mux)
	for _, seed := range []struct{ body, endpoint, actor, key string }{
		{`{"storage":"pbs1","server":"pbs.example","datastore":"ds1","username":"u@pbs!t","password":"` + canary + `","fingerprint":"AB"}`, "1", "alice", "k-1"},
		{`{"password":{"sealed":"-----BEGIN AGE ENCRYPTED FILE-----\nx\n-----END AGE ENCRYPTED FILE-----\n"}}`, "2", "", ""},
		{`{"nested":{"token_secret":"` + canary + `"},"list":[{"password":"` + canary + `"}]}`, "x", "bob\u202e", "k 2"},
		{`{"password":12}`, "", "", ""}, {`[]`, "1", "", ""}, {``, "0", "", ""}, {`{"a":1e999}`, "99999999999999999999", "", ""},
	} {
		f.Add([]byte(seed.body), seed.endpoint, seed.actor, seed.key)
	}
	f.Fuzz(func(t *testing.T, body []byte, endpoint, actor, idemKey string) {
		before := len(logs.String())
		req := httptest.NewRequest(http.MethodPost, ingress.PBSPath, bytes.NewReader(body))
		q := req.URL.Query()
		q.Set("endpoint_id", endpoint)
		req.URL.RawQuery = q.Encode()
		req.Header.Set(ingress.APIKeyHeader, apiKey+"-0123456789")
		if actor != "" {
			req.Header.Set(ingress.ActorHeader, actor)
		}
		if idemKey != "" {
			req.Header.Set(ingress.IdempotencyKeyHeader, idemKey)
		}
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req.WithContext(rctx))
		if w.Code >= 500 && w.Code != http.StatusServiceUnavailable && w.Code != http.StatusGatewayTimeout {
			t.Errorf("status %d: %s", w.Code, w.Body)
		}
		if strings.Contains(w.Body.String(), canary) {
			t.Errorf("the answer holds the canary: %s", w.Body)
		}
		if logged := logs.String()[before:]; strings.Contains(logged, canary) {
			t.Errorf("the log holds the canary: %s", logged)
		}
		if w.Code != http.StatusGatewayTimeout {
			return
		}
		msg, err := commands.GetLastMsgForSubject(rctx, subjects.Command(ingress.PBSVerb))
		if err != nil {
			t.Fatalf("the accepted command is not in the stream: %v", err)
		}
		cmd, err := events.Decode(msg.Subject, msg.Header, msg.Data, subjects)
		if err != nil {
			t.Fatalf("the published command does not decode: %v", err)
		}
		if err := sign.Verify(cmd); err != nil || cmd.Producer != signer.Public() {
			t.Errorf("the published command is not signed by the fronts: %v", err)
		}
		if names := seal.PlainSecrets(cmd.Data); len(names) > 0 && bytes.Contains(cmd.Data, []byte(canary)) {
			t.Errorf("the published command holds a plain secret: %v", names)
		}
		if err := commands.Purge(rctx); err != nil {
			t.Fatalf("purge the commands stream: %v", err)
		}
	})
}
