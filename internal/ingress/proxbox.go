package ingress

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/proxbus/proxbus/events"
)

// Headers of the proxbox-api front.
const (
	APIKeyHeader         = "X-Proxbox-API-Key"
	ActorHeader          = "X-Proxbox-Actor"
	IdempotencyKeyHeader = "Idempotency-Key"
	// CommandIDHeader carries the id of the command an answer is about.
	CommandIDHeader = "X-Proxbus-Command-Id"
)

// PBSVerb is the verb the front's POST /proxmox/storage/pbs publishes.
const PBSVerb = "storage.pbs.create"

// Pending is the 504 answer of the front: the command was published but no result came in
// time; it may still finish, and its result will be on ResultSubject.
type Pending struct {
	Status        int    `json:"status"`
	Result        string `json:"result"`
	Reason        string `json:"reason"`
	Detail        string `json:"detail"`
	CommandID     string `json:"command_id"`
	CommandSource string `json:"command_source"`
	Verb          string `json:"verb"`
	Subject       string `json:"subject"`
	ResultSubject string `json:"result_subject"`
}

// handlePBS is POST /proxmox/storage/pbs?endpoint_id={id}: the body is storage.pbs.create's
// data, Idempotency-Key and X-Proxbox-Actor become the command's idempotencykey and actor. The
// answer is the result event: its status as the HTTP status, the result as the body
// (journal_finalized always present, as in proxbox-api's answers: true when the command has no
// journal entry, since nothing is left to finalize). A missing endpoint_id is left to the pipeline's gate
// (403 endpoint_id_required), like proxbox-api's.
func (s *Server) handlePBS(w http.ResponseWriter, r *http.Request) {
	if !s.frontAuthorized(r) {
		s.log.Warn("proxbox front refused", "reason", "unauthorized", "remote", r.RemoteAddr)
		writeJSON(w, http.StatusUnauthorized, errorBody{Reason: "unauthorized", Detail: "missing or invalid " + APIKeyHeader})
		return
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	cmd := events.Command{ID: newCommandID(), Source: s.cfg.FrontSource, Verb: PBSVerb}
	var bad []string
	if values, present := r.URL.Query()["endpoint_id"]; present {
		if n, ok := positiveInt(values[0]); ok && len(values) == 1 {
			cmd.EndpointID, cmd.HasEndpointID = n, true
		} else {
			bad = append(bad, "endpoint_id")
		}
	}
	if values := r.Header.Values(IdempotencyKeyHeader); len(values) > 0 {
		if len(values) == 1 && validIdempotencyKey(values[0]) {
			cmd.IdempotencyKey = values[0]
		} else {
			bad = append(bad, IdempotencyKeyHeader)
		}
	}
	if values := r.Header.Values(ActorHeader); len(values) > 0 {
		if len(values) == 1 && events.ValidActor(values[0]) {
			cmd.Actor = values[0]
		} else {
			bad = append(bad, ActorHeader)
		}
	}
	if len(bad) > 0 {
		writeJSON(w, http.StatusUnprocessableEntity, errorBody{Reason: "invalid_body", Fields: bad})
		return
	}
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' || !json.Valid(t) {
		writeJSON(w, http.StatusUnprocessableEntity, errorBody{Reason: "invalid_body", Detail: "the body must be a JSON object"})
		return
	}
	cmd.Data = body
	msg, cmd, err := s.encode(cmd)
	if err != nil {
		writeJSON(w, http.StatusUnprocessableEntity, errorBody{Reason: "invalid_body", Detail: err.Error()})
		return
	}
	w.Header().Set(CommandIDHeader, cmd.ID)
	res, err := s.publishAndAwait(r.Context(), msg, cmd.Ref())
	switch {
	case errors.Is(err, ErrResultTimeout):
		ref := cmd.Ref()
		s.log.Warn("proxbox front timed out", "command_id", cmd.ID, "endpoint_id", cmd.EndpointID)
		writeJSON(w, http.StatusGatewayTimeout, Pending{
			Status: http.StatusGatewayTimeout, Result: "pending", Reason: "result_timeout",
			Detail:    "the command is still running; follow its subject for the result",
			CommandID: cmd.ID, CommandSource: cmd.Source, Verb: cmd.Verb,
			Subject: s.cfg.Subjects.Follow(ref), ResultSubject: s.cfg.Subjects.Result(ref),
		})
		return
	case errors.Is(err, ErrPublish):
		s.log.Error("proxbox front could not publish", "command_id", cmd.ID, "error", err)
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Reason: "nats_unavailable", Detail: "the command could not be published"})
		return
	case err != nil: // the client went away
		s.log.Info("proxbox front client gone", "command_id", cmd.ID, "error", err)
		return
	}
	status := res.Status
	if status < 100 || status > 599 {
		status = http.StatusBadGateway
	}
	s.log.Info("proxbox front answered", "command_id", cmd.ID, "endpoint_id", cmd.EndpointID, "status", status,
		"result", res.Result, "reason", res.Reason, "replayed", res.Replayed)
	if res.JournalFinalized == nil {
		res.JournalFinalized = new(true) // proxbox-api's answers always carry it: nothing is left to finalize
	}
	writeJSON(w, status, res)
}

// frontAuthorized compares X-Proxbox-API-Key with the configured key in constant time.
func (s *Server) frontAuthorized(r *http.Request) bool {
	values := r.Header.Values(APIKeyHeader)
	if len(values) != 1 {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(values[0]), []byte(s.cfg.FrontAPIKey)) == 1
}

// validIdempotencyKey: 1-255 printable ASCII characters (contract §2).
func validIdempotencyKey(k string) bool {
	if len(k) < 1 || len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// newCommandID returns a fresh random command id ("pbx-" and 32 hex digits).
func newCommandID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "pbx-" + hex.EncodeToString(b)
}
