package proxmox

import (
	"context"
	"net/http"
	"net/url"
)

// PBSStorageUpdate is what storage.pbs.update changes on an existing PBS storage: the token
// id, its secret and the server's certificate fingerprint. Empty fields are not sent and
// stay as they are.
type PBSStorageUpdate struct {
	Storage     string // storage id (the path)
	Username    string // API token id user@realm!token; "" → not sent
	Password    Secret // the PBS token secret; "" → not sent
	Fingerprint string // PBS certificate SHA-256; "" → not sent
}

// The parameter names UpdatePBSStorage can send, in the order it sends them. UsedAPI
// declares exactly these for PUT /storage/{storage}.
var pbsUpdateParams = []string{"username", "password", "fingerprint"}

// Form returns the PUT /storage/{storage} parameters for u: the fields that are set.
// The result holds the password: never log it.
func (u PBSStorageUpdate) Form() url.Values {
	f := url.Values{}
	if u.Username != "" {
		f.Set("username", u.Username)
	}
	if u.Password != "" {
		f.Set("password", u.Password.Reveal())
	}
	if u.Fingerprint != "" {
		f.Set("fingerprint", u.Fingerprint)
	}
	return f
}

// UpdatePBSStorage sends exactly one form-encoded PUT /storage/{storage} with the fields of
// u that are set (pve-storage PVE::API2::Storage::Config update: the options are merged into
// the storage's section, the password is written to /etc/pve/priv/storage/<id>.pw by the PBS
// plugin's on_update_hook). It is never retried. Results:
//   - nil: PVE applied it;
//   - *APIError: PVE refused (403 missing Datastore.Allocate on /storage, 400 with Params, 500
//     "storage 'x' does not exist" matching [ErrNotFound], …); the password is scrubbed from
//     its texts;
//   - [ErrUnreachable]: the request was not written (nothing changed);
//   - [ErrAnswerLost]: it was written but no answer came: it may have been applied.
func (c *Client) UpdatePBSStorage(ctx context.Context, u PBSStorageUpdate) error {
	r := request{method: http.MethodPut, path: "/storage/" + url.PathEscape(u.Storage), form: u.Form()}
	if u.Password != "" {
		r.secrets = []string{u.Password.Reveal()}
	}
	return c.do(ctx, r, nil)
}

// DeleteStorage sends exactly one DELETE /storage/{storage}: PVE removes the storage's
// configuration (and, for PBS, the secrets it keeps under /etc/pve/priv/storage); the
// content on the storage itself — a PBS datastore's backups — is not touched. It is never
// retried. Results: nil; an *APIError (403, 500 "storage 'x' does not exist" matching
// [ErrNotFound], …); [ErrUnreachable]; [ErrAnswerLost]: it may have been applied.
func (c *Client) DeleteStorage(ctx context.Context, id string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: "/storage/" + url.PathEscape(id)}, nil)
}
