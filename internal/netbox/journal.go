package netbox

import (
	"context"
	"encoding/json"
	"math"
	"strconv"
	"strings"

	gonetbox "github.com/netbox-community/go-netbox/v4"
)

// ObjectTypeEndpoint is the NetBox object type of a netbox-proxbox ProxmoxEndpoint.
const ObjectTypeEndpoint = "netbox_proxbox.proxmoxendpoint"

// ObjectTypeVM is the NetBox object type of a virtual machine.
const ObjectTypeVM = "virtualization.virtualmachine"

// Kind is a journal entry's kind (NetBox's JournalEntryKindChoices).
type Kind string

// The journal entry kinds NetBox accepts.
const (
	KindInfo    Kind = "info"
	KindSuccess Kind = "success"
	KindWarning Kind = "warning"
	KindDanger  Kind = "danger"
)

// Valid reports whether k is one of the kinds NetBox accepts.
func (k Kind) Valid() bool {
	switch k {
	case KindInfo, KindSuccess, KindWarning, KindDanger:
		return true
	}
	return false
}

// JournalEntry is a journal entry to create.
type JournalEntry struct {
	// ObjectType is the assigned object's "app_label.model", e.g. ObjectTypeEndpoint.
	ObjectType string
	// ObjectID is the assigned object's id.
	ObjectID int64
	// Kind is the entry's kind; empty means NetBox's default (info).
	Kind Kind
	// Comments is the Markdown body; required. It must never contain a secret.
	Comments string
}

// JournalRef identifies a created journal entry.
type JournalRef struct {
	ID int64
	// URL is the API URL NetBox returned for the entry.
	URL string
}

// CreateJournalEntry creates e and returns its id and API URL. Invalid input (no object type,
// no comments, unknown kind) returns ErrRejected without a request; NetBox's 400 returns
// ErrRejected naming the rejected fields; transport failures, 5xx and 429 return ErrUnavailable,
// and so does a 2xx answer without the entry's id.
func (c *Client) CreateJournalEntry(ctx context.Context, e JournalEntry) (JournalRef, error) {
	const op = "create journal entry"
	if fields := checkEntry(e); len(fields) > 0 {
		return JournalRef{}, newError(op, ErrRejected, 0, fields, "", nil, c.secrets)
	}
	req := gonetbox.NewWritableJournalEntryRequest(e.ObjectType, e.ObjectID, e.Comments)
	if e.Kind != "" {
		req.SetKind(gonetbox.JournalEntryKindValue(e.Kind))
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	entry, resp, err := c.api.ExtrasAPI.ExtrasJournalEntriesCreate(ctx).WritableJournalEntryRequest(*req).Execute()
	undecoded, err := c.check(op, resp, err)
	if err != nil {
		return JournalRef{}, err
	}
	var ref JournalRef
	switch {
	case undecoded != nil:
		// The entry was created, but go-netbox refused the answer (see entryAnswer).
		var a entryAnswer
		if json.Unmarshal(undecoded, &a) == nil {
			ref = JournalRef{ID: a.ID, URL: a.URL}
		}
	case entry != nil:
		ref = JournalRef{ID: int64(entry.GetId()), URL: entry.GetUrl()}
	}
	if ref.ID <= 0 {
		return JournalRef{}, newError(op, ErrUnavailable, resp.StatusCode, nil, "created entry has no id in the answer", nil, c.secrets)
	}
	return ref, nil
}

// entryAnswer is what proxbus reads of a journal entry when go-netbox's model refuses NetBox's
// answer. go-netbox v4.3.0 decodes strictly: a missing required field, an id beyond int32 or
// a choice label outside its English enum (NetBox translates labels into the request's
// language, e.g. with DEFAULT_LANGUAGE) fails the whole answer, though NetBox accepted the
// request.
type entryAnswer struct {
	ID       int64  `json:"id"`
	URL      string `json:"url"`
	Comments string `json:"comments"`
}

// UpdateJournalEntry PATCHes entry id's kind and comments (an empty kind is left unchanged).
// It returns ErrNotFound when the entry is gone, ErrRejected for a refused update (naming the
// fields), ErrUnavailable for transient failures. A 2xx answer is success even when its body
// cannot be decoded: the update was applied.
func (c *Client) UpdateJournalEntry(ctx context.Context, id int64, kind Kind, comments string) error {
	op := "update journal entry " + strconv.FormatInt(id, 10)
	var fields []string
	if id <= 0 || id > math.MaxInt32 {
		fields = append(fields, "id")
	}
	if kind != "" && !kind.Valid() {
		fields = append(fields, "kind")
	}
	if strings.TrimSpace(comments) == "" {
		fields = append(fields, "comments")
	}
	if len(fields) > 0 {
		return newError(op, ErrRejected, 0, fields, "", nil, c.secrets)
	}
	req := gonetbox.NewPatchedWritableJournalEntryRequest()
	req.SetComments(comments)
	if kind != "" {
		req.SetKind(gonetbox.JournalEntryKindValue(kind))
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	_, resp, err := c.api.ExtrasAPI.ExtrasJournalEntriesPartialUpdate(ctx, int32(id)).PatchedWritableJournalEntryRequest(*req).Execute()
	_, err = c.check(op, resp, err)
	return err
}

// checkEntry returns the names of e's fields NetBox would refuse, sorted.
func checkEntry(e JournalEntry) []string {
	var fields []string
	if !validObjectType(e.ObjectType) {
		fields = append(fields, "assigned_object_type")
	}
	if e.ObjectID < 0 {
		fields = append(fields, "assigned_object_id")
	}
	if strings.TrimSpace(e.Comments) == "" {
		fields = append(fields, "comments")
	}
	if e.Kind != "" && !e.Kind.Valid() {
		fields = append(fields, "kind")
	}
	return sortedCopy(fields)
}

// validObjectType reports whether s has NetBox's "app_label.model" form (lower case).
func validObjectType(s string) bool {
	app, model, ok := strings.Cut(s, ".")
	return ok && isIdent(app) && isIdent(model)
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return true
}
