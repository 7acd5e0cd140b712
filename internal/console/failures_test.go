package console

import (
	"strings"
	"testing"
)

// The job page's failures view (failures.js, failures.css) is served, and
// its one new API call, a page of the job's bad records, is forwarded
// with its allowed parameters only.
func TestConsoleServesFailuresView(t *testing.T) {
	s, calls := start(t, nil)
	u := s.URL()
	for _, c := range []struct{ asset, want string }{
		{"failures.js", "window.BatchworkFailures"},
		{"failures.css", "m-failed"},
		{"", `src="failures.js"`},
	} {
		if code, body := do(t, "GET", u+c.asset); code != 200 || !strings.Contains(body, c.want) {
			t.Errorf("GET %q: %d, want 200 with %q", c.asset, code, c.want)
		}
	}
	id := "j" + strings.Repeat("b", 21)
	if code, _ := do(t, "GET", u+"api/jobs/"+id+"/bad-records?stage=map&limit=100&cursor=c&presign=true", APIHeader, "1"); code != 200 {
		t.Fatalf("bad records: %d", code)
	}
	got := calls()
	if len(got) != 1 || got[0].method != "GET" || got[0].path != "/jobs/"+id+"/bad-records" || got[0].query.Encode() != "cursor=c&limit=100&stage=map" {
		t.Fatalf("calls to the API: %+v, want one GET of the bad records with cursor, limit and stage", got)
	}
	if code, _ := do(t, "GET", u+"api/jobs/"+id+"x/bad-records", APIHeader, "1"); code != 404 {
		t.Errorf("bad records of a malformed job id: %d, want 404", code)
	}
	if got := calls(); len(got) != 0 {
		t.Fatalf("a refused request reached the API: %+v", got)
	}
}
