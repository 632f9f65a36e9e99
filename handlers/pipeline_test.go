package handlers

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/store"
)

type noClients struct{}

func (noClients) Get(int64) (*proxmox.Client, bool) { return nil, false }

// TestNewRefusesUnworkableConfig: a missing dependency or a negative setting is refused with
// config.ErrInvalid naming the field; zero settings take the documented defaults.
func TestNewRefusesUnworkableConfig(t *testing.T) {
	t.Parallel()
	st, err := store.New(nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := newStream()
	full := func() Config {
		return Config{Registry: NewRegistry(), Store: st, Endpoints: writable{}, Journal: &journal{}, Proxmox: noClients{}, Publisher: s, History: s}
	}
	cases := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no registry", func(c *Config) { c.Registry = nil }, "Registry"},
		{"no store", func(c *Config) { c.Store = nil }, "Store"},
		{"no history", func(c *Config) { c.History = nil }, "History"},
		{"negative attempts", func(c *Config) { c.MaxAttempts = -1 }, "MaxAttempts"},
		{"negative busy delay", func(c *Config) { c.BusyDelay = -time.Second }, "BusyDelay"},
		{"negative guard wait", func(c *Config) { c.GuardWait = -time.Second }, "GuardWait"},
		{"negative guest waiters", func(c *Config) { c.GuestWaiters = -1 }, "GuestWaiters"},
		{"negative journal retries", func(c *Config) { c.JournalRetries = -1 }, "JournalRetries"},
		{"negative command max age", func(c *Config) { c.CommandMaxAge = -time.Minute }, "CommandMaxAge"},
	}
	for _, tc := range cases {
		cfg := full()
		tc.mod(&cfg)
		if _, err := New(cfg); !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want config.ErrInvalid naming %s", tc.name, err, tc.want)
		}
	}
	p, err := New(full())
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{MaxAttempts: DefaultMaxAttempts, BusyDelay: DefaultBusyDelay, GuardWait: DefaultGuardWait, GuestWaiters: DefaultGuestWaiters, MaxWait: DefaultMaxWait,
		ConfirmFor: DefaultConfirmFor, CommandMaxAge: DefaultCommandMaxAge, ApprovalPoll: DefaultApprovalPoll, JournalRetries: DefaultJournalRetries, JournalRetryDelay: DefaultJournalRetryDelay}
	if p.cfg.Settings != want {
		t.Errorf("settings = %+v, want the defaults %+v", p.cfg.Settings, want)
	}
}
