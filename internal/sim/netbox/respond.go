package simnetbox

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// timeFormat is how NetBox (Django REST framework) renders datetimes.
const timeFormat = "2006-01-02T15:04:05.000000Z07:00"

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"detail":"encoding failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("API-Version", "4.5")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func notFound(w http.ResponseWriter) {
	writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not found."})
}

// writeFault answers an injected failure; 5xx answers look like a proxy's, others like DRF's.
func writeFault(w http.ResponseWriter, status int) {
	if status >= 500 {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(status)
		_, _ = w.Write([]byte("<html><body><h1>" + strconv.Itoa(status) + " " + http.StatusText(status) + "</h1></body></html>\n"))
		return
	}
	writeJSON(w, status, map[string]string{"detail": http.StatusText(status)})
}

// fieldErrors collects DRF-style validation errors: {"field": ["message", …]}.
type fieldErrors map[string][]string

func (f fieldErrors) add(field, msg string) { f[field] = append(f[field], msg) }

// baseURL is the scheme and host the request reached, as NetBox uses for absolute URLs.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func fmtTime(t time.Time) string { return t.UTC().Format(timeFormat) }

// pathID parses the {id} path value; ok is false when it is not a positive integer.
func pathID(r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	return id, err == nil && id > 0
}

// page renders a paginated list with NetBox's limit/offset semantics (default limit 50).
func page(w http.ResponseWriter, r *http.Request, items []any) {
	q := r.URL.Query()
	limit, offset := 50, 0
	if v, err := strconv.Atoi(q.Get("limit")); err == nil && v > 0 {
		limit = min(v, 1000)
	}
	if v, err := strconv.Atoi(q.Get("offset")); err == nil && v > 0 {
		offset = v
	}
	count := len(items)
	start := min(offset, count)
	end := min(start+limit, count)
	var next, prev any
	link := func(off int) string {
		u := *r.URL
		qq := u.Query()
		qq.Set("limit", strconv.Itoa(limit))
		qq.Set("offset", strconv.Itoa(off))
		u.RawQuery = qq.Encode()
		return baseURL(r) + u.RequestURI()
	}
	if end < count {
		next = link(end)
	}
	if start > 0 {
		prev = link(max(start-limit, 0))
	}
	results := items[start:end]
	if results == nil {
		results = []any{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"count": count, "next": next, "previous": prev, "results": results})
}
