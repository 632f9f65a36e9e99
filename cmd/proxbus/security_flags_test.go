package main

import (
	"testing"

	"github.com/proxbus/proxbus/internal/app"
)

// TestSecurityFlags pins the flags, their PROXBUS_* variables and the Security they build;
// the NATS-only set leaves Redis and NetBox at their zero values. The reply inbox prefix is
// the subcommand's role's (serve: the service's) unless --nats-inbox-prefix names another.
func TestSecurityFlags(t *testing.T) {
	t.Parallel()
	env := map[string]string{"PROXBUS_NATS_CREDS": "/env/user.creds", "PROXBUS_REDIS_TLS_INSECURE": "true"}
	tests := []struct {
		name string
		args []string
		want app.Security
	}{
		{
			name: "all",
			args: []string{"serve", "--nats-tls-ca", "ca.pem", "--nats-tls-cert", "c.pem", "--nats-tls-key", "k.pem", "--nats-tls-first",
				"--netbox-tls-ca", "nb.pem", "--netbox-tls-insecure=false"},
			want: app.Security{NATSCreds: "/env/user.creds", NATSTLSCA: "ca.pem", NATSTLSCert: "c.pem", NATSTLSKey: "k.pem",
				NATSTLSFirst: true, RedisTLSInsecure: true, NetBoxTLSCA: "nb.pem", NATSInboxPrefix: app.InboxService},
		},
		{
			name: "flag over env",
			args: []string{"serve", "--nats-creds", "", "--nats-nkey", "user.nk", "--redis-tls-ca", "r.pem", "--redis-tls-insecure=false",
				"--nats-inbox-prefix", "_INBOX_tenant1"},
			want: app.Security{NATSNKey: "user.nk", RedisTLSCA: "r.pem", NATSInboxPrefix: "_INBOX_tenant1"},
		},
		{
			name: "nats only, the admin's inbox", args: []string{"dlq", "list"},
			want: app.Security{NATSCreds: "/env/user.creds", NATSInboxPrefix: app.InboxAdmin},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, e, err := parseCLI(t, env, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			got := c.DLQ.List.security(app.InboxAdmin)
			if tt.args[0] == "serve" {
				cfg, err := c.Serve.build(e, [4]string{}, app.Console{})
				if err != nil {
					t.Fatal(err)
				}
				got = cfg.Security
			}
			if got != tt.want {
				t.Errorf("security() = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}
