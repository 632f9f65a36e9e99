package proxmox

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/proxbus/proxbus/internal/redact"
)

// StorageConfig is PVE's configuration of one storage as strings, keys as PVE names them
// ("storage", "type", "server", "port", "datastore", "namespace", "username", "fingerprint",
// "nodes", "content", "prune-backups", "disable", "shared", "digest", …): numbers in decimal
// ("8007"), booleans "0"/"1". It never contains sensitive options (password,
// encryption-key, master-pubkey, keyring, or any secret-named key): PVE does not return
// them and they are stripped if it ever did.
type StorageConfig map[string]string

// sensitiveStorageKeys are PVE's sensitive storage properties (pve-storage
// 'sensitive-properties').
var sensitiveStorageKeys = map[string]bool{
	"password": true, "encryption-key": true, "master-pubkey": true, "keyring": true,
}

// newStorageConfig strips sensitive keys: PVE's sensitive properties and every name
// [redact.IsSecretName] matches.
func newStorageConfig(m map[string]string) StorageConfig {
	for k := range m {
		if sensitiveStorageKeys[k] || redact.IsSecretName(k) {
			delete(m, k)
		}
	}
	return StorageConfig(m)
}

// Storages returns the cluster's storage configurations (GET /storage) in PVE's order.
// Errors: see the package doc.
func (c *Client) Storages(ctx context.Context) ([]StorageConfig, error) {
	return getList(ctx, c, request{method: http.MethodGet, path: "/storage"}, newStorageConfig)
}

// Storage returns the configuration of storage id (GET /storage/{storage}). A storage that
// does not exist → an *APIError matching [ErrNotFound] (PVE answers 500 "storage 'x' does
// not exist"); an empty id → an error matching ErrNotFound without a request.
func (c *Client) Storage(ctx context.Context, id string) (StorageConfig, error) {
	r := request{method: http.MethodGet, path: "/storage/" + url.PathEscape(id)}
	if id == "" {
		return nil, &APIError{Method: r.method, Path: r.path, Status: http.StatusNotFound, Message: "empty storage id"}
	}
	var m flatMap // an unreadable answer is do's error
	if err := c.do(ctx, r, &m); err != nil {
		return nil, err
	}
	return newStorageConfig(m), nil
}

// PBSStorage is a Proxmox Backup Server storage to create. Port 0, an empty Namespace and
// no Nodes are left out of the request (PVE's defaults: 8007, root namespace, all nodes).
type PBSStorage struct {
	Storage     string   // storage id
	Server      string   // PBS host name or IP
	Port        int      // 0 → not sent
	Datastore   string   // PBS datastore
	Namespace   string   // "" → not sent
	Username    string   // API token id user@realm!token
	Password    Secret   // the PBS token secret; "" → not sent
	Fingerprint string   // PBS certificate SHA-256
	Nodes       []string // nil → not sent; else comma-joined
}

// The parameter names CreatePBSStorage can send, in the order it sends them. UsedAPI
// declares exactly these for POST /storage.
var pbsCreateParams = []string{
	"storage", "type", "content", "prune-backups",
	"server", "port", "datastore", "namespace", "username", "password", "fingerprint", "nodes",
}

// Form returns the POST /storage parameters for p: type=pbs, content=backup,
// prune-backups=keep-all=1 and p's fields; server and datastore always, port, namespace,
// username, password, fingerprint and nodes only when set.
// The result holds the password: never log it.
func (p PBSStorage) Form() url.Values {
	f := url.Values{}
	f.Set("storage", p.Storage)
	f.Set("type", "pbs")
	f.Set("content", "backup")
	f.Set("prune-backups", "keep-all=1")
	f.Set("server", p.Server)
	if p.Port != 0 {
		f.Set("port", strconv.Itoa(p.Port))
	}
	f.Set("datastore", p.Datastore)
	if p.Namespace != "" {
		f.Set("namespace", p.Namespace)
	}
	if p.Username != "" {
		f.Set("username", p.Username)
	}
	if p.Password != "" {
		f.Set("password", p.Password.Reveal())
	}
	if p.Fingerprint != "" {
		f.Set("fingerprint", p.Fingerprint)
	}
	if len(p.Nodes) > 0 {
		f.Set("nodes", strings.Join(p.Nodes, ","))
	}
	return f
}

// CreatePBSStorage sends exactly one form-encoded POST /storage creating the PBS storage p
// (see [PBSStorage.Form]). It is never retried. Results:
//   - nil: PVE created it;
//   - *APIError: PVE refused (403 missing Datastore.Allocate, 400 with Params, 500 "storage
//     ID 'x' already defined" matching [ErrAlreadyExists], …); the password is scrubbed
//     from its texts;
//   - [ErrUnreachable]: the request was not written (nothing can have been created);
//   - [ErrAnswerLost]: it was written but no answer came: the storage may exist; confirm with
//     [Client.Storage], do not POST again.
func (c *Client) CreatePBSStorage(ctx context.Context, p PBSStorage) error {
	r := request{method: http.MethodPost, path: "/storage", form: p.Form()}
	if p.Password != "" {
		r.secrets = []string{p.Password.Reveal()}
	}
	return c.do(ctx, r, nil)
}

// unreadable reports a 2xx answer whose data could not be decoded: the request was
// answered, so for a write it may have been applied.
func unreadable(r request, err error) error {
	return &TransportError{Method: r.method, Path: r.path, Sent: true, Err: fmt.Errorf("unreadable answer: %w", err)}
}
