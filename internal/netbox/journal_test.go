package netbox_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/netbox"
	simnetbox "github.com/proxbus/proxbus/internal/sim/netbox"
)

// TestCreateJournalEntry checks that an entry is stored as sent and its ref points at it.
func TestCreateJournalEntry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		entry    netbox.JournalEntry
		prepare  func(*simnetbox.Server)
		wantKind string
	}{
		{"endpoint info", netbox.JournalEntry{ObjectType: netbox.ObjectTypeEndpoint, ObjectID: 1, Kind: netbox.KindInfo, Comments: "- verb: storage.pbs.create\n- result: in_progress"}, nil, "info"},
		{"default kind", netbox.JournalEntry{ObjectType: netbox.ObjectTypeEndpoint, ObjectID: 2, Comments: "c"}, nil, "info"},
		{"vm warning", netbox.JournalEntry{ObjectType: netbox.ObjectTypeVM, ObjectID: 7, Kind: netbox.KindWarning, Comments: "w"},
			func(s *simnetbox.Server) { s.AddVM(7, "web", 100, 1) }, "warning"},
		{"device danger", netbox.JournalEntry{ObjectType: "dcim.device", ObjectID: 3, Kind: netbox.KindDanger, Comments: "d"}, nil, "danger"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, "")
			if tc.prepare != nil {
				tc.prepare(f.sim)
			}
			ref, err := f.client.CreateJournalEntry(context.Background(), tc.entry)
			if err != nil {
				t.Fatal(err)
			}
			e, ok := f.sim.JournalEntry(ref.ID)
			if !ok {
				t.Fatalf("entry %d not stored", ref.ID)
			}
			if e.ObjectType != tc.entry.ObjectType || e.ObjectID != tc.entry.ObjectID || e.Kind != tc.wantKind || e.Comments != tc.entry.Comments {
				t.Fatalf("stored %+v, sent %+v", e, tc.entry)
			}
			if want := f.url + "/api/extras/journal-entries/" + strconv.FormatInt(ref.ID, 10) + "/"; ref.URL != want {
				t.Fatalf("URL = %q, want %q", ref.URL, want)
			}
		})
	}
}

// TestCreateJournalEntryRejected checks that refusals name the fields, never the values, and
// that locally invalid entries are refused without a request.
func TestCreateJournalEntryRejected(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		entry      netbox.JournalEntry
		wantFields []string
		wantSent   bool
		secretText string // a value that must not appear in the error
	}{
		{"unknown object type", netbox.JournalEntry{ObjectType: "dcim.cablexyz", ObjectID: 1, Comments: "c"}, []string{"assigned_object_type"}, true, "cablexyz"},
		{"unknown endpoint", netbox.JournalEntry{ObjectType: netbox.ObjectTypeEndpoint, ObjectID: 424242, Comments: "c"}, []string{"non_field_errors"}, true, "424242"},
		{"bad kind", netbox.JournalEntry{ObjectType: netbox.ObjectTypeEndpoint, ObjectID: 1, Kind: "fatalkind", Comments: "c"}, []string{"kind"}, false, "fatalkind"},
		{"no comments", netbox.JournalEntry{ObjectType: netbox.ObjectTypeEndpoint, ObjectID: 1, Comments: " "}, []string{"comments"}, false, ""},
		{"malformed type", netbox.JournalEntry{ObjectType: "Proxmox Endpoint", ObjectID: 1, Comments: "c"}, []string{"assigned_object_type"}, false, "Proxmox Endpoint"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, "")
			_, err := f.client.CreateJournalEntry(context.Background(), tc.entry)
			if !errors.Is(err, netbox.ErrRejected) || netbox.IsTransient(err) {
				t.Fatalf("err = %v, want ErrRejected", err)
			}
			var ne *netbox.Error
			if !errors.As(err, &ne) || !slices.Equal(ne.Fields, tc.wantFields) {
				t.Fatalf("fields = %+v, want %v", ne, tc.wantFields)
			}
			for _, field := range tc.wantFields {
				if !strings.Contains(err.Error(), field) {
					t.Fatalf("error %q does not name %s", err, field)
				}
			}
			if tc.secretText != "" && strings.Contains(err.Error(), tc.secretText) {
				t.Fatalf("error %q echoes the value %q", err, tc.secretText)
			}
			if sent := f.sim.Requests("POST", "/api/extras/journal-entries/") > 0; sent != tc.wantSent {
				t.Fatalf("request sent = %v, want %v", sent, tc.wantSent)
			}
			if n := len(f.sim.JournalEntries()); n != 0 {
				t.Fatalf("%d entries stored", n)
			}
		})
	}
}

// TestCreateJournalEntryTransient checks that 5xx and timeouts are transient.
func TestCreateJournalEntryTransient(t *testing.T) {
	t.Parallel()
	entry := netbox.JournalEntry{ObjectType: netbox.ObjectTypeEndpoint, ObjectID: 1, Kind: netbox.KindInfo, Comments: "c"}
	f := newFixture(t, "")
	f.sim.FailRequests(1, 500)
	if _, err := f.client.CreateJournalEntry(context.Background(), entry); !netbox.IsTransient(err) {
		t.Fatalf("500: err = %v", err)
	}
	f.sim.SetLatency(time.Minute)
	c := newClient(t, f.url, simnetbox.TokenV1, 50*time.Millisecond)
	if _, err := c.CreateJournalEntry(context.Background(), entry); !netbox.IsTransient(err) {
		t.Fatalf("timeout: err = %v", err)
	}
}

// TestCreateJournalEntryLenientAnswer checks that a created entry whose answer go-netbox cannot
// decode strictly still yields its id and URL.
func TestCreateJournalEntryLenientAnswer(t *testing.T) {
	t.Parallel()
	url := stub(t, 201, "application/json", `{"id":77,"url":"https://nb.example/api/extras/journal-entries/77/"}`)
	c := newClient(t, url, simnetbox.TokenV1, time.Second)
	ref, err := c.CreateJournalEntry(context.Background(), netbox.JournalEntry{ObjectType: netbox.ObjectTypeEndpoint, ObjectID: 1, Comments: "c"})
	if err != nil {
		t.Fatal(err)
	}
	if ref.ID != 77 || ref.URL != "https://nb.example/api/extras/journal-entries/77/" {
		t.Fatalf("ref = %+v", ref)
	}
	url = stub(t, 201, "application/json", `{"detail":"odd"}`)
	c = newClient(t, url, simnetbox.TokenV1, time.Second)
	if _, err := c.CreateJournalEntry(context.Background(), netbox.JournalEntry{ObjectType: netbox.ObjectTypeEndpoint, ObjectID: 1, Comments: "c"}); !netbox.IsTransient(err) {
		t.Fatalf("answer without id: err = %v", err)
	}
}

// germanLabels serves next's answers with NetBox's choice labels as a NetBox whose
// DEFAULT_LANGUAGE is German renders them.
func germanLabels(next http.Handler) http.Handler {
	labels := strings.NewReplacer(`"label":"Info"`, `"label":"Info"`, `"label":"Success"`, `"label":"Erfolg"`,
		`"label":"Warning"`, `"label":"Warnung"`, `"label":"Danger"`, `"label":"Gefahr"`)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = io.WriteString(w, labels.Replace(rec.Body.String()))
	})
}

// TestJournalTranslatedLabels checks that journal entries are written, updated and found on a
// NetBox that answers with translated choice labels, which go-netbox's models refuse.
func TestJournalTranslatedLabels(t *testing.T) {
	t.Parallel()
	sim := simnetbox.New(simnetbox.Options{Scenario: simnetbox.ScenarioDemo})
	url := newHTTPTest(t, germanLabels(sim.Handler()))
	c := newClient(t, url, simnetbox.TokenV1, 2*time.Second)
	ctx := context.Background()
	ref, err := c.CreateJournalEntry(ctx, netbox.JournalEntry{ObjectType: netbox.ObjectTypeEndpoint, ObjectID: 1,
		Kind: netbox.KindWarning, Comments: "- command_id: c-de\n"})
	if err != nil {
		t.Fatal(err)
	}
	if want := url + "/api/extras/journal-entries/" + strconv.FormatInt(ref.ID, 10) + "/"; ref.ID <= 0 || ref.URL != want {
		t.Fatalf("ref = %+v, want id > 0 and URL %q", ref, want)
	}
	if err := c.UpdateJournalEntry(ctx, ref.ID, netbox.KindSuccess, "- command_id: c-de\n- result: ok\n"); err != nil {
		t.Fatal(err)
	}
	if e, _ := sim.JournalEntry(ref.ID); e.Kind != "success" || e.Patches != 1 {
		t.Fatalf("entry = %+v", e)
	}
	found, err := c.FindJournalEntry(ctx, netbox.ObjectTypeEndpoint, 1, "c-de")
	if err != nil || found != ref {
		t.Fatalf("find = %+v, %v; want %+v", found, err, ref)
	}
}

// TestAnswerSizeBounded checks that an answer beyond the client's bound is not read whole and
// fails as ErrUnavailable, for go-netbox's requests and the plain ones alike.
func TestAnswerSizeBounded(t *testing.T) {
	t.Parallel()
	huge := `{"id":1,"url":"u","comments":"` + strings.Repeat("x", 5<<20) + `"}`
	for _, status := range []int{200, 201} {
		c := newClient(t, stub(t, status, "application/json", huge), simnetbox.TokenV1, 2*time.Second)
		ctx := context.Background()
		_, err1 := c.CreateJournalEntry(ctx, netbox.JournalEntry{ObjectType: netbox.ObjectTypeEndpoint, ObjectID: 1, Comments: "c"})
		err2 := c.Ping(ctx)
		_, err3 := c.Endpoint(ctx, 1)
		_, err4 := c.FindJournalEntry(ctx, netbox.ObjectTypeEndpoint, 1, "c")
		for i, err := range []error{err1, err2, err3, err4} {
			if !netbox.IsTransient(err) {
				t.Errorf("status %d call %d: err = %v, want ErrUnavailable", status, i, err)
			}
		}
	}
}

// TestUpdateJournalEntry checks the PATCH of kind and comments and each failure's sentinel.
func TestUpdateJournalEntry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		kind    netbox.Kind
		prepare func(*simnetbox.Server)
		id      int64 // 0: the created entry
		wantErr error
		applied bool
	}{
		{name: "success", kind: netbox.KindSuccess, applied: true},
		{name: "keep kind", kind: "", applied: true},
		{name: "patch fails 503", kind: netbox.KindSuccess, prepare: func(s *simnetbox.Server) { s.FailPatches(1, 503) }, wantErr: netbox.ErrUnavailable},
		{name: "patch fails 502", kind: netbox.KindWarning, prepare: func(s *simnetbox.Server) { s.FailPatches(1, 502) }, wantErr: netbox.ErrUnavailable},
		{name: "missing entry", kind: netbox.KindSuccess, id: 999, wantErr: netbox.ErrNotFound},
		{name: "bad kind", kind: "nope", wantErr: netbox.ErrRejected},
		{name: "id out of range", kind: netbox.KindInfo, id: 1 << 40, wantErr: netbox.ErrRejected},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, "")
			ctx := context.Background()
			ref, err := f.client.CreateJournalEntry(ctx, netbox.JournalEntry{ObjectType: netbox.ObjectTypeEndpoint, ObjectID: 1, Kind: netbox.KindInfo, Comments: "in progress"})
			if err != nil {
				t.Fatal(err)
			}
			if tc.prepare != nil {
				tc.prepare(f.sim)
			}
			id := ref.ID
			if tc.id != 0 {
				id = tc.id
			}
			err = f.client.UpdateJournalEntry(ctx, id, tc.kind, "final")
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			e, _ := f.sim.JournalEntry(ref.ID)
			if tc.applied {
				wantKind := string(tc.kind)
				if wantKind == "" {
					wantKind = "info"
				}
				if e.Comments != "final" || e.Kind != wantKind || e.Patches != 1 {
					t.Fatalf("entry = %+v", e)
				}
			} else if e.Comments != "in progress" || e.Patches != 0 {
				t.Fatalf("failed update was applied: %+v", e)
			}
		})
	}
}

// TestTokenNeverInErrors sends a canary token through every failure path, including servers
// that echo the Authorization header back, and checks no error text contains it.
func TestTokenNeverInErrors(t *testing.T) {
	t.Parallel()
	canaries := []string{
		"c0ffee0123456789abcdef0123456789abcdef01",
		"nbt_canarykey0001.canary-secret-value",
	}
	answers := []struct {
		status int
		body   string
	}{
		{403, `{"detail":"Invalid token {auth}"}`},
		{404, `{"detail":"Not found: {auth}"}`},
		{400, `{"comments":["bad {auth}"],"{auth}":["x"]}`},
		{500, `{auth}`},
		{200, `{auth}`},
		{201, `{"detail":"{auth}"}`},
	}
	for _, token := range canaries {
		for _, a := range answers {
			c := newClient(t, stub(t, a.status, "application/json", a.body), token, time.Second)
			ctx := context.Background()
			_, err1 := c.Endpoint(ctx, 1)
			_, err2 := c.CreateJournalEntry(ctx, netbox.JournalEntry{ObjectType: netbox.ObjectTypeEndpoint, ObjectID: 1, Comments: "c"})
			err3 := c.UpdateJournalEntry(ctx, 1, netbox.KindInfo, "c")
			err4 := c.Ping(ctx)
			_, err5 := c.VMsByProxmoxID(ctx, 100)
			for i, err := range []error{err1, err2, err3, err4, err5} {
				if err == nil {
					if a.status < 300 && (i == 2 || i == 3) {
						continue // a 2xx PATCH or ping is a success
					}
					t.Fatalf("status %d call %d: no error", a.status, i)
				}
				_, secret, _ := strings.Cut(token, ".")
				if strings.Contains(err.Error(), token) || (secret != "" && strings.Contains(err.Error(), secret)) {
					t.Fatalf("status %d call %d: error contains the token: %v", a.status, i, err)
				}
			}
		}
	}
	// And a network error for a URL that cannot be reached.
	c := newClient(t, "http://127.0.0.1:1", canaries[0], time.Second)
	if _, err := c.Endpoint(context.Background(), 1); err == nil || strings.Contains(err.Error(), canaries[0]) {
		t.Fatalf("network error = %v", err)
	}
}

// TestVMsByProxmoxID checks the VM lookup by custom field.
func TestVMsByProxmoxID(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	vms, err := f.client.VMsByProxmoxID(context.Background(), 777)
	if err != nil || len(vms) != 0 {
		t.Fatalf("empty: %v %v", vms, err)
	}
	f.sim.AddVM(5, "web", 777, 2)
	f.sim.AddVM(6, "db", 101, 2)
	vms, err = f.client.VMsByProxmoxID(context.Background(), 777)
	if err != nil {
		t.Fatal(err)
	}
	if want := []netbox.VM{{ID: 5, Name: "web", ClusterID: 2, ProxmoxVMID: 777}}; !slices.Equal(vms, want) {
		t.Fatalf("vms = %+v, want %+v", vms, want)
	}
}

// TestRejectedFields pins how a 400 body becomes field names: keys only, sorted, and keys that
// do not look like field names are never repeated.
func TestRejectedFields(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		want       []string
	}{
		{"one field", `{"kind":["\"x\" is not a valid choice."]}`, []string{"kind"}},
		{"sorted", `{"comments":["a"],"assigned_object_id":["b"]}`, []string{"assigned_object_id", "comments"}},
		{"non field", `{"non_field_errors":["Invalid assigned_object: x ID 1"]}`, []string{"non_field_errors"}},
		{"bulk", `[{"kind":["a"]},{"comments":["b"]}]`, []string{"comments", "kind"}},
		{"value as key", `{"s3cr3t value!":["x"]}`, []string{"(unnamed)"}},
		{"detail only", `{"detail":"JSON parse error - s3cr3t"}`, []string{}},
		{"not json", `oops`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, stub(t, 400, "application/json", tc.body), simnetbox.TokenV1, time.Second)
			err := c.UpdateJournalEntry(context.Background(), 1, netbox.KindInfo, "c")
			var ne *netbox.Error
			if !errors.As(err, &ne) || !errors.Is(err, netbox.ErrRejected) || ne.Status != 400 {
				t.Fatalf("err = %v", err)
			}
			if len(ne.Fields) != len(tc.want) || (len(tc.want) > 0 && !slices.Equal(ne.Fields, tc.want)) {
				t.Fatalf("fields = %q, want %q", ne.Fields, tc.want)
			}
			if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "valid choice") {
				t.Fatalf("error echoes NetBox's message: %v", err)
			}
		})
	}
}
