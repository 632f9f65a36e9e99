package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/proxbus/proxbus/handlers"
)

// maxStdinData bounds what --data @- reads (far above any NATS max_payload).
const maxStdinData = 64 << 20

// readData returns the command data of --data: the JSON itself, the content of @file, or
// stdin for @-. The result must be valid JSON.
func readData(data string, stdin io.Reader) ([]byte, error) {
	body := []byte(data)
	switch {
	case data == "@-":
		if stdin == nil {
			return nil, errors.New("--data @-: no stdin to read")
		}
		b, err := io.ReadAll(io.LimitReader(stdin, maxStdinData+1))
		if err != nil {
			return nil, fmt.Errorf("--data @-: reading stdin: %w", err)
		}
		if len(b) > maxStdinData {
			return nil, fmt.Errorf("--data @-: stdin holds more than %d bytes", maxStdinData)
		}
		body = b
	case strings.HasPrefix(data, "@"):
		b, err := os.ReadFile(strings.TrimPrefix(data, "@"))
		if err != nil {
			return nil, fmt.Errorf("--data %s: %w", data, err)
		}
		body = b
	}
	if !json.Valid(body) {
		where := "--data"
		if strings.HasPrefix(data, "@") {
			where += " " + data
		}
		return nil, fmt.Errorf("%s is not valid JSON: %s", where, jsonErrorAt(body))
	}
	return body, nil
}

// jsonErrorAt says where body, which is not valid JSON, goes wrong: line and column (in
// bytes, from 1), and what the decoder found there.
func jsonErrorAt(body []byte) string {
	var v any
	err := json.Unmarshal(body, &v)
	pos, what := len(body), "unexpected end of the data"
	var se *json.SyntaxError
	if errors.As(err, &se) && !strings.Contains(se.Error(), "unexpected end") && se.Offset > 0 {
		pos = int(min(se.Offset-1, int64(len(body)))) // Offset counts the offending byte
		what = "unexpected character " + strings.TrimPrefix(se.Error(), "invalid character ")
	}
	line, col := 1, 1
	for _, b := range body[:pos] {
		if b == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Sprintf("line %d, column %d: %s", line, col, what)
}

// parseExpires reads --expires: "" (none), a positive duration from now (10m, 1h30m) or an
// RFC 3339 time after now. The result is in UTC.
func parseExpires(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("--expires %s: must be a positive duration (e.g. 10m) or a future RFC 3339 time", v)
		}
		return now.Add(d).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("--expires %q: not a duration (e.g. 10m, 1h30m) nor an RFC 3339 time (e.g. 2026-01-02T15:04:05Z)", v)
	}
	if !t.After(now) {
		return time.Time{}, fmt.Errorf("--expires %s: already past; the command would be answered 410 command_expired", v)
	}
	return t.UTC(), nil
}

// checkSend checks a command before `send` publishes it, with the pipeline's own validation
// ([handlers.Registry.Check]): the verb exists (else the closest names), an endpoint verb has
// --endpoint, the data fits the verb (naming the failed and the undeclared fields, with a
// did-you-mean; never a value), and --expires parsed (expiresErr). It returns one message per
// problem, none when the command may be sent.
func checkSend(verb string, data json.RawMessage, endpoint int64, expiresErr error) []string {
	registry := handlers.NewRegistry(handlers.Builtin()...)
	res, err := registry.Check(verb, data)
	var unknown *handlers.UnknownVerbError
	if errors.As(err, &unknown) {
		msg := fmt.Sprintf("unknown verb %q", verb)
		if len(unknown.Closest) > 0 {
			msg += "; did you mean " + orList(unknown.Closest) + "?"
		} else {
			msg += "; the verbs are " + strings.Join(registry.Names(), ", ")
		}
		return []string{msg}
	}
	var problems []string
	switch {
	case endpoint < 0:
		problems = append(problems, fmt.Sprintf("--endpoint %d: must be a NetBox ProxmoxEndpoint id (a positive integer)", endpoint))
	case endpoint == 0 && res.NeedsEndpoint:
		problems = append(problems, fmt.Sprintf("--endpoint is required: %s runs against a NetBox ProxmoxEndpoint; give its id (e.g. --endpoint 1)", verb))
	}
	if expiresErr != nil {
		problems = append(problems, expiresErr.Error())
	}
	if !res.Valid() {
		problems = append(problems, dataProblems(verb, res))
	}
	return problems
}

// dataProblems describes why data does not fit verb: one indented line per field, then the
// verb's fields.
func dataProblems(verb string, res handlers.CheckResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "--data does not fit %s:", verb)
	if res.NotObject {
		b.WriteString("\n  the data must be a JSON object")
		return b.String()
	}
	for _, u := range res.Undeclared {
		fmt.Fprintf(&b, "\n  %q is not a field of %s", u.Name, verb)
		if u.Closest != "" {
			fmt.Fprintf(&b, "; did you mean %q?", u.Closest)
		}
	}
	absent := map[string]bool{}
	for _, name := range res.Absent {
		absent[name] = true
	}
	for _, name := range res.Failed {
		if absent[name] {
			fmt.Fprintf(&b, "\n  %s: required, missing", name)
		} else {
			fmt.Fprintf(&b, "\n  %s: wrong type or value", name)
		}
	}
	if res.UnnamedUndeclared {
		fmt.Fprintf(&b, "\n  an object inside the data has fields %s does not declare", verb)
	}
	if len(res.Declared) > 0 {
		fmt.Fprintf(&b, "\n  %s's fields: %s (docs/verbs.md describes them)", verb, strings.Join(res.Declared, ", "))
	}
	return b.String()
}
