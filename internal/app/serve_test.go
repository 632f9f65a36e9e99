package app

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/proxmox"
)

// TestConfigDefaultsAndRefusals pins Config's own defaults, and that what cannot work is an
// error wrapping config.ErrInvalid naming the setting, never replaced by a default.
func TestConfigDefaultsAndRefusals(t *testing.T) {
	t.Parallel()
	ok := Config{NetBoxURL: "http://netbox", Endpoints: []proxmox.EndpointConfig{}}
	c := ok.withDefaults()
	if c.NATSURL != DefaultNATSURL || c.RedisURL != DefaultRedisURL || c.EndpointCacheTTL != DefaultEndpointCacheTTL ||
		c.Instance == "" || c.Getenv == nil || c.LogHandler == nil || c.Consumer.Subjects.Prefix != "proxbus" {
		t.Errorf("defaults = %+v", c)
	}
	if err := c.validate(); err != nil {
		t.Errorf("validate: %v", err)
	}
	cases := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no NetBox URL", func(c *Config) { c.NetBoxURL = "" }, "PROXBUS_NETBOX_URL"},
		{"no endpoints", func(c *Config) { c.Endpoints = nil }, "PROXBUS_ENDPOINTS_FILE"},
		{"endpoint cache too long", func(c *Config) { c.EndpointCacheTTL = time.Minute }, "EndpointCacheTTL"},
		{"negative endpoint cache", func(c *Config) { c.EndpointCacheTTL = -time.Second }, "EndpointCacheTTL"},
		{"negative task poll", func(c *Config) { c.TaskPollInterval = -time.Second }, "TaskPollInterval"},
	}
	for _, tc := range cases {
		c := ok
		tc.mod(&c)
		if err := c.withDefaults().validate(); !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want config.ErrInvalid naming %s", tc.name, err, tc.want)
		}
	}
}
