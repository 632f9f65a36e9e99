package proxmox

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestFlatObject pins the flat rules value kind by value kind.
func TestFlatObject(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want map[string]string
	}{
		{"strings", `{"a":"x","b":"","c":"a b/c"}`, map[string]string{"a": "x", "b": "", "c": "a b/c"}},
		{"escapes", `{"s":"line\nq\"\\\/\t\u00e9\ud83d\ude00\ud800x"}`, map[string]string{"s": "line\nq\"\\/\té\U0001F600\uFFFDx"}},
		{"invalid utf-8 repaired", "{\"s\":\"a\xffb\",\"k\xfe\":1}", map[string]string{"s": "a\uFFFDb", "k\uFFFD": "1"}},
		{"numbers as written", `{"a":8007,"b":-0,"c":0.75,"d":1e3,"e":1.50E-2,"f":0}`,
			map[string]string{"a": "8007", "b": "-0", "c": "0.75", "d": "1e3", "e": "1.50E-2", "f": "0"}},
		{"booleans", `{"t":true,"f":false}`, map[string]string{"t": "1", "f": "0"}},
		{"null dropped", `{"n":null,"a":"1"}`, map[string]string{"a": "1"}},
		{"later null drops a duplicate", `{"a":"1","a":null}`, map[string]string{}},
		{"later duplicate wins", `{"a":null,"a":"2","b":1,"b":"x"}`, map[string]string{"a": "2", "b": "x"}},
		{"nested kept verbatim", `{"o":{ "k" : [1, "]}\"", {}] },"l":[ ],"e":{}}`,
			map[string]string{"o": `{ "k" : [1, "]}\"", {}] }`, "l": `[ ]`, "e": `{}`}},
		{"escaped key", `{"a\u002db":"x","\"q\"":"y"}`, map[string]string{"a-b": "x", `"q"`: "y"}},
		{"whitespace", " \n{ \"a\" :\t\"x\" , \"b\"\r: 2 }\n ", map[string]string{"a": "x", "b": "2"}},
		{"empty", `{}`, map[string]string{}},
		{"null document", `null`, map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := flatObject([]byte(tt.in))
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("flatObject = %q, %v; want %q", got, err, tt.want)
			}
			var m flatMap
			if err := json.Unmarshal([]byte(tt.in), &m); err != nil || !reflect.DeepEqual(map[string]string(m), tt.want) {
				t.Errorf("json.Unmarshal into flatMap = %q, %v; want %q", m, err, tt.want)
			}
		})
	}
}

// TestFlatList pins lists: items decoded like objects, null items as empty maps, a null
// or empty list as an empty list.
func TestFlatList(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []map[string]string
	}{
		{"items", `[{"a":"x","n":1},{"a":"y","b":true},{}]`,
			[]map[string]string{{"a": "x", "n": "1"}, {"a": "y", "b": "1"}, {}}},
		{"null item", `[null,{"a":null}]`, []map[string]string{{}, {}}},
		{"empty", ` [ ] `, []map[string]string{}},
		{"null", `null`, []map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var l flatMaps
			if err := json.Unmarshal([]byte(tt.in), &l); err != nil || !reflect.DeepEqual([]map[string]string(l), tt.want) {
				t.Errorf("json.Unmarshal into flatMaps = %q, %v; want %q", l, err, tt.want)
			}
		})
	}
}

// TestFlatErrors: what is not an object (a list of objects), or not JSON, is an error.
func TestFlatErrors(t *testing.T) {
	t.Parallel()
	for _, in := range []string{``, `{`, `{"a":}`, `{"a":1,}`, `{"a":1} x`, `[1]`, `{"a":01}`, `"x"`, `[{"a":1}`, `{"a":"\q"}`} {
		if got, err := flatObject([]byte(in)); err == nil {
			t.Errorf("flatObject(%q) = %q, want an error", in, got)
		}
	}
	for _, in := range []string{``, `{}`, `[1]`, `["x"]`, `[[]]`, `[{"a":1},]`, `[{"a":1}] x`, `[{"a":tru}]`} {
		var l flatMaps
		if err := l.UnmarshalJSON([]byte(in)); err == nil {
			t.Errorf("flatMaps.UnmarshalJSON(%q) = %q, want an error", in, l)
		}
	}
}

// TestNewStorageConfigStripsSecrets: every secret-named or sensitive key is stripped,
// whatever its case, and the plain keys are kept.
func TestNewStorageConfigStripsSecrets(t *testing.T) {
	t.Parallel()
	secret := []string{
		"password", "Password", "PASSWORD", "password2", "Api-Token", "token", "client_secret",
		"SecretKey", "encryption-key", "master-pubkey", "keyring", "cifs-password", "x-TOKEN-y",
	}
	plain := []string{"storage", "type", "server", "port", "datastore", "username", "fingerprint",
		"digest", "prune-backups", "shared", "Comment", "unknown-key"}
	m := map[string]string{}
	for _, k := range append(append([]string(nil), secret...), plain...) {
		m[k] = "v"
	}
	got := newStorageConfig(m)
	for _, k := range secret {
		if _, ok := got[k]; ok {
			t.Errorf("%q kept", k)
		}
	}
	for _, k := range plain {
		if _, ok := got[k]; !ok {
			t.Errorf("%q stripped", k)
		}
	}
}

// TestDecodeFailures pins how do classifies 2xx answers it cannot use: a null data is
// "unreadable answer: empty answer"; data of the wrong shape, and a body that is not a JSON
// object (go-proxmox's decode fails), "unreadable answer: …"; all are sent
// *TransportErrors matching ErrAnswerLost.
func TestDecodeFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		call       func(context.Context, *Client) error
		want       string // suffix of the cause
	}{
		{"list null", `{"data":null}`, storages, "unreadable answer: empty answer"},
		{"list not a list", `{"data":{"a":1}}`, storages, "unreadable answer: a JSON object where a list was expected"},
		{"list item not an object", `{"data":[{"a":1},2]}`, storages, "unreadable answer: item 1: a JSON number where an object was expected"},
		{"object null", `{"data":null}`, storage, "unreadable answer: empty answer"},
		{"object not an object", `{"data":[1]}`, storage, "unreadable answer: a JSON array where an object was expected"},
		{"raw null", `{"data":null}`, version, "unreadable answer: empty answer"},
		{"string wrong type", `{"data":1}`, upid, "unreadable answer: json: cannot unmarshal number into Go value of type string"},
		{"not JSON", `<html>`, storages, "unreadable answer: invalid character '<' looking for beginning of value"},
		{"not an object", `[]`, storages, "unreadable answer: json: cannot unmarshal array into Go value of type map[string]json.RawMessage"},
		{"data after the answer", `{"data":[]} x`, storages, "unreadable answer: invalid character 'x' after top-level value"},
		{"cut off", `{"data":[{"storage":"s1"}`, storages, "unreadable answer: unexpected end of JSON input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := answering(t, tt.body)
			err := tt.call(t.Context(), c)
			var te *TransportError
			if !errors.As(err, &te) || !errors.Is(err, ErrAnswerLost) {
				t.Fatalf("error = %#v, want a sent *TransportError", err)
			}
			if !strings.HasSuffix(te.Err.Error(), tt.want) {
				t.Errorf("cause = %q, want suffix %q", te.Err, tt.want)
			}
		})
	}
}

// TestDecodeSuccess: the answer's data reaches every kind of target unchanged, and an
// answer without a "data" member is decoded whole.
func TestDecodeSuccess(t *testing.T) {
	t.Parallel()
	c := answering(t, `{"data":{"storage":"s1","port":8007,"shared":true,"password":"p","Api-Token":"t","n":null}}`)
	got, err := c.Storage(t.Context(), "s1")
	if want := (StorageConfig{"storage": "s1", "port": "8007", "shared": "1"}); err != nil || !maps.Equal(got, want) {
		t.Errorf("Storage = %v, %v; want %v", got, err, want)
	}
	c = answering(t, `{"data":[{"storage":"s1"},{"storage":"s2","token":"x"}]}`)
	list, err := c.Storages(t.Context())
	if want := []StorageConfig{{"storage": "s1"}, {"storage": "s2"}}; err != nil || !reflect.DeepEqual(list, want) {
		t.Errorf("Storages = %v, %v; want %v", list, err, want)
	}
	c = answering(t, `{"data":"UPID:pve1:1"}`)
	var s string
	if err := c.do(t.Context(), request{method: http.MethodGet, path: "/x"}, &s); err != nil || s != "UPID:pve1:1" {
		t.Errorf("do(*string) = %q, %v", s, err)
	}
	c = answering(t, `{"success":1,"data":"first","data":"last"}`) // as encoding/json: the last wins
	if err := c.do(t.Context(), request{method: http.MethodGet, path: "/x"}, &s); err != nil || s != "last" {
		t.Errorf("do(*string) with two data members = %q, %v", s, err)
	}
	c = answering(t, `{"other":[1, 2]}`)
	var raw json.RawMessage
	if err := c.do(t.Context(), request{method: http.MethodGet, path: "/x"}, &raw); err != nil || string(raw) != `{"other":[1, 2]}` {
		t.Errorf("do(*json.RawMessage) without data = %s, %v", raw, err)
	}
}

func storages(ctx context.Context, c *Client) error {
	_, err := c.Storages(ctx)
	return err
}

func storage(ctx context.Context, c *Client) error {
	_, err := c.Storage(ctx, "s1")
	return err
}

func version(ctx context.Context, c *Client) error {
	var raw json.RawMessage
	return c.do(ctx, request{method: http.MethodGet, path: "/version"}, &raw)
}

func upid(ctx context.Context, c *Client) error {
	var s string
	return c.do(ctx, request{method: http.MethodPost, path: "/x"}, &s)
}

// answering is a client whose every request is answered 200 with body.
func answering(t *testing.T, body string) *Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	c, err := NewClient(EndpointConfig{ID: 1, Name: "t", URLs: []string{srv.URL}, TokenID: "proxbus@pve!t", Timeout: 5 * time.Second},
		Secret("test-secret-0123"), WithLogger(slog.New(slog.DiscardHandler)), WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAnswerBodyReadFailure: a 2xx answer whose body breaks off is a sent *TransportError,
// as when go-proxmox read the body itself.
func TestAnswerBodyReadFailure(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000") // promises more than it sends
		_, _ = w.Write([]byte(`{"data":[`))
	}))
	t.Cleanup(srv.Close)
	c, err := NewClient(EndpointConfig{ID: 1, Name: "t", URLs: []string{srv.URL}, TokenID: "proxbus@pve!t", Timeout: 5 * time.Second},
		Secret("test-secret-0123"), WithLogger(slog.New(slog.DiscardHandler)), WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Storages(t.Context())
	var te *TransportError
	if !errors.As(err, &te) || !te.Sent || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("error = %v, want a sent *TransportError caused by an unexpected EOF", err)
	}
}
