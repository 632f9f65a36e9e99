// Package endpointset is the set of Proxmox endpoints proxbus serves when it reads them from
// NetBox (proxbus serve --endpoints-from-netbox) instead of an endpoints file.
//
// A [Set] lists the netbox-proxbox plugin's ProxmoxEndpoint objects and builds a Proxmox
// client for each: its URL is https://DOMAIN:PORT (the IP address when no domain is set), its
// certificate is verified when verify_ssl is true, its token id is USERNAME!TOKEN_NAME. The
// plugin never returns a token's value, so the secret is local: the variable
// PROXBUS_ENDPOINT_<ID>_TOKEN_SECRET (ID is the NetBox id), looked up first in the secrets file
// (KEY=VALUE lines, systemd EnvironmentFile syntax, re-read at every read of the endpoints),
// then in the environment.
//
// The set is read again periodically ([Set.Run]) and whenever [Set.Kick] asks (a NetBox
// webhook on the ProxmoxEndpoint model), and swapped at once: commands started earlier finish
// on the client they started with. An endpoint that cannot be used (no secret, no address, no
// token id) has no client; [Set.Why] says why, naming it, so only its own commands wait.
package endpointset
