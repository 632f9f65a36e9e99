package app

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

func TestReadyHandler(t *testing.T) {
	t.Parallel()
	up := func(context.Context) error { return nil }
	down := func(context.Context) error { return ErrNotReady }
	slow := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	tests := []struct {
		name     string
		checks   []ReadyCheck
		wantCode int
		wantDown []string
	}{
		{"all up", []ReadyCheck{{"nats", up}, {"redis", up}, {"consumer", up}}, http.StatusOK, nil},
		{"redis down", []ReadyCheck{{"nats", up}, {"redis", down}, {"consumer", up}}, http.StatusServiceUnavailable, []string{"redis"}},
		{"two down", []ReadyCheck{{"nats", down}, {"redis", up}, {"consumer", down}}, http.StatusServiceUnavailable, []string{"nats", "consumer"}},
		{"no checks", nil, http.StatusOK, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			ReadyHandler(tc.checks...).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, PathReadyz, nil))
			if rec.Code != tc.wantCode {
				t.Errorf("status %d, want %d", rec.Code, tc.wantCode)
			}
			var body readyBody
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", rec.Body.String(), err)
			}
			if body.Ready != (tc.wantCode == http.StatusOK) || !slices.Equal(body.Down, tc.wantDown) {
				t.Errorf("body %+v, want down %v", body, tc.wantDown)
			}
		})
	}
	t.Run("a hanging check is down once the request ends", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, PathReadyz, nil).WithContext(ctx)
		ReadyHandler(ReadyCheck{"redis", slow}).ServeHTTP(rec, req)
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("status %d, want 503", rec.Code)
		}
	})
}

func TestHealthHandler(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	HealthHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, PathHealthz, nil))
	if rec.Code != http.StatusOK || rec.Body.String() != "ok\n" {
		t.Errorf("healthz %d %q", rec.Code, rec.Body.String())
	}
}
