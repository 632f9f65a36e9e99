package simpve

import (
	"net/http"
	"strings"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// failRule answers the next n matching requests with status and message.
type failRule struct {
	method, path string
	n            int
	status       int
	message      string
	params       map[string]string // set: answer 400 Parameter verification failed with these errors
}

// dropRule drops the answer of the next n matching requests after applying them.
type dropRule struct {
	method, path string
	n            int
}

// matches reports whether a rule for (method, path) covers a request. path may be the
// schema path ("/storage/{storage}") or a concrete one ("/storage/pbs1").
func matches(ruleMethod, rulePath, method string, use *proxmox.APIUse, path string) bool {
	if !strings.EqualFold(ruleMethod, method) {
		return false
	}
	return rulePath == path || (use != nil && rulePath == use.Path)
}

// FailNext makes the next n requests matching method and path (schema path such as
// "/storage/{storage}" or a concrete one such as "/storage/pbs1") answer status with
// message, as PVE or a proxy in front of it would, before authentication and without
// applying anything. Rules are consumed in the order they were added.
func (s *Server) FailNext(method, path string, n int, status int, message string) {
	if n <= 0 {
		return
	}
	if message == "" {
		message = http.StatusText(status)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failRules = append(s.failRules, &failRule{method: method, path: path, n: n, status: status, message: message})
}

// RejectNext makes the next n requests matching method and path answer PVE's 400
// "Parameter verification failed." with the given per-parameter errors (name → message),
// without applying anything: a refusal by Proxmox of values proxbus itself accepted.
func (s *Server) RejectNext(method, path string, n int, params map[string]string) {
	if n <= 0 || len(params) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failRules = append(s.failRules, &failRule{method: method, path: path, n: n, status: http.StatusBadRequest, params: params})
}

// takeFail consumes one matching fail rule; Server.mu is held.
func (s *Server) takeFail(method string, use *proxmox.APIUse, path string) (answer, bool) {
	for i, r := range s.failRules {
		if !matches(r.method, r.path, method, use, path) {
			continue
		}
		r.n--
		if r.n == 0 {
			s.failRules = append(s.failRules[:i], s.failRules[i+1:]...)
		}
		if r.params != nil {
			return paramFail(r.params), true
		}
		return fail(r.status, r.message), true
	}
	return answer{}, false
}

// DropAnswerAfterApply makes the next n requests matching method and path be handled
// normally (a create is applied) and then answered by closing the connection without a
// response: the client's "lost answer".
func (s *Server) DropAnswerAfterApply(method, path string, n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropRules = append(s.dropRules, &dropRule{method: method, path: path, n: n})
}

// takeDrop consumes one matching drop rule; Server.mu is held.
func (s *Server) takeDrop(method string, use *proxmox.APIUse, path string) bool {
	for i, r := range s.dropRules {
		if !matches(r.method, r.path, method, use, path) {
			continue
		}
		r.n--
		if r.n == 0 {
			s.dropRules = append(s.dropRules[:i], s.dropRules[i+1:]...)
		}
		return true
	}
	return false
}
