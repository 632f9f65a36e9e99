package netbox

import (
	"context"
	"encoding/json"
	"net/netip"
	"strconv"
	"strings"
)

// EndpointsPath is the netbox-proxbox plugin's ProxmoxEndpoint list route.
const EndpointsPath = "/api/plugins/proxbox/endpoints/proxmox/"

// endpointsPageSize is how many ProxmoxEndpoints one list request asks for.
const endpointsPageSize = 100

// maxEndpointPages bounds how many pages [Client.ProxmoxEndpoints] follows.
const maxEndpointPages = 100

// ProxmoxEndpoint is how a netbox-proxbox ProxmoxEndpoint says to reach its cluster: what
// proxbus serves it with when it reads its endpoints from NetBox. The plugin's serializer
// never returns the token value (write-only), so the secret is not here.
type ProxmoxEndpoint struct {
	ID   int64
	Name string
	// Domain is the plugin's domain field, "" when unset.
	Domain string
	// IPAddress is the address of the plugin's ip_address (a NetBox IP address, rendered
	// nested as "192.0.2.10/24"), without its prefix length; "" when unset. The plugin uses it
	// when no domain is set.
	IPAddress string
	// Port is the API port (the plugin's default is 8006).
	Port int
	// VerifySSL is the plugin's verify_ssl (its default is false).
	VerifySSL bool
	// Username (USER@REALM) and TokenName make the API token id USER@REALM!TOKENNAME.
	Username  string
	TokenName string
}

// Host is the endpoint's host: Domain, else IPAddress ("" when neither is set).
func (e ProxmoxEndpoint) Host() string {
	if e.Domain != "" {
		return e.Domain
	}
	return e.IPAddress
}

// TokenID is the API token id USER@REALM!TOKENNAME, "" when either part is unset.
func (e ProxmoxEndpoint) TokenID() string {
	if e.Username == "" || e.TokenName == "" {
		return ""
	}
	return e.Username + "!" + e.TokenName
}

// proxmoxEndpointBody is the part of the plugin's ProxmoxEndpointSerializer read for the
// endpoint list.
type proxmoxEndpointBody struct {
	ID        *int64  `json:"id"`
	Name      *string `json:"name"`
	Domain    *string `json:"domain"`
	IPAddress *struct {
		Address string `json:"address"`
	} `json:"ip_address"`
	Port      *int    `json:"port"`
	VerifySSL *bool   `json:"verify_ssl"`
	Username  *string `json:"username"`
	TokenName *string `json:"token_name"`
}

// ProxmoxEndpoints lists every ProxmoxEndpoint, ordered as NetBox pages them (by id),
// following the pagination. It returns ErrUnauthorized for a refused token and ErrUnavailable
// when NetBox cannot answer or answers something that is not an endpoint list; an entry with
// no id is an unreadable answer. Unset fields are zero values (a missing port is 8006, the
// plugin's default).
func (c *Client) ProxmoxEndpoints(ctx context.Context) ([]ProxmoxEndpoint, error) {
	const op = "list endpoints"
	var out []ProxmoxEndpoint
	for offset, pages := 0, 0; ; pages++ {
		if pages == maxEndpointPages {
			return nil, newError(op, ErrUnavailable, 200, nil, "more than "+strconv.Itoa(maxEndpointPages*endpointsPageSize)+" endpoints", nil, c.secrets)
		}
		body, err := c.get(ctx, op, EndpointsPath+"?limit="+strconv.Itoa(endpointsPageSize)+"&offset="+strconv.Itoa(offset))
		if err != nil {
			return nil, err
		}
		var page struct {
			Count   int                    `json:"count"`
			Next    *string                `json:"next"`
			Results *[]proxmoxEndpointBody `json:"results"`
		}
		if err := json.Unmarshal(body, &page); err != nil || page.Results == nil {
			return nil, newError(op, ErrUnavailable, 200, nil, "answer is not a ProxmoxEndpoint list", nil, c.secrets)
		}
		for _, b := range *page.Results {
			if b.ID == nil {
				return nil, newError(op, ErrUnavailable, 200, nil, "an entry of the list has no id", nil, c.secrets)
			}
			out = append(out, b.endpoint())
		}
		offset += len(*page.Results)
		if page.Next == nil || *page.Next == "" || len(*page.Results) == 0 {
			return out, nil
		}
	}
}

// endpoint is b as a ProxmoxEndpoint.
func (b proxmoxEndpointBody) endpoint() ProxmoxEndpoint {
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return strings.TrimSpace(*p)
	}
	e := ProxmoxEndpoint{ID: *b.ID, Name: str(b.Name), Domain: str(b.Domain), Port: 8006,
		Username: str(b.Username), TokenName: str(b.TokenName)}
	if b.Port != nil {
		e.Port = *b.Port
	}
	if b.VerifySSL != nil {
		e.VerifySSL = *b.VerifySSL
	}
	if b.IPAddress != nil {
		e.IPAddress = hostOfCIDR(b.IPAddress.Address)
	}
	return e
}

// hostOfCIDR is the address of a NetBox "address/prefix" value; a value that is no prefix is
// returned trimmed, as it is.
func hostOfCIDR(s string) string {
	s = strings.TrimSpace(s)
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Addr().String()
	}
	return s
}
