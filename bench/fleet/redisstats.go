package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// commandStats reads Redis's INFO commandstats: calls by command name (lower case, as Redis
// names them: "evalsha", "get", "client|setinfo").
func commandStats(ctx context.Context, rdb *redis.Client) (map[string]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	raw, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, fmt.Errorf("redis info commandstats: %w", err)
	}
	return parseCommandStats(raw)
}

// parseCommandStats reads the lines "cmdstat_<name>:calls=N,usec=…" of INFO commandstats.
func parseCommandStats(raw string) (map[string]int64, error) {
	out := map[string]int64{}
	for line := range strings.SplitSeq(raw, "\n") {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, "cmdstat_")
		if !ok {
			continue
		}
		name, fields, ok := strings.Cut(rest, ":")
		if !ok {
			return nil, fmt.Errorf("commandstats line %q: no ':'", line)
		}
		found := false
		for f := range strings.SplitSeq(fields, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("commandstats line %q: calls: %w", line, err)
				}
				out[name], found = n, true
			}
		}
		if !found {
			return nil, fmt.Errorf("commandstats line %q: no calls", line)
		}
	}
	return out, nil
}

// statsDelta is after minus before, without the benchmark's own INFO calls, and without the
// names whose count did not change.
func statsDelta(before, after map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for name, n := range after {
		if name == "info" {
			continue
		}
		if d := n - before[name]; d != 0 {
			out[name] = d
		}
	}
	return out
}

// formatPerCommand renders counts divided by n, largest first: "evalsha 2.00, get 1.00".
func formatPerCommand(counts map[string]int64, n int, top int) string {
	names := slices.Collect(maps.Keys(counts))
	slices.SortFunc(names, func(a, b string) int {
		if counts[a] != counts[b] {
			return int(counts[b] - counts[a])
		}
		return strings.Compare(a, b)
	})
	var parts []string
	rest := int64(0)
	for i, name := range names {
		if i >= top {
			rest += counts[name]
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.2f", name, float64(counts[name])/float64(n)))
	}
	if rest > 0 {
		parts = append(parts, fmt.Sprintf("others %.2f", float64(rest)/float64(n)))
	}
	return strings.Join(parts, ", ")
}
