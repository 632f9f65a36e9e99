package simnetbox

import (
	"net/http"
	"slices"
)

// getByID answers GET …/{id}/ for table m (one of s's maps keyed by object id, read under
// s.mu): the object rendered by render with 200, or 404 when the path id is not a positive
// integer or m holds no such object.
func getByID[T any](s *Server, w http.ResponseWriter, r *http.Request, m map[int64]*T, render func(*http.Request, *T) map[string]any) {
	id, ok := pathID(r)
	if !ok {
		notFound(w)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	obj := m[id]
	if obj == nil {
		notFound(w)
		return
	}
	writeJSON(w, http.StatusOK, render(r, obj))
}

// listByID answers a list request for table m (as for getByID): the objects keep accepts
// (every object when keep is nil), in ascending id order, rendered by render and paginated
// by page.
func listByID[T any](s *Server, w http.ResponseWriter, r *http.Request, m map[int64]*T, keep func(*T) bool, render func(*http.Request, *T) map[string]any) {
	s.mu.Lock()
	ids := make([]int64, 0, len(m))
	for id, obj := range m {
		if keep == nil || keep(obj) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	items := make([]any, 0, len(ids))
	for _, id := range ids {
		items = append(items, render(r, m[id]))
	}
	s.mu.Unlock()
	page(w, r, items)
}
