package main

import (
	"io"
	"testing"

	"github.com/proxbus/proxbus/internal/app"
)

// TestSecurityFlags pins the flags, their PROXBUS_* variables and the Security they build;
// the NATS-only set leaves Redis and NetBox at their zero values.
func TestSecurityFlags(t *testing.T) {
	t.Parallel()
	env := map[string]string{"PROXBUS_NATS_CREDS": "/env/user.creds", "PROXBUS_REDIS_TLS_INSECURE": "true"}
	tests := []struct {
		name string
		add  func(*flagSet) *securityFlags
		args []string
		want app.Security
	}{
		{
			name: "all", add: addSecurityFlags,
			args: []string{"--nats-tls-ca", "ca.pem", "--nats-tls-cert", "c.pem", "--nats-tls-key", "k.pem", "--nats-tls-first",
				"--netbox-tls-ca", "nb.pem", "--netbox-tls-insecure=false"},
			want: app.Security{NATSCreds: "/env/user.creds", NATSTLSCA: "ca.pem", NATSTLSCert: "c.pem", NATSTLSKey: "k.pem",
				NATSTLSFirst: true, RedisTLSInsecure: true, NetBoxTLSCA: "nb.pem", NATSInboxPrefix: app.InboxService},
		},
		{
			name: "flag over env", add: addSecurityFlags,
			args: []string{"--nats-creds", "", "--nats-nkey", "user.nk", "--redis-tls-ca", "r.pem", "--redis-tls-insecure=false",
				"--nats-inbox-prefix", "_INBOX_tenant1"},
			want: app.Security{NATSNKey: "user.nk", RedisTLSCA: "r.pem", NATSInboxPrefix: "_INBOX_tenant1"},
		},
		{
			name: "nats only", add: func(fs *flagSet) *securityFlags { return addNATSSecurityFlags(fs, app.InboxApprover) },
			want: app.Security{NATSCreds: "/env/user.creds", NATSInboxPrefix: app.InboxApprover},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fs := newFlagSet("test", io.Discard)
			fs.getenv = func(k string) string { return env[k] }
			f := tt.add(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if got := f.security(); got != tt.want {
				t.Errorf("security() = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}
