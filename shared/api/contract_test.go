package api

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

func loadDoc(t *testing.T) (*openapi3.T, routers.Router) {
	t.Helper()
	loader := openapi3.NewLoader()
	d, err := loader.LoadFromData(OpenAPI)
	if err != nil {
		t.Fatalf("load openapi.yaml: %v", err)
	}
	if err := d.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml is not a valid OpenAPI 3 document: %v", err)
	}
	router, err := gorillamux.NewRouter(d)
	if err != nil {
		t.Fatal(err)
	}
	return d, router
}

// Every documented route, status code and schema is honoured: each case
// drives the handler to one documented response; its request (when it is a
// valid one) and its response are validated against the document, response
// status included; and the cases together must produce every documented
// response.
func TestHandlersHonourDocument(t *testing.T) {
	d, router := loadDoc(t)
	id := "/jobs/" + fakeID
	valid := "name: x\nstages: [{name: a, task: t, partitions: {count: 1}}]\n"
	yamlCT := []string{"Content-Type", "application/yaml", "Idempotency-Key", "k"}
	cases := []struct {
		err            error
		method, target string
		owner, body    string
		header         []string
		status         int
	}{
		{nil, "POST", "/jobs", "alice", valid, yamlCT, 201},
		{nil, "POST", "/jobs", "alice", `{"name":"x","stages":[{"name":"a","task":"t","partitions":{"count":1}}]}`, []string{"Content-Type", "application/json", "Idempotency-Key", "again"}, 200},
		{nil, "POST", "/jobs", "alice", "name: ''\nstages: []\n", yamlCT, 400},
		{nil, "POST", "/jobs", "alice", valid, []string{"Content-Type", "application/yaml"}, 400},
		{nil, "POST", "/jobs", "", valid, yamlCT, 401},
		{errIdemConflict, "POST", "/jobs", "alice", valid, yamlCT, 409},
		{&control.QuotaError{Quota: "active jobs", Max: 2}, "POST", "/jobs", "alice", valid, yamlCT, 429},
		{nil, "POST", "/jobs", "alice", strings.Repeat("#", MaxBody), yamlCT, 413},
		{errInternal, "POST", "/jobs", "alice", valid, yamlCT, 500},

		{nil, "GET", "/jobs?status=RUNNING&name=wc&limit=10&cursor=abc", "alice", "", nil, 200},
		{nil, "GET", "/jobs?limit=ten", "alice", "", nil, 400},
		{nil, "GET", "/jobs", "", "", nil, 401},
		{errInternal, "GET", "/jobs", "alice", "", nil, 500},

		{nil, "GET", id, "alice", "", nil, 200},
		{errBadID, "GET", id, "alice", "", nil, 400},
		{nil, "GET", id, "", "", nil, 401},
		{errNotFound, "GET", id, "alice", "", nil, 404},
		{errInternal, "GET", id, "alice", "", nil, 500},

		{nil, "GET", id + "/tasks?stage=map&state=READY&limit=5&cursor=abc", "alice", "", nil, 200},
		{nil, "GET", id + "/tasks?limit=-1", "alice", "", nil, 400},
		{nil, "GET", id + "/tasks", "", "", nil, 401},
		{errNotFound, "GET", id + "/tasks", "alice", "", nil, 404},
		{errInternal, "GET", id + "/tasks", "alice", "", nil, 500},

		{nil, "GET", id + "/history?limit=5&cursor=abc", "alice", "", nil, 200},
		{nil, "GET", id + "/history?stage=a", "alice", "", nil, 400},
		{nil, "GET", id + "/history", "", "", nil, 401},
		{errNotFound, "GET", id + "/history", "alice", "", nil, 404},
		{errInternal, "GET", id + "/history", "alice", "", nil, 500},

		{nil, "POST", id + "/cancel", "alice", "", nil, 200},
		{errBadID, "POST", id + "/cancel", "alice", "", nil, 400},
		{nil, "POST", id + "/cancel", "", "", nil, 401},
		{errNotFound, "POST", id + "/cancel", "alice", "", nil, 404},
		{errEnded, "POST", id + "/cancel", "alice", "", nil, 409},
		{errInternal, "POST", id + "/cancel", "alice", "", nil, 500},
		{nil, "POST", id + "/cancel?task=map/3", "alice", "", nil, 200},
		{errBadTask, "POST", id + "/cancel?task=map", "alice", "", nil, 400},
		{errNoTask, "POST", id + "/cancel?task=map/9", "alice", "", nil, 404},
		{errTaskEnded, "POST", id + "/cancel?task=map/3", "alice", "", nil, 409},
		{errTaskNotStarted, "POST", id + "/cancel?task=reduce/0", "alice", "", nil, 409},

		{nil, "GET", id + "/manifest?stage=reduce&presign=true&limit=5&cursor=abc", "alice", "", nil, 200},
		{nil, "GET", id + "/manifest?presign=maybe", "alice", "", nil, 400},
		{nil, "GET", id + "/manifest", "", "", nil, 401},
		{errNotFound, "GET", id + "/manifest", "alice", "", nil, 404},
		{errInternal, "GET", id + "/manifest", "alice", "", nil, 500},
		{errPresign, "GET", id + "/manifest?presign=true", "alice", "", nil, 501},

		{nil, "GET", "/openapi.yaml", "", "", nil, 200},
	}
	cases = append(cases, scheduleCases...)
	cases = append(cases, whoamiCases...)
	cases = append(cases, logCases...)
	cases = append(cases, badRecordCases...) // badrecords_test.go
	cases = append(cases, dataCases...)
	cases = append(cases, jobDeleteCases...) // jobdelete_test.go
	cases = append(cases, redriveCases...)   // redrive_test.go
	seen := map[string]bool{}
	for _, tc := range cases {
		name := fmt.Sprintf("%s %s %d", tc.method, tc.target, tc.status)
		t.Run(name, func(t *testing.T) {
			h := newTestHandler(&scripted{err: tc.err})
			rec := do(h, tc.method, tc.target, tc.owner, tc.body, tc.header...)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			req := httptest.NewRequest(tc.method, tc.target, strings.NewReader(tc.body))
			for i := 0; i+1 < len(tc.header); i += 2 {
				req.Header.Set(tc.header[i], tc.header[i+1])
			}
			route, params, err := router.FindRoute(req)
			if err != nil {
				t.Fatalf("the document has no route for it: %v", err)
			}
			in := &openapi3filter.RequestValidationInput{
				Request: req, PathParams: params, Route: route,
				Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true},
			}
			if tc.status < 300 {
				if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
					t.Fatalf("request does not match the document: %v", err)
				}
			}
			err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
				RequestValidationInput: in, Status: rec.Code, Header: rec.Header(),
				Body: io.NopCloser(bytes.NewReader(rec.Body.Bytes())), Options: in.Options,
			})
			if err != nil {
				t.Fatalf("response does not match the document: %v\nbody: %s", err, rec.Body)
			}
			seen[fmt.Sprintf("%s %s %d", tc.method, route.Path, tc.status)] = true
		})
	}
	var missing []string
	for path, item := range d.Paths.Map() {
		for method, op := range item.Operations() {
			for status := range op.Responses.Map() {
				if k := fmt.Sprintf("%s %s %s", method, path, status); !seen[k] {
					missing = append(missing, k)
				}
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("documented responses no case produced:\n%s", strings.Join(missing, "\n"))
	}
	for _, rt := range Routes {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(seen)), func(k string) bool { return strings.HasPrefix(k, rt.Method+" "+rt.Path+" ") }) {
			t.Errorf("route %s %s was not exercised", rt.Method, rt.Path)
		}
	}
}
