package api

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/shared/control"
)

// The scripted control plane's identity: every field filled, so the
// document's schema is checked against a full response.
func (s *scripted) WhoAmI(_ context.Context, owner string) (control.Identity, error) {
	s.last = owner
	if s.err != nil {
		return control.Identity{}, s.err
	}
	return control.Identity{Owner: owner, OwnerKey: "0123456789abcdef0123456789abcdef",
		Inputs: "s3://bw-data/inputs/0123456789abcdef0123456789abcdef/", InputBuckets: []string{"corp-data"},
		Endpoint: "http://127.0.0.1:5000"}, nil
}

// whoamiCases drive GET /whoami to each documented response (see
// TestHandlersHonourDocument).
var whoamiCases = []struct {
	err            error
	method, target string
	owner, body    string
	header         []string
	status         int
}{
	{nil, "GET", "/whoami", "alice", "", nil, 200},
	{nil, "GET", "/whoami?owner=bob", "alice", "", nil, 400},
	{nil, "GET", "/whoami", "", "", nil, 401},
	{errInternal, "GET", "/whoami", "alice", "", nil, 500},
}

// GET /whoami answers the caller's own identity and inputs area: the
// owner the handler authenticated, never one the request names.
func TestWhoAmIAnswersTheCaller(t *testing.T) {
	t.Parallel()
	svc := &scripted{}
	rec := do(newTestHandler(svc), http.MethodGet, "/whoami", "alice", "")
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var got control.Identity
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want, _ := svc.WhoAmI(context.Background(), "alice")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("identity (-want +got):\n%s", diff)
	}
}
