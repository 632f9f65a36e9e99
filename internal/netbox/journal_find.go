package netbox

import (
	"context"
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// findLimit is how many candidate entries FindJournalEntry reads: NetBox's q filter is a
// substring search, so a command id that is a substring of others may match a few more.
const findLimit = 50

// FindJournalEntry returns the newest journal entry assigned to (objectType, objectID) whose
// comments carry the bullet "- command_id: <commandID>", found with
// GET /api/extras/journal-entries/?assigned_object_type=…&assigned_object_id=…&q=<commandID>
// (NetBox's q filter is a case-insensitive substring search of the comments, so every hit is
// checked for the exact bullet before it is trusted). No such entry returns ErrNotFound;
// invalid input returns ErrRejected without a request; transport failures, 5xx and 429 return
// ErrUnavailable, like every other request.
func (c *Client) FindJournalEntry(ctx context.Context, objectType string, objectID int64, commandID string) (JournalRef, error) {
	const op = "find journal entry"
	var fields []string
	if !validObjectType(objectType) {
		fields = append(fields, "assigned_object_type")
	}
	if objectID < 0 || objectID > math.MaxInt32 {
		fields = append(fields, "assigned_object_id")
	}
	if strings.TrimSpace(commandID) == "" {
		fields = append(fields, "q")
	}
	if len(fields) > 0 {
		return JournalRef{}, newError(op, ErrRejected, 0, fields, "", nil, c.secrets)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	page, resp, err := c.api.ExtrasAPI.ExtrasJournalEntriesList(ctx).
		AssignedObjectType(objectType).AssignedObjectId([]int32{int32(objectID)}).
		Q(OneLine(commandID)).Limit(findLimit).Execute()
	undecoded, err := c.check(op, resp, err)
	if err != nil {
		return JournalRef{}, err
	}
	var entries []entryAnswer
	listed := page != nil
	if undecoded != nil {
		// go-netbox refused the answer (see entryAnswer); read what proxbus needs of it.
		var raw struct {
			Results *[]entryAnswer `json:"results"`
		}
		if listed = json.Unmarshal(undecoded, &raw) == nil && raw.Results != nil; listed {
			entries = *raw.Results
		}
	} else if listed {
		for _, e := range page.GetResults() {
			entries = append(entries, entryAnswer{ID: int64(e.GetId()), URL: e.GetUrl(), Comments: e.GetComments()})
		}
	}
	if !listed {
		return JournalRef{}, newError(op, ErrUnavailable, resp.StatusCode, nil, "answer is not a journal entry list", nil, c.secrets)
	}
	var found JournalRef
	for _, e := range entries {
		if e.ID > found.ID && hasCommandBullet(e.Comments, commandID) {
			found = JournalRef{ID: e.ID, URL: e.URL}
		}
	}
	if found.ID == 0 {
		return JournalRef{}, newError(op, ErrNotFound, resp.StatusCode, nil,
			"no entry of command "+strconv.Quote(commandID), nil, c.secrets)
	}
	return found, nil
}

// hasCommandBullet reports whether comments has the line "- command_id: <id>" exactly (the
// pipeline writes the id with [OneLine]).
func hasCommandBullet(comments, id string) bool {
	want := "- command_id: " + OneLine(id)
	for line := range strings.SplitSeq(comments, "\n") {
		if strings.TrimRight(line, "\r") == want {
			return true
		}
	}
	return false
}

// inlineUnsafe turns CR and LF into spaces and takes apart what makes Markdown links and
// images and raw HTML: "](" and "][" (an inline or reference link or image) get a backslash
// before their second bracket, which python-markdown (NetBox's renderer) reads as the
// character itself; angle brackets (autolinks, HTML) become entities. A bracket alone, as in
// "[redacted]", stays as it is.
var inlineUnsafe = strings.NewReplacer("\r", " ", "\n", " ", "](", `]\(`, "][", `]\[`, "<", "&lt;", ">", "&gt;")

// OneLine is s as the value of one journal bullet line ("- name: value"): CR and LF become
// spaces, so no Markdown structure can be injected through a value, and links, images and
// HTML are taken apart, so a value (an actor, a name, an error text from Proxmox) cannot put
// them into NetBox.
func OneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n]<>") {
		return s
	}
	return inlineUnsafe.Replace(s)
}
