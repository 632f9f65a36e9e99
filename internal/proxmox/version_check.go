package proxmox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// ErrNotProxmox: the endpoint's URL answered GET /version, but not as a Proxmox VE API does
// (404, or a 2xx that is not PVE's version object): the URL names something else.
var ErrNotProxmox = errors.New("proxmox: not a Proxmox VE API")

// CheckAPI is the start-up probe of the endpoint: an authenticated GET /version. It returns the
// version, or an error that is one of: a refused token (*APIError 401, [ErrUnauthorized]); an
// error wrapping [ErrNotProxmox] with the text of the answer's error (404, or a 2xx that is not
// a version object; never transient); [ErrUnreachable] or [ErrAnswerLost] when no usable answer came (a certificate that
// does not verify, or [ErrCertificateMismatch], is ErrUnreachable too); another *APIError.
func (c *Client) CheckAPI(ctx context.Context) (Version, error) {
	v, err := c.Version(ctx)
	var ae *APIError
	switch {
	case errors.Is(err, ErrUndecodable), errors.As(err, &ae) && ae.Status == http.StatusNotFound:
		// Only the text of the answer's error: waiting does not cure a wrong URL, so it must
		// not match IsTransient as a lost GET would.
		return Version{}, fmt.Errorf("%w: %s", ErrNotProxmox, err.Error())
	case err != nil:
		return Version{}, err
	case v.Version == "":
		return Version{}, fmt.Errorf("%w: GET /version named no version", ErrNotProxmox)
	}
	return v, nil
}
