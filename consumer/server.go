package consumer

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MinServerVersion is the oldest nats-server proxbus runs on: message schedules with cron
// expressions in a time zone (contract §11) came with nats-server 2.14.
const MinServerVersion = "2.14.0"

// ErrServerTooOld is wrapped by [CheckServerVersion]'s refusal.
var ErrServerTooOld = errors.New("nats-server too old")

// CheckServerVersion returns an error wrapping [ErrServerTooOld] when version (a nats-server
// version as the server announces it, "2.15.2" or "v2.14.0-beta.1") is older than
// [MinServerVersion] or cannot be read; the message names the version found.
func CheckServerVersion(version string) error {
	got, ok := parseVersion(version)
	want, _ := parseVersion(MinServerVersion)
	if ok && compareVersions(got, want) >= 0 {
		return nil
	}
	if version == "" {
		version = "an unknown version"
	}
	return fmt.Errorf("%w: the NATS server runs %s; proxbus needs nats-server %s or later (JetStream message schedules with time zones, for scheduled commands): upgrade the server",
		ErrServerTooOld, version, MinServerVersion)
}

// parseVersion reads major.minor.patch from v, ignoring a leading "v" and a pre-release or
// build suffix.
func parseVersion(v string) ([3]int, bool) {
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	var out [3]int
	if len(parts) != 3 {
		return out, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, false
		}
		out[i] = n
	}
	return out, true
}

// compareVersions is -1, 0 or 1 as a is older than, equal to or newer than b.
func compareVersions(a, b [3]int) int {
	for i := range a {
		switch {
		case a[i] < b[i]:
			return -1
		case a[i] > b[i]:
			return 1
		}
	}
	return 0
}
