package host

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestECSExecutorIDFromTaskMetadata(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v4/abc/task" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"Cluster":"c","TaskARN":"arn:aws:ecs:eu-west-1:123456789012:task/bw-cluster/0f1e2d3c4b5a","Family":"x"}`))
	}))
	defer srv.Close()
	env := map[string]string{EnvECSMetadataURI: srv.URL + "/v4/abc"}
	id, err := ecsExecutorID(context.Background(), func(k string) string { return env[k] }, srv.Client())
	if err != nil || id != "ecs-0f1e2d3c4b5a" {
		t.Fatalf("id %q, err %v; want ecs-0f1e2d3c4b5a", id, err)
	}
	// Outside ECS: no id, no error.
	if id, err := ecsExecutorID(context.Background(), func(string) string { return "" }, srv.Client()); id != "" || err != nil {
		t.Fatalf("outside ECS: %q, %v", id, err)
	}
	// A broken endpoint is an error (the host then makes up an id).
	env[EnvECSMetadataURI] = srv.URL + "/nothing"
	if _, err := ecsExecutorID(context.Background(), func(k string) string { return env[k] }, srv.Client()); err == nil {
		t.Fatal("no error from a 404")
	}
}
