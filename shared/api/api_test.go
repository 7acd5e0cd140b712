package api

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"

	"github.com/batchwork/batchwork/shared/control"
)

func newTestHandler(svc Service) http.Handler {
	return New(svc, func(r *http.Request) (string, bool) {
		v := r.Header.Get("X-Owner")
		return v, v != ""
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func do(h http.Handler, method, target, owner, body string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	if owner != "" {
		req.Header.Set("X-Owner", owner)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// doc is the part of the OpenAPI document the parity test reads.
type doc struct {
	Paths map[string]map[string]struct {
		Parameters []struct {
			Ref  string `yaml:"$ref"`
			Name string `yaml:"name"`
			In   string `yaml:"in"`
		} `yaml:"parameters"`
		Responses map[string]any `yaml:"responses"`
	} `yaml:"paths"`
	Components struct {
		Parameters map[string]struct {
			Name string `yaml:"name"`
			In   string `yaml:"in"`
		} `yaml:"parameters"`
	} `yaml:"components"`
}

// Every route is in the document with exactly its query parameters, and
// the document has no route the handler lacks.
func TestRoutesMatchDocument(t *testing.T) {
	t.Parallel()
	var d doc
	if err := yaml.Unmarshal(OpenAPI, &d); err != nil {
		t.Fatal(err)
	}
	type key struct{ method, path string }
	documented := map[key][]string{}
	for path, ops := range d.Paths {
		for method, op := range ops {
			var query []string
			for _, p := range op.Parameters {
				if p.Ref != "" {
					c := d.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
					p.Name, p.In = c.Name, c.In
				}
				if p.In == "query" {
					query = append(query, p.Name)
				}
			}
			slices.Sort(query)
			documented[key{strings.ToUpper(method), path}] = query
			if len(op.Responses) == 0 {
				t.Errorf("%s %s documents no responses", method, path)
			}
		}
	}
	served := map[key][]string{}
	for _, rt := range Routes {
		q := slices.Clone(rt.Query)
		slices.Sort(q)
		served[key{rt.Method, rt.Path}] = q
	}
	if diff := cmp.Diff(documented, served, cmp.AllowUnexported(key{})); diff != "" {
		t.Fatalf("routes and document differ (-documented +served):\n%s", diff)
	}
	// And every route is really served: no route answers the fallback 404.
	h := newTestHandler(&scripted{})
	for _, rt := range Routes {
		rec := do(h, rt.Method, strings.ReplaceAll(rt.Path, "{id}", fakeID), "alice", "name: x\nstages: [{name: a, task: t, partitions: {count: 1}}]\n", "Idempotency-Key", "k")
		if rec.Code == http.StatusNotFound || rec.Code == http.StatusMethodNotAllowed {
			t.Errorf("%s %s is documented but answers %d: %s", rt.Method, rt.Path, rec.Code, rec.Body)
		}
	}
}

func TestHandlerErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name           string
		err            error
		method, target string
		owner, body    string
		header         []string
		status         int
		code, field    string
	}{
		{"internal errors are not echoed", errInternal, "GET", "/jobs/" + fakeID, "alice", "", nil, 500, "internal", ""},
		{"not found", errNotFound, "GET", "/jobs/" + fakeID + "/tasks", "alice", "", nil, 404, "not_found", "id"},
		{"cancel a finished job", errEnded, "POST", "/jobs/" + fakeID + "/cancel", "alice", "", nil, 409, "job_ended", "id"},
		{"cancel a task with a malformed name", errBadTask, "POST", "/jobs/" + fakeID + "/cancel?task=map", "alice", "", nil, 400, "invalid_request", "task"},
		{"cancel an unknown task", errNoTask, "POST", "/jobs/" + fakeID + "/cancel?task=map/9", "alice", "", nil, 404, "not_found", "task"},
		{"cancel a committed task", errTaskEnded, "POST", "/jobs/" + fakeID + "/cancel?task=map/3", "alice", "", nil, 409, "task_ended", "task"},
		{"cancel a task not started", errTaskNotStarted, "POST", "/jobs/" + fakeID + "/cancel?task=reduce/0", "alice", "", nil, 409, "task_not_started", "task"},
		{"cancel a task of another owner's job", errNotFound, "POST", "/jobs/" + fakeID + "/cancel?task=map/3", "mallory", "", nil, 404, "not_found", "id"},
		{"cancel a task of a finished job", errEnded, "POST", "/jobs/" + fakeID + "/cancel?task=map/3", "alice", "", nil, 409, "job_ended", "id"},
		{"presign unavailable", control.ErrPresignUnavailable, "GET", "/jobs/" + fakeID + "/manifest?presign=true", "alice", "", nil, 501, "presign_unavailable", "presign"},
		{"no identity", nil, "GET", "/jobs", "", "", nil, 401, "unauthenticated", ""},
		{"unknown route", nil, "GET", "/jobs/" + fakeID + "/nope", "alice", "", nil, 404, "not_found", ""},
		{"unknown method", nil, "PUT", "/jobs", "alice", "", nil, 405, "method_not_allowed", ""},
		{"unknown parameter", nil, "GET", "/jobs?stauts=RUNNING", "alice", "", nil, 400, "invalid_request", "stauts"},
		{"parameter of another route", nil, "GET", "/jobs/" + fakeID + "/history?stage=a", "alice", "", nil, 400, "invalid_request", "stage"},
		{"repeated parameter", nil, "GET", "/jobs?status=RUNNING&status=FAILED", "alice", "", nil, 400, "invalid_request", "status"},
		{"limit not a number", nil, "GET", "/jobs/" + fakeID + "/tasks?limit=ten", "alice", "", nil, 400, "invalid_request", "limit"},
		{"limit zero", nil, "GET", "/jobs?limit=0", "alice", "", nil, 400, "invalid_request", "limit"},
		{"presign not a boolean", nil, "GET", "/jobs/" + fakeID + "/manifest?presign=yes", "alice", "", nil, 400, "invalid_request", "presign"},
		{"oversized spec", nil, "POST", "/jobs", "alice", strings.Repeat("#", MaxBody), []string{"Idempotency-Key", "k"}, 413, "too_large", "body"},
		{"no idempotency key", nil, "POST", "/jobs", "alice", "name: x\n", nil, 400, "invalid_request", "Idempotency-Key"},
		{"invalid spec lists every error", nil, "POST", "/jobs", "alice", "name: ''\nstages: []\n", []string{"Idempotency-Key", "k"}, 400, "invalid_spec", "name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := do(newTestHandler(&scripted{err: tc.err}), tc.method, tc.target, tc.owner, tc.body, tc.header...)
			var got struct {
				Error
				Errors []json.RawMessage `json:"errors"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("body %q: %v", rec.Body, err)
			}
			if rec.Code != tc.status || got.Code != tc.code || got.Field != tc.field || got.Message == "" {
				t.Fatalf("got %d %+v, want %d %s field %q", rec.Code, got.Error, tc.status, tc.code, tc.field)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("content type %q", ct)
			}
			if strings.Contains(rec.Body.String(), "DynamoDB") || strings.Contains(rec.Body.String(), "arn:") {
				t.Errorf("body leaks the internal error: %s", rec.Body)
			}
			if tc.code == "invalid_spec" && len(got.Errors) < 2 {
				t.Errorf("want every spec error listed, got %s", rec.Body)
			}
			if tc.status == 405 && rec.Header().Get("Allow") == "" {
				t.Errorf("405 without Allow")
			}
		})
	}
}

// Parameters reach the control plane as given.
func TestParametersReachService(t *testing.T) {
	t.Parallel()
	svc := &scripted{}
	h := newTestHandler(svc)
	cases := []struct {
		target string
		want   any
	}{
		{"/jobs?status=FAILED&name=wc&limit=7&cursor=c1", control.ListJobsRequest{Owner: "alice", State: "FAILED", Name: "wc", Limit: 7, Cursor: "c1"}},
		{"/jobs/" + fakeID + "/tasks?stage=map&state=READY&limit=3&cursor=c2", control.ListTasksRequest{Owner: "alice", ID: fakeID, Stage: "map", State: "READY", Limit: 3, Cursor: "c2"}},
		{"/jobs/" + fakeID + "/history?limit=9&cursor=c3", control.HistoryRequest{Owner: "alice", ID: fakeID, Limit: 9, Cursor: "c3"}},
		{"/jobs/" + fakeID + "/manifest?stage=reduce&presign=true&limit=2&cursor=c4", control.OutputsRequest{Owner: "alice", ID: fakeID, Stage: "reduce", Presign: true, Limit: 2, Cursor: "c4"}},
		{"/jobs/" + fakeID, [2]string{"alice", fakeID}},
	}
	for _, tc := range cases {
		if rec := do(h, "GET", tc.target, "alice", ""); rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", tc.target, rec.Code, rec.Body)
		}
		if diff := cmp.Diff(tc.want, svc.last); diff != "" {
			t.Errorf("GET %s (-want +got):\n%s", tc.target, diff)
		}
	}
	rec := do(h, "POST", "/jobs", "alice", "name: x\nstages: [{name: a, task: t, partitions: {count: 1}}]\n", "Idempotency-Key", "again")
	if rec.Code != http.StatusOK {
		t.Fatalf("a repeated submission: %d, want 200", rec.Code)
	}
}
