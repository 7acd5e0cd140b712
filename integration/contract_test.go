package integration

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/batchwork/batchwork/shared/api"
)

// With -tags contract every response the API tests receive from the real
// control plane on the emulator is validated against openapi.yaml: status
// code, headers and body schema. (kin-openapi's dependencies are not in
// go.sum yet; see shared/api/contract_test.go for how to run it.)
func init() {
	var once sync.Once
	var router routers.Router
	var loadErr error
	checkContract = func(t *testing.T, req *http.Request, r apiResp) {
		t.Helper()
		once.Do(func() {
			doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
			if err != nil {
				loadErr = err
				return
			}
			router, loadErr = gorillamux.NewRouter(doc)
		})
		if loadErr != nil {
			t.Fatalf("openapi.yaml: %v", loadErr)
		}
		probe := httptest.NewRequest(req.Method, req.URL.RequestURI(), nil)
		probe.Header = req.Header.Clone()
		route, params, err := router.FindRoute(probe)
		if err != nil {
			return // an undocumented path or method: the API answers 404 or 405
		}
		opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true}
		err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{Request: probe, PathParams: params, Route: route, Options: opts},
			Status:                 r.Status, Header: r.Header, Body: io.NopCloser(bytes.NewReader(r.Body)), Options: opts,
		})
		if err != nil {
			t.Errorf("%s %s: response %d does not match openapi.yaml: %v\nbody: %.500s", req.Method, req.URL.RequestURI(), r.Status, err, r.Body)
		}
	}
}
