package ingress

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/events"
)

// Accepted is the 202 answer to a webhook: the command it became and where to follow it.
type Accepted struct {
	CommandID     string `json:"command_id"`
	CommandSource string `json:"command_source"`
	Verb          string `json:"verb"`
	// Rule is the rule that made the command; empty for a CloudEvent body.
	Rule string `json:"rule,omitempty"`
	// Subject matches every event of the command (proxbus.evt.<ref>.>).
	Subject string `json:"subject"`
	// ResultSubject is the subject of its result event.
	ResultSubject string `json:"result_subject"`
	// Duplicate is true when JetStream already held this command (a redelivered webhook).
	Duplicate bool `json:"duplicate"`
}

// WebhookCommandID derives the command id of a webhook mapped by a rule: "nbwh-" and 40 hex
// digits of sha256 over the rule name, the verb, and the webhook's request id, event, object
// type (or bare model), object id and timestamp.
//
// NetBox sends a webhook from a background job whose arguments (event, object type, data,
// timestamp, request) are fixed when the event is queued; a retry of that job, automatic or
// from the admin UI, renders the same context, so it gets the same id and proxbus executes it
// once (JetStream's duplicate window, then the command identity kept in Redis). Two different
// changes differ in request id or timestamp (NetBox queues one event per object and request),
// so they never share an id; the rule name and verb keep a change that a later rules file maps
// differently from replaying an older, different command.
func WebhookCommandID(rule, verb string, w Webhook) string {
	object := w.ObjectType
	if object == "" {
		object = w.Model
	}
	h := sha256.New()
	for _, part := range []string{rule, verb, w.RequestID, w.Event, strings.ToLower(object), w.ObjectID, w.Timestamp} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return "nbwh-" + hex.EncodeToString(h.Sum(nil))[:40]
}

func (s *Server) handleWebhook(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	if err := VerifySignature(s.cfg.WebhookSecret, r.Header, body); err != nil {
		reason := "invalid_signature"
		if errors.Is(err, ErrSignatureMissing) {
			reason = "signature_missing"
		}
		s.log.Warn("webhook refused", "reason", reason, "remote", r.RemoteAddr)
		writeJSON(w, http.StatusUnauthorized, errorBody{Reason: reason, Detail: "X-Hook-Signature must be the lowercase hex HMAC-SHA512 of the body"})
		return
	}
	if isCloudEvent(r.Header, body) {
		s.acceptCloudEvent(w, r, body)
		return
	}
	wh, err := ParseWebhook(body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Reason: "invalid_webhook", Detail: "the body is neither a NetBox webhook body (event, data) nor a structured CloudEvent"})
		return
	}
	m, matched, err := s.cfg.Rules.Map(wh)
	if err != nil {
		s.log.Warn("webhook rule failed", "rule", m.Rule, "event", wh.Event, "object_type", wh.ObjectType, "model", wh.Model, "error", err)
		writeJSON(w, http.StatusUnprocessableEntity, errorBody{Reason: "rule_render_failed", Rule: m.Rule, Detail: "a template of the matching rule failed for this webhook (see the proxbus log)"})
		return
	}
	if !matched {
		s.log.Debug("webhook matched no rule", "event", wh.Event, "object_type", wh.ObjectType, "model", wh.Model)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if !verbAllowed(s.cfg.WebhookVerbs, m.Verb) { // New refused such rules; kept as a second lock
		s.refuseVerb(w, r, m.Verb)
		return
	}
	at, ok := parseNetBoxTime(wh.Timestamp)
	if !ok {
		writeJSON(w, http.StatusUnprocessableEntity, errorBody{Reason: "invalid_webhook", Fields: []string{"timestamp"},
			Detail: "the webhook's timestamp is missing or not an ISO 8601 time with a zone; NetBox's default body has it"})
		return
	}
	if !s.timely(w, r, at, "timestamp") {
		return
	}
	cmd := events.Command{
		ID: WebhookCommandID(m.Rule, m.Verb, wh), Source: s.cfg.Source, Verb: m.Verb, Time: at,
		EndpointID: m.EndpointID, HasEndpointID: m.HasEndpointID,
		Actor: m.Actor, IdempotencyKey: m.IdempotencyKey, Data: m.Data,
	}
	if object := firstNonEmpty(wh.ObjectType, wh.Model); object != "" && wh.ObjectID != "" {
		cmd.Subject = object + "/" + wh.ObjectID
	}
	msg, cmd, err := s.encode(cmd)
	if err != nil {
		// The encoder's reasons are fixed phrases naming the attribute, never its value.
		writeJSON(w, http.StatusUnprocessableEntity, errorBody{Reason: "invalid_command", Rule: m.Rule, Detail: err.Error()})
		return
	}
	s.publishAccepted(w, r, msg, cmd, m.Rule)
}

// acceptCloudEvent publishes a structured-mode CloudEvent body as it is, once the events
// decoder accepted it.
func (s *Server) acceptCloudEvent(w http.ResponseWriter, r *http.Request, body []byte) {
	var head struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(body, &head)
	verb, ok := strings.CutPrefix(head.Type, events.TypePrefix)
	subject := s.cfg.Subjects.Command(verb)
	if _, valid := s.cfg.Subjects.VerbOf(subject); !ok || !valid {
		writeJSON(w, http.StatusUnprocessableEntity, errorBody{Reason: "invalid_cloudevent", Detail: "type is not proxbus.<verb>"})
		return
	}
	if !verbAllowed(s.cfg.WebhookVerbs, verb) {
		s.refuseVerb(w, r, verb)
		return
	}
	h := nats.Header{}
	h.Set(events.HeaderContentType, events.ContentTypeCE)
	cmd, err := events.Decode(subject, h, body, s.cfg.Subjects)
	if err != nil {
		detail := "not a valid command"
		var p *events.PoisonError
		if errors.As(err, &p) {
			detail = p.Reason
		}
		writeJSON(w, http.StatusUnprocessableEntity, errorBody{Reason: "invalid_cloudevent", Detail: detail})
		return
	}
	if cmd.Time.IsZero() {
		writeJSON(w, http.StatusUnprocessableEntity, errorBody{Reason: "invalid_cloudevent", Fields: []string{"time"},
			Detail: "a webhook's CloudEvent needs its time (render NetBox's {{ timestamp }}), so that a captured body cannot be replayed later"})
		return
	}
	if !s.timely(w, r, cmd.Time, "time") {
		return
	}
	if !underSource(cmd.Source, s.cfg.Source) {
		s.log.Warn("webhook refused", "reason", "source_not_allowed", "remote", r.RemoteAddr)
		writeJSON(w, http.StatusForbidden, errorBody{Reason: "source_not_allowed", Fields: []string{"source"},
			Detail: "a webhook's source must be " + s.cfg.Source + " or a path under it"})
		return
	}
	msg := nats.NewMsg(subject)
	msg.Header = h
	msg.Header.Set(events.HeaderMsgID, cmd.ID)
	msg.Data = body
	s.publishAccepted(w, r, msg, cmd, "")
}

func (s *Server) publishAccepted(w http.ResponseWriter, r *http.Request, msg *nats.Msg, cmd events.Command, rule string) {
	dup, err := s.publish(r.Context(), msg)
	if err != nil {
		s.log.Error("webhook command not published", "command_id", cmd.ID, "verb", cmd.Verb, "error", err)
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Reason: "nats_unavailable", Detail: "the command could not be stored; NetBox may retry the webhook"})
		return
	}
	ref := cmd.Ref()
	s.log.Info("webhook accepted", "command_id", cmd.ID, "verb", cmd.Verb, "rule", rule, "endpoint_id", cmd.EndpointID, "duplicate", dup)
	writeJSON(w, http.StatusAccepted, Accepted{
		CommandID: cmd.ID, CommandSource: cmd.Source, Verb: cmd.Verb, Rule: rule,
		Subject: s.cfg.Subjects.Follow(ref), ResultSubject: s.cfg.Subjects.Result(ref), Duplicate: dup,
	})
}

// timely reports whether a webhook signed with time at is within MaxAge of now and not more
// than MaxClockSkew ahead; otherwise it answers 422 naming field and returns false.
func (s *Server) timely(w http.ResponseWriter, r *http.Request, at time.Time, field string) bool {
	now := s.cfg.Now()
	switch {
	case at.Before(now.Add(-s.cfg.MaxAge)):
		s.log.Warn("webhook refused", "reason", "webhook_too_old", "age", now.Sub(at).Round(time.Second), "remote", r.RemoteAddr)
		writeJSON(w, http.StatusUnprocessableEntity, errorBody{Reason: "webhook_too_old", Fields: []string{field},
			Detail: "the webhook is older than the command identity window (" + s.cfg.MaxAge.String() + "): a replay of a captured body is never run; make the change again in NetBox"})
		return false
	case at.After(now.Add(MaxClockSkew)):
		s.log.Warn("webhook refused", "reason", "webhook_from_the_future", "ahead", at.Sub(now).Round(time.Second), "remote", r.RemoteAddr)
		writeJSON(w, http.StatusUnprocessableEntity, errorBody{Reason: "webhook_from_the_future", Fields: []string{field},
			Detail: "the webhook's time is more than " + MaxClockSkew.String() + " ahead of proxbus's clock: check NetBox's and proxbus's clocks (NTP)"})
		return false
	}
	return true
}

// parseNetBoxTime reads a NetBox webhook timestamp: Python's isoformat of an aware datetime,
// with "T" or a space between date and time ("2025-01-10 10:00:00.123456+00:00").
func parseNetBoxTime(s string) (time.Time, bool) {
	if len(s) > 10 && s[10] == ' ' {
		s = s[:10] + "T" + s[11:]
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

// refuseVerb answers 403 for a verb the webhook front may not publish.
func (s *Server) refuseVerb(w http.ResponseWriter, r *http.Request, verb string) {
	s.log.Warn("webhook refused", "reason", "verb_not_allowed", "verb", verb, "remote", r.RemoteAddr)
	detail := "this verb is not among the webhook verbs (PROXBUS_WEBHOOK_VERBS)"
	if strings.HasPrefix(verb, CommandVerbPrefix) {
		detail = "command.* verbs (approvals, rejections) are never accepted from a webhook; use proxbus approve|reject"
	}
	writeJSON(w, http.StatusForbidden, errorBody{Reason: "verb_not_allowed", Fields: []string{"type"}, Detail: detail})
}

// underSource reports whether source is front or a path under it (front + "/..."), so that a
// webhook cannot make a command in another producer's namespace of ids.
func underSource(source, front string) bool {
	return source == front || strings.HasPrefix(source, strings.TrimSuffix(front, "/")+"/")
}

// isCloudEvent reports whether a webhook body is a structured-mode CloudEvent: the
// Content-Type says so, or the body is a JSON object with a specversion attribute.
func isCloudEvent(h http.Header, body []byte) bool {
	if mt, _, err := mime.ParseMediaType(h.Get("Content-Type")); err == nil && mt == events.ContentTypeCE {
		return true
	}
	var probe map[string]json.RawMessage
	if json.Unmarshal(body, &probe) != nil {
		return false
	}
	_, ok := probe["specversion"]
	return ok
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
