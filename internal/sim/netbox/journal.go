package simnetbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// knownObjectTypes are the object types journal entries may be assigned to in the simulator.
var knownObjectTypes = map[string]bool{
	"dcim.device":                    true,
	"virtualization.virtualmachine":  true,
	"netbox_proxbox.proxmoxendpoint": true,
}

var objectTypeForm = regexp.MustCompile(`^[A-Za-z0-9_]+\.[A-Za-z0-9_]+$`)

var kindLabels = map[string]string{"info": "Info", "success": "Success", "warning": "Warning", "danger": "Danger"}

// entryInput is a decoded, validated journal entry body; nil fields were absent.
type entryInput struct {
	objectType *string
	objectID   *int64
	kind       *string
	comments   *string
}

// decodeEntry validates a journal entry body like NetBox's JournalEntrySerializer. partial
// (PATCH) makes every field optional.
func decodeEntry(r *http.Request, partial bool) (entryInput, fieldErrors) {
	var in entryInput
	errs := fieldErrors{}
	var doc json.RawMessage
	if err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20)).Decode(&doc); err != nil {
		errs.add("detail", "JSON parse error - "+err.Error())
		return in, errs
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(doc, &raw); err != nil || raw == nil {
		errs.add("non_field_errors", "Invalid data. Expected a dictionary.")
		return in, errs
	}
	if v, ok := raw["assigned_object_type"]; ok {
		var s string
		switch {
		case json.Unmarshal(v, &s) != nil:
			errs.add("assigned_object_type", "Incorrect type. Expected content type string identifier.")
		case !objectTypeForm.MatchString(s):
			errs.add("assigned_object_type", "Invalid value. Specify a content type as '<app_label>.<model_name>'.")
		case !knownObjectTypes[strings.ToLower(s)]:
			errs.add("assigned_object_type", fmt.Sprintf("Invalid content type: %s", s))
		default:
			s = strings.ToLower(s)
			in.objectType = &s
		}
	} else if !partial {
		errs.add("assigned_object_type", "This field is required.")
	}
	if v, ok := raw["assigned_object_id"]; ok {
		if id, good := decodeInt(v); good && id >= 0 {
			in.objectID = &id
		} else if good {
			errs.add("assigned_object_id", "Ensure this value is greater than or equal to 0.")
		} else {
			errs.add("assigned_object_id", "A valid integer is required.")
		}
	} else if !partial {
		errs.add("assigned_object_id", "This field is required.")
	}
	if v, ok := raw["kind"]; ok {
		var s string
		if json.Unmarshal(v, &s) != nil || kindLabels[s] == "" {
			errs.add("kind", fmt.Sprintf("%q is not a valid choice.", strings.Trim(string(v), `"`)))
		} else {
			in.kind = &s
		}
	}
	if v, ok := raw["comments"]; ok {
		var s string
		switch {
		case json.Unmarshal(v, &s) != nil:
			errs.add("comments", "Not a valid string.")
		case strings.TrimSpace(s) == "":
			errs.add("comments", "This field may not be blank.")
		default:
			in.comments = &s
		}
	} else if !partial {
		errs.add("comments", "This field is required.")
	}
	if len(errs) > 0 {
		return in, errs
	}
	return in, nil
}

// decodeInt accepts a JSON integer or a string holding one, as DRF's IntegerField does.
func decodeInt(v json.RawMessage) (int64, bool) {
	var s string
	if json.Unmarshal(v, &s) == nil {
		id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		return id, err == nil
	}
	var n json.Number
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	if d.Decode(&n) != nil {
		return 0, false
	}
	id, err := n.Int64()
	return id, err == nil
}

// objectExists reports whether the assigned object exists. Devices are not modelled: any id is
// accepted. Called with s.mu held.
func (s *Server) objectExists(objectType string, id int64) bool {
	switch objectType {
	case "netbox_proxbox.proxmoxendpoint":
		return s.endpoints[id] != nil
	case "virtualization.virtualmachine":
		return s.vms[id] != nil
	default:
		return id > 0
	}
}

func (s *Server) createEntry(w http.ResponseWriter, r *http.Request) {
	in, errs := decodeEntry(r, false)
	if errs != nil {
		writeErrors(w, errs)
		return
	}
	s.mu.Lock()
	if !s.objectExists(*in.objectType, *in.objectID) {
		s.mu.Unlock()
		writeJSON(w, http.StatusBadRequest, fieldErrors{"non_field_errors": {
			fmt.Sprintf("Invalid assigned_object: %s ID %d", *in.objectType, *in.objectID)}})
		return
	}
	now := s.now().UTC()
	s.nextEntryID++
	e := &Entry{ID: s.nextEntryID, ObjectType: *in.objectType, ObjectID: *in.objectID,
		Kind: "info", Comments: *in.comments, Created: now, LastUpdated: now}
	if in.kind != nil {
		e.Kind = *in.kind
	}
	s.entries[e.ID] = e
	body := s.entryJSON(r, e)
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, body)
}

func (s *Server) patchEntry(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.failPatches.n > 0 {
		s.failPatches.n--
		status := s.failPatches.status
		s.mu.Unlock()
		writeFault(w, status)
		return
	}
	s.mu.Unlock()
	id, ok := pathID(r)
	if !ok {
		notFound(w)
		return
	}
	in, errs := decodeEntry(r, true)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[id]
	if !ok {
		notFound(w)
		return
	}
	if errs != nil {
		writeErrors(w, errs)
		return
	}
	objType, objID := e.ObjectType, e.ObjectID
	if in.objectType != nil {
		objType = *in.objectType
	}
	if in.objectID != nil {
		objID = *in.objectID
	}
	if !s.objectExists(objType, objID) {
		writeJSON(w, http.StatusBadRequest, fieldErrors{"non_field_errors": {
			fmt.Sprintf("Invalid assigned_object: %s ID %d", objType, objID)}})
		return
	}
	e.ObjectType, e.ObjectID = objType, objID
	if in.kind != nil {
		e.Kind = *in.kind
	}
	if in.comments != nil {
		e.Comments = *in.comments
	}
	e.LastUpdated = s.now().UTC()
	e.Patches++
	writeJSON(w, http.StatusOK, s.entryJSON(r, e))
}

func (s *Server) getEntry(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(r)
	if !ok {
		notFound(w)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[id]
	if !ok {
		notFound(w)
		return
	}
	writeJSON(w, http.StatusOK, s.entryJSON(r, e))
}

// listEntries supports NetBox's filters assigned_object_type, assigned_object_id, kind and id
// (each repeatable) and q (JournalEntryFilterSet.search: a case-insensitive substring of the
// comments; a blank q filters nothing), ordered by id descending like NetBox's default
// (-created).
func (s *Server) listEntries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ids, errs := intFilter(q["id"], "id")
	objIDs, errs2 := intFilter(q["assigned_object_id"], "assigned_object_id")
	for k, v := range errs2 {
		errs[k] = v
	}
	if len(errs) > 0 {
		writeJSON(w, http.StatusBadRequest, errs)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var list []*Entry
	for _, e := range s.entries {
		if matches(q["assigned_object_type"], strings.ToLower(e.ObjectType), strings.ToLower) &&
			matches(q["kind"], e.Kind, strings.ToLower) && inSet(ids, e.ID) && inSet(objIDs, e.ObjectID) &&
			searchMatches(q.Get("q"), e.Comments) {
			list = append(list, e)
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].ID > list[j].ID })
	items := make([]any, 0, len(list))
	for _, e := range list {
		items = append(items, s.entryJSON(r, e))
	}
	page(w, r, items)
}

// searchMatches is NetBox's q filter on journal entries: comments__icontains, skipped when q
// is blank.
func searchMatches(q, comments string) bool {
	q = strings.TrimSpace(q)
	return q == "" || strings.Contains(strings.ToLower(comments), strings.ToLower(q))
}

// matches reports whether v is one of want (after norm), or want is empty.
func matches(want []string, v string, norm func(string) string) bool {
	if len(want) == 0 {
		return true
	}
	for _, w := range want {
		if norm(w) == v {
			return true
		}
	}
	return false
}

func inSet(set map[int64]bool, v int64) bool { return set == nil || set[v] }

// intFilter parses a repeatable integer filter; errors are Django filter messages.
func intFilter(vals []string, name string) (map[int64]bool, fieldErrors) {
	errs := fieldErrors{}
	if len(vals) == 0 {
		return nil, errs
	}
	set := map[int64]bool{}
	for _, v := range vals {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			errs.add(name, "Enter a whole number.")
			continue
		}
		set[n] = true
	}
	return set, errs
}

// entryJSON renders e like NetBox's JournalEntrySerializer. Called with s.mu held.
func (s *Server) entryJSON(r *http.Request, e *Entry) map[string]any {
	base := baseURL(r)
	return map[string]any{
		"id":                   e.ID,
		"url":                  fmt.Sprintf("%s/api/extras/journal-entries/%d/", base, e.ID),
		"display_url":          fmt.Sprintf("%s/extras/journal-entries/%d/", base, e.ID),
		"display":              fmt.Sprintf("%s (%s)", e.Created.Format("2006-01-02 15:04"), kindLabels[e.Kind]),
		"assigned_object_type": e.ObjectType,
		"assigned_object_id":   e.ObjectID,
		"assigned_object":      s.objectBrief(r, e.ObjectType, e.ObjectID),
		"created":              fmtTime(e.Created),
		"created_by":           1,
		"kind":                 map[string]string{"value": e.Kind, "label": kindLabels[e.Kind]},
		"comments":             e.Comments,
		"tags":                 []any{},
		"custom_fields":        map[string]any{},
		"last_updated":         fmtTime(e.LastUpdated),
	}
}

// objectBrief is the nested representation of an assigned object, nil when unknown.
// Called with s.mu held.
func (s *Server) objectBrief(r *http.Request, objectType string, id int64) any {
	switch objectType {
	case "netbox_proxbox.proxmoxendpoint":
		if ep := s.endpoints[id]; ep != nil {
			return endpointBrief(r, ep)
		}
	case "virtualization.virtualmachine":
		if v := s.vms[id]; v != nil {
			return vmBrief(r, v)
		}
	}
	return nil
}

// writeErrors answers 400 with DRF's shape: {"detail": "…"} for an unparsable body, else
// {"field": ["message", …]}.
func writeErrors(w http.ResponseWriter, errs fieldErrors) {
	if d, ok := errs["detail"]; ok && len(d) > 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"detail": d[0]})
		return
	}
	writeJSON(w, http.StatusBadRequest, errs)
}
