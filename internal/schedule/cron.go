// Copyright 2025-2026 The NATS Authors (server/cron.go of nats-server v2.15, Apache License
// 2.0), based on github.com/robfig/cron, Copyright (C) 2012 Rob Figueiredo (MIT License).
// Ported so proxbus computes a schedule's firings exactly as the nats-server that fires them.

package schedule

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ErrPattern matches the errors of [ParseCron] and [Next]: the cron expression is invalid.
var ErrPattern = errors.New("invalid cron expression")

// Cron is a parsed 6-field cron expression (seconds, minutes, hours, day of month, month,
// day of week), as nats-server evaluates it.
type Cron struct {
	second, minute, hour, dom, month, dow uint64
}

// predefined maps nats-server's predefined schedules to their expressions.
var predefined = map[string]string{
	"@yearly": "0 0 0 1 1 *", "@annually": "0 0 0 1 1 *", "@monthly": "0 0 0 1 * *",
	"@weekly": "0 0 0 * * 0", "@daily": "0 0 0 * * *", "@midnight": "0 0 0 * * *", "@hourly": "0 0 * * * *",
}

// ParseCron parses a 6-field cron expression or a predefined schedule (@yearly, @annually,
// @monthly, @weekly, @daily, @midnight, @hourly). Its error wraps [ErrPattern].
func ParseCron(pattern string) (Cron, error) {
	if p, ok := predefined[pattern]; ok {
		pattern = p
	}
	fields := strings.Fields(pattern)
	if len(fields) != 6 {
		return Cron{}, fmt.Errorf("%w: %d fields, want 6 (seconds minutes hours day-of-month month day-of-week)", ErrPattern, len(fields))
	}
	var c Cron
	for i, f := range []struct {
		bits *uint64
		b    bounds
	}{{&c.second, seconds}, {&c.minute, minutes}, {&c.hour, hours}, {&c.dom, dom}, {&c.month, months}, {&c.dow, dow}} {
		bits, err := getField(fields[i], f.b)
		if err != nil {
			return Cron{}, fmt.Errorf("%w: %w", ErrPattern, err)
		}
		*f.bits = bits
	}
	return c, nil
}

// Next is the first firing of c strictly after t, in loc (UTC when nil), as nats-server's
// parseCron computes it, daylight-saving changes included: it follows the zone's wall clock,
// so a time the spring-forward night skips does not fire that night, and one the fall-back
// night repeats fires at both instants. It fails when nothing matches within five years.
func (c Cron) Next(t time.Time, loc *time.Location) (time.Time, error) {
	if loc == nil {
		loc = time.UTC
	}
	next := t.In(loc).Truncate(time.Second).Add(time.Second)
	truncated := false
	yearLimit := next.Year() + 5

WRAP:
	if next.Year() > yearLimit {
		return time.Time{}, fmt.Errorf("%w: no firing within five years", ErrPattern)
	}
	for 1<<uint(next.Month())&c.month == 0 {
		if !truncated {
			truncated = true
			next = time.Date(next.Year(), next.Month(), 1, 0, 0, 0, 0, loc)
		}
		if next = next.AddDate(0, 1, 0); next.Month() == time.January {
			goto WRAP
		}
	}
	for !dayMatches(c.dom, c.dow, next) {
		if !truncated {
			truncated = true
			next = time.Date(next.Year(), next.Month(), next.Day(), 0, 0, 0, 0, loc)
		}
		if next = next.AddDate(0, 0, 1); next.Day() == 1 {
			goto WRAP
		}
	}
	for 1<<uint(next.Hour())&c.hour == 0 {
		if !truncated {
			truncated = true
			next = time.Date(next.Year(), next.Month(), next.Day(), next.Hour(), 0, 0, 0, loc)
		}
		if next = next.Add(time.Hour); next.Hour() == 0 {
			goto WRAP
		}
	}
	for 1<<uint(next.Minute())&c.minute == 0 {
		if !truncated {
			truncated = true
			next = next.Truncate(time.Minute)
		}
		if next = next.Add(time.Minute); next.Minute() == 0 {
			goto WRAP
		}
	}
	for 1<<uint(next.Second())&c.second == 0 {
		if !truncated {
			truncated = true
			next = next.Truncate(time.Second)
		}
		if next = next.Add(time.Second); next.Second() == 0 {
			goto WRAP
		}
	}
	return next, nil
}

// Prev is the latest firing of c at or before t (whole seconds), in loc (UTC when nil): the
// time a firing stored at t was due, when nats-server fired it on time or late. It fails when
// c fired not once in the five years before t.
func (c Cron) Prev(t time.Time, loc *time.Location) (time.Time, error) {
	t = t.Truncate(time.Second)
	for back := time.Minute; back <= 5*366*24*time.Hour; back *= 4 {
		at, err := c.Next(t.Add(-back), loc)
		if err != nil || at.After(t) {
			continue
		}
		for {
			n, err := c.Next(at, loc)
			if err != nil || n.After(t) {
				return at, nil
			}
			at = n
		}
	}
	return time.Time{}, fmt.Errorf("%w: no firing in the five years before %s", ErrPattern, t.UTC().Format(time.RFC3339))
}

// getField returns the bits of a comma-separated list of ranges.
func getField(field string, r bounds) (uint64, error) {
	var bits uint64
	for expr := range strings.FieldsFuncSeq(field, func(r rune) bool { return r == ',' }) {
		bit, err := getRange(expr, r)
		if err != nil {
			return bits, err
		}
		bits |= bit
	}
	return bits, nil
}

// getRange returns the bits of number | number "-" number, with an optional "/" step.
func getRange(expr string, r bounds) (uint64, error) {
	var (
		start, end, step uint
		rangeAndStep     = strings.Split(expr, "/")
		lowAndHigh       = strings.Split(rangeAndStep[0], "-")
		singleDigit      = len(lowAndHigh) == 1
		err              error
		extra            uint64
	)
	if lowAndHigh[0] == "*" || lowAndHigh[0] == "?" {
		start, end, extra = r.min, r.max, starBit
	} else {
		if start, err = parseIntOrName(lowAndHigh[0], r.names); err != nil {
			return 0, err
		}
		switch len(lowAndHigh) {
		case 1:
			end = start
		case 2:
			if end, err = parseIntOrName(lowAndHigh[1], r.names); err != nil {
				return 0, err
			}
		default:
			return 0, fmt.Errorf("too many hyphens: %s", expr)
		}
	}
	switch len(rangeAndStep) {
	case 1:
		step = 1
	case 2:
		if step, err = mustParseInt(rangeAndStep[1]); err != nil {
			return 0, err
		}
		if singleDigit { // "N/step" means "N-max/step"
			end = r.max
		}
		if step > 1 {
			extra = 0
		}
	default:
		return 0, fmt.Errorf("too many slashes: %s", expr)
	}
	switch {
	case start < r.min:
		return 0, fmt.Errorf("beginning of range (%d) below minimum (%d): %s", start, r.min, expr)
	case end > r.max:
		return 0, fmt.Errorf("end of range (%d) above maximum (%d): %s", end, r.max, expr)
	case start > end:
		return 0, fmt.Errorf("beginning of range (%d) beyond end of range (%d): %s", start, end, expr)
	case step == 0:
		return 0, fmt.Errorf("step of range should be a positive number: %s", expr)
	}
	return getBits(start, end, step) | extra, nil
}

func parseIntOrName(expr string, names map[string]uint) (uint, error) {
	if n, ok := names[strings.ToLower(expr)]; ok {
		return n, nil
	}
	return mustParseInt(expr)
}

func mustParseInt(expr string) (uint, error) {
	n, err := strconv.Atoi(expr)
	if err != nil {
		return 0, fmt.Errorf("not a number: %s", expr)
	}
	if n < 0 {
		return 0, fmt.Errorf("negative number (%d) not allowed: %s", n, expr)
	}
	return uint(n), nil
}

// getBits sets the bits of [lo, hi] in steps of step.
func getBits(lo, hi, step uint) uint64 {
	if step == 1 {
		return ^(math.MaxUint64 << (hi + 1)) & (math.MaxUint64 << lo)
	}
	var bits uint64
	for i := lo; i <= hi; i += step {
		bits |= 1 << i
	}
	return bits
}

// bounds is the range of one field, with its names.
type bounds struct {
	min, max uint
	names    map[string]uint
}

var (
	seconds = bounds{0, 59, nil}
	minutes = bounds{0, 59, nil}
	hours   = bounds{0, 23, nil}
	dom     = bounds{1, 31, nil}
	months  = bounds{1, 12, map[string]uint{"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
		"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12}}
	dow = bounds{0, 6, map[string]uint{"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}}
)

// starBit is set when a field was "*" or "?".
const starBit = 1 << 63

// dayMatches reports whether t satisfies the day-of-month and day-of-week fields: both when
// either is a star, else either.
func dayMatches(dayOfMonth, dayOfWeek uint64, t time.Time) bool {
	domMatch := 1<<uint(t.Day())&dayOfMonth > 0
	dowMatch := 1<<uint(t.Weekday())&dayOfWeek > 0
	if dayOfMonth&starBit > 0 || dayOfWeek&starBit > 0 {
		return domMatch && dowMatch
	}
	return domMatch || dowMatch
}
