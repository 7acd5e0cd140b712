package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// The edges schemathesis found: each bad request gets a 400 that names
// the field at fault in words of the API's own, never Go's decoder text,
// and nothing reaches the control plane.
func TestBadRequestEdgesNameTheField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, target, body string
		header             []string
		field, message     string // message: a part of it
	}{
		{"redrive count too large", "/jobs/" + fakeID + "/redrive", `{"redrives": 1187924066489251397632}`, nil, "redrives", "must be a whole number"},
		{"redrive count negative-typed", "/jobs/" + fakeID + "/redrive", `{"redrives": "2"}`, nil, "redrives", "must be a whole number"},
		{"redrive unknown field", "/jobs/" + fakeID + "/redrive", `{"redrive": 1}`, nil, "redrive", "is not a field of this request"},
		{"redrive not JSON", "/jobs/" + fakeID + "/redrive", `{"redrives":`, nil, "body", "is not valid JSON"},
		{"redrive null", "/jobs/" + fakeID + "/redrive", `null`, nil, "body", "must be a JSON object"},
		{"redrive array", "/jobs/" + fakeID + "/redrive", `[1]`, nil, "body", "must be a JSON object"},
		{"redrive two values", "/jobs/" + fakeID + "/redrive", `{} {}`, nil, "body", "is not valid JSON"},
		{"rerun from a number", "/jobs/" + fakeID + "/rerun", `{"from": 3}`, []string{"Idempotency-Key", "k"}, "from", "must be a string"},
		{"rerun null", "/jobs/" + fakeID + "/rerun", `null`, []string{"Idempotency-Key", "k"}, "body", "must be a JSON object"},
		{"rerun empty key", "/jobs/" + fakeID + "/rerun", `{}`, []string{"Idempotency-Key", ""}, "Idempotency-Key", "is required"},
		{"logs empty since", "/jobs/" + fakeID + "/logs?since=", "", nil, "since", "RFC 3339"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc := &scripted{}
			method := http.MethodPost
			if strings.Contains(tc.target, "/logs") {
				method = http.MethodGet
			}
			hdr := append([]string{"Content-Type", "application/json"}, tc.header...)
			rec := do(newTestHandler(svc), method, tc.target, "alice", tc.body, hdr...)
			var e Error
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != http.StatusBadRequest {
				t.Fatalf("%d %s, want 400", rec.Code, rec.Body)
			}
			if e.Field != tc.field || !strings.Contains(e.Message, tc.message) || strings.Contains(e.Message, "json:") || strings.Contains(e.Message, "Go ") {
				t.Errorf("field %q message %q; want field %q and a message with %q, no decoder text", e.Field, e.Message, tc.field, tc.message)
			}
			if svc.last != nil {
				t.Errorf("the control plane was called: %+v", svc.last)
			}
		})
	}
}
