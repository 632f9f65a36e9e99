package simnetbox_test

import (
	"encoding/json"
	"testing"
)

// TestJournalSearch pins the q filter like NetBox's JournalEntryFilterSet.search: a
// case-insensitive substring of the comments, combined with the other filters; a blank q
// filters nothing.
func TestJournalSearch(t *testing.T) {
	t.Parallel()
	_, base := newSim(t)
	for _, c := range []string{
		"- command_id: Abc-1\n- result: in_progress",
		"- command_id: abc-12\n",
		"- command_id: other\n",
	} {
		body := `{"assigned_object_type":"netbox_proxbox.proxmoxendpoint","assigned_object_id":1,"comments":` + quote(c) + `}`
		if status, b := call(t, "POST", base+"/api/extras/journal-entries/", v1, body); status != 201 {
			t.Fatalf("create %d %v", status, b)
		}
	}
	tests := []struct {
		name, query string
		want        float64
	}{
		{"substring, any case", "q=ABC-1", 2},
		{"exact longer id", "q=abc-12", 1},
		{"no match", "q=zzz", 0},
		{"blank q", "q=%20", 3},
		{"with object filter", "q=abc&assigned_object_type=netbox_proxbox.proxmoxendpoint&assigned_object_id=1", 2},
		{"other object", "q=abc&assigned_object_type=netbox_proxbox.proxmoxendpoint&assigned_object_id=2", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := call(t, "GET", base+"/api/extras/journal-entries/?"+tt.query, v1, "")
			if status != 200 || body["count"] != tt.want {
				t.Fatalf("%s: %d count %v, want %v", tt.query, status, body["count"], tt.want)
			}
		})
	}
}

// quote is s as a JSON string.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
