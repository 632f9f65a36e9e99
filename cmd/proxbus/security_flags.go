package main

import "github.com/proxbus/proxbus/internal/app"

// securityFlags are the transport-security flags (docs/security.md). A group that was not
// added is left nil and contributes nothing to [securityFlags.security].
type securityFlags struct {
	natsCreds, natsNKey, natsTLSCA, natsTLSCert, natsTLSKey *string
	natsTLSFirst                                            *bool
	natsInboxPrefix                                         *string
	redisTLSCA                                              *string
	redisTLSInsecure                                        *bool
	redisSentinelUsername                                   *string
	redisSentinelPassword                                   *secretFlag
	netboxTLSCA                                             *string
	netboxTLSInsecure                                       *bool
}

// addSecurityFlags adds the NATS, Redis and NetBox security flags (for `serve`, whose
// replies arrive under the service's inbox prefix).
func addSecurityFlags(fs *flagSet) *securityFlags {
	f := addNATSSecurityFlags(fs, app.InboxService)
	f.redisTLSCA = fs.str("redis-tls-ca", "", "PEM file of the CAs trusted for Redis (needs a rediss:// URL)")
	f.redisTLSInsecure = fs.boolean("redis-tls-insecure", false, "do not verify the Redis server's certificate (rediss:// only; unsafe)")
	f.redisSentinelUsername = fs.str("redis-sentinel-username", "", "ACL user of the Redis Sentinels (redis+sentinel:// only; the URL's user is the data nodes')")
	f.redisSentinelPassword = fs.secret("redis-sentinel-password", "password of the Redis Sentinels (redis+sentinel:// only)")
	f.netboxTLSCA = fs.str("netbox-tls-ca", "", "PEM file of the CAs trusted for NetBox (only these)")
	f.netboxTLSInsecure = fs.boolean("netbox-tls-insecure", false, "do not verify NetBox's certificate (unsafe)")
	return f
}

// addNATSSecurityFlags adds only the NATS security flags (for the client commands: send,
// events, dlq, streams), with inbox the default inbox prefix: that of the role of
// deploy/nats/accounts.conf the command is meant for.
func addNATSSecurityFlags(fs *flagSet, inbox string) *securityFlags {
	return &securityFlags{
		natsInboxPrefix: fs.str("nats-inbox-prefix", inbox,
			"subject prefix of this connection's reply inboxes; the NATS user must be allowed to subscribe to <prefix>.> (deploy/nats/accounts.conf gives each role its own)"),
		natsCreds:    fs.str("nats-creds", "", "NATS credentials file (user JWT and NKey seed)"),
		natsNKey:     fs.str("nats-nkey", "", "file holding a NATS user NKey seed (SU…)"),
		natsTLSCA:    fs.str("nats-tls-ca", "", "PEM file of the CAs trusted for NATS (requires TLS)"),
		natsTLSCert:  fs.str("nats-tls-cert", "", "PEM client certificate for NATS mutual TLS"),
		natsTLSKey:   fs.str("nats-tls-key", "", "PEM key of --nats-tls-cert"),
		natsTLSFirst: fs.boolean("nats-tls-first", false, "TLS handshake before the NATS INFO (server handshake_first)"),
	}
}

// security returns the settings the flags hold, but for the Sentinel password, a secret
// flag whose value the caller reads (and reports when unusable).
func (f *securityFlags) security() app.Security {
	return app.Security{
		NATSCreds: valueOrZero(f.natsCreds), NATSNKey: valueOrZero(f.natsNKey), NATSTLSCA: valueOrZero(f.natsTLSCA),
		NATSTLSCert: valueOrZero(f.natsTLSCert), NATSTLSKey: valueOrZero(f.natsTLSKey), NATSTLSFirst: valueOrZero(f.natsTLSFirst),
		NATSInboxPrefix: valueOrZero(f.natsInboxPrefix),
		RedisTLSCA:      valueOrZero(f.redisTLSCA), RedisTLSInsecure: valueOrZero(f.redisTLSInsecure),
		RedisSentinelUsername: valueOrZero(f.redisSentinelUsername),
		NetBoxTLSCA:           valueOrZero(f.netboxTLSCA), NetBoxTLSInsecure: valueOrZero(f.netboxTLSInsecure),
	}
}

// valueOrZero is *p, or the zero value when p is nil.
func valueOrZero[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
