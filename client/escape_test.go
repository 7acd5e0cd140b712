package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
)

// An id or a query value with '/', '?', '%' or a space reaches the API as
// it was given: escaped once on the wire, so the API's router, which
// unescapes a path segment once, reads the same id, and the endpoint's own
// path (an API Gateway stage) is kept.
func TestIdsAreEscapedOnce(t *testing.T) {
	t.Parallel()
	const id = "a/b?c%2Fd e"
	const wireID = "a%2Fb%3Fc%252Fd%20e"
	type seen struct{ uri, id, task, stage string }
	var mu sync.Mutex
	var got seen
	mux := http.NewServeMux()
	for _, p := range []string{"/prod/jobs/{id}", "/prod/jobs/{id}/{rest}", "/prod/schedules/{id}", "/prod/schedules/{id}/{rest}"} {
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got = seen{r.RequestURI, r.PathValue("id"), r.URL.Query().Get("task"), r.URL.Query().Get("stage")}
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{}`))
		})
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL + "/prod")
	c := &Client{Endpoint: u, HTTP: srv.Client(), Signer: LocalOwner{Owner: "alice"}}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		call func() error
		want seen
	}{
		{"Status", func() error { _, err := c.Status(ctx, id); return err },
			seen{uri: "/prod/jobs/" + wireID, id: id}},
		{"CancelTask", func() error { _, err := c.CancelTask(ctx, id, "stage/3"); return err },
			seen{uri: "/prod/jobs/" + wireID + "/cancel?task=stage%2F3", id: id, task: "stage/3"}},
		{"ListTasks", func() error {
			_, err := c.ListTasks(ctx, id, TasksOptions{Stage: "a b&c"})
			return err
		}, seen{uri: "/prod/jobs/" + wireID + "/tasks?stage=a+b%26c", id: id, stage: "a b&c"}},
		{"GetSchedule", func() error { _, err := c.GetSchedule(ctx, id); return err },
			seen{uri: "/prod/schedules/" + wireID, id: id}},
		{"ListScheduleRuns", func() error { _, err := c.ListScheduleRuns(ctx, id, Page{}); return err },
			seen{uri: "/prod/schedules/" + wireID + "/runs", id: id}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if got != tc.want {
				t.Errorf("the API saw\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}
