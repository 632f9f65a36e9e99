package ingress_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/ingress"
	"github.com/proxbus/proxbus/internal/testenv"
)

// TestNewRefusesUnworkableConfig: New refuses what cannot work with config.ErrInvalid,
// naming the field.
func TestNewRefusesUnworkableConfig(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	cases := []struct {
		name string
		cfg  ingress.Config
		want string
	}{
		{"no JetStream", ingress.Config{}, "JetStream"},
		{"negative result timeout", ingress.Config{JetStream: n.JS, ResultTimeout: -time.Second}, "ResultTimeout"},
		{"source not a URI-reference", ingress.Config{JetStream: n.JS, Source: "not a uri"}, "source"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ingress.New(tc.cfg); !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want config.ErrInvalid naming %q", err, tc.want)
			}
		})
	}
}
