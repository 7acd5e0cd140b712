package api

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/google/go-cmp/cmp"
)

// POST /jobs?param=NAME=VALUE reaches the control plane as
// SubmitRequest.Params; a malformed one is a 400 on "param" and submits
// nothing.
func TestSubmitParams(t *testing.T) {
	t.Parallel()
	const body = "name: x\nstages: [{name: a, task: t, partitions: {count: 1}}]\n"
	tests := []struct {
		name, query string
		code        int
		want        map[string]string
		message     string
	}{
		{name: "none", query: "", code: 201},
		{name: "two, a value holding '='", query: "?param=date=2026-03-01&param=filter=a%3Db", code: 201,
			want: map[string]string{"date": "2026-03-01", "filter": "a=b"}},
		{name: "empty value", query: "?param=date=", code: 201, want: map[string]string{"date": ""}},
		{name: "no '='", query: "?param=date", code: 400, message: `"date" must be NAME=VALUE`},
		{name: "no name", query: "?param==x", code: 400, message: `"=x" must be NAME=VALUE`},
		{name: "twice", query: "?param=a=1&param=a=2", code: 400, message: `"a" is given twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := &scripted{}
			rec := do(newTestHandler(s), "POST", "/jobs"+tt.query, "alice", body, "Idempotency-Key", "k")
			if rec.Code != tt.code {
				t.Fatalf("code %d, want %d: %s", rec.Code, tt.code, rec.Body)
			}
			if tt.code != http.StatusCreated {
				var e Error
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
					t.Fatal(err)
				}
				if e.Field != "param" || e.Message != "param: "+tt.message {
					t.Errorf("error %+v, want field param, message %q", e, tt.message)
				}
				if s.last != nil {
					t.Error("a malformed param reached the control plane")
				}
				return
			}
			if diff := cmp.Diff(tt.want, s.last.(control.SubmitRequest).Params); diff != "" {
				t.Errorf("params (-want +got):\n%s", diff)
			}
		})
	}
}
