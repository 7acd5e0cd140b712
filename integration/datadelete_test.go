package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/batchwork/batchwork/shared/awsconf"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	sm "github.com/batchwork/batchwork/statemachine"
)

// keysUnder lists the data bucket's keys under prefix.
func keysUnder(t *testing.T, e *env, prefix string) []string {
	t.Helper()
	cli := s3.NewFromConfig(e.cfg, awsconf.S3Options(e.cfg))
	var keys []string
	p := s3.NewListObjectsV2Paginator(cli, &s3.ListObjectsV2Input{Bucket: &e.r.Resources.Bucket, Prefix: &prefix})
	for p.HasMorePages() {
		out, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("list %s: %v", prefix, err)
		}
		for _, o := range out.Contents {
			keys = append(keys, *o.Key)
		}
	}
	return keys
}

// DELETE /jobs/{id}/data deletes every object of an ended job of the
// caller's, records it on the job (the outputs route then answers 410
// Gone, the status says when), touches no other job's objects, and is
// harmless to repeat. Another owner's job answers 404 as any route does,
// and a running job 409.
func TestDeleteJobData(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	reg.Register("emit", func(_ context.Context, tk *batchwork.Task) error {
		_, err := fmt.Fprintf(tk.Out, "%s %d\n", tk.Stage, tk.Partition)
		return err
	})
	reg.Register("block", func(ctx context.Context, _ *batchwork.Task) error {
		<-ctx.Done() // until its job is cancelled
		return ctx.Err()
	})
	e := newEnv(t, reg, envOptions{})
	const alice, bob = "alice", "bob"
	twoStages := func(name string) []byte {
		return []byte(fmt.Sprintf(`{"name":%q,"stages":[{"name":"map","task":"emit","partitions":{"count":3},"shuffle":{"partitions":2}},
		  {"name":"reduce","task":"emit","after":["map"]}]}`, name))
	}
	done := e.submitAs(alice, "done", twoStages("done"))
	kept := e.submitAs(alice, "kept", twoStages("kept"))
	running := e.submitAs(alice, "running", []byte(`{"name":"running","stages":[{"name":"s","task":"block","partitions":{"count":1}}]}`))
	for _, id := range []string{done, kept} {
		if st := e.waitJobAs(alice, id, time.Minute); st.State != string(sm.JobSucceeded) {
			t.Fatalf("job %s %s (%s), want SUCCEEDED", id, st.State, st.Error)
		}
	}
	keptKeys := keysUnder(t, e, blob.JobPrefix(kept))
	if n := len(keysUnder(t, e, blob.JobPrefix(done))); n < 6 {
		t.Fatalf("%d objects under the finished job, want its outputs and manifests", n)
	}
	ghost := "j000000000000000000000"
	data := func(id string) string { return "/jobs/" + id + "/data" }

	var first control.DataDeletion
	steps := []struct {
		name   string
		owner  string
		id     string
		status int
		code   string // error code, for an error
		check  func(t *testing.T, d control.DataDeletion)
	}{
		{name: "another owner's job", owner: bob, id: done, status: http.StatusNotFound, code: "not_found"},
		{name: "no such job", owner: alice, id: ghost, status: http.StatusNotFound, code: "not_found"},
		{name: "a running job", owner: alice, id: running, status: http.StatusConflict, code: "job_running"},
		{name: "the owner's ended job", owner: alice, id: done, status: http.StatusOK, check: func(t *testing.T, d control.DataDeletion) {
			if d.Job != done || d.State != string(sm.JobSucceeded) || !d.Complete || d.Deleted < 6 || d.DataDeleted.IsZero() {
				t.Fatalf("deletion %+v, want every object of %s deleted", d, done)
			}
			first = d
		}},
		{name: "retried", owner: alice, id: done, status: http.StatusOK, check: func(t *testing.T, d control.DataDeletion) {
			if !d.Complete || d.Deleted != 0 || !d.DataDeleted.Equal(first.DataDeleted) {
				t.Fatalf("retry %+v, want nothing more deleted and the first deletion's time %s", d, first.DataDeleted)
			}
		}},
		{name: "another owner after the deletion", owner: bob, id: done, status: http.StatusNotFound, code: "not_found"},
	}
	for _, s := range steps {
		r := e.call(s.owner, http.MethodDelete, data(s.id), nil)
		if r.Status != s.status {
			t.Fatalf("%s: DELETE %s as %s: %d %s, want %d", s.name, data(s.id), s.owner, r.Status, r.Body, s.status)
		}
		if s.code != "" {
			if got := r.apiErr(t).Code; got != s.code {
				t.Errorf("%s: error code %q, want %q", s.name, got, s.code)
			}
			continue
		}
		var d control.DataDeletion
		dec := json.NewDecoder(bytes.NewReader(r.Body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("%s: decode %s: %v", s.name, r.Body, err)
		}
		s.check(t, d)
	}
	// bob learns nothing: his 404 is the same as for a job that never was.
	if a, b := e.call(bob, http.MethodDelete, data(done), nil), e.call(bob, http.MethodDelete, data(ghost), nil); !bytes.Equal(a.Body, b.Body) {
		t.Errorf("bob: %s for alice's job, %s for none", a.Body, b.Body)
	}

	if left := keysUnder(t, e, blob.JobPrefix(done)); len(left) != 0 {
		t.Errorf("objects left under the deleted job: %v", left)
	}
	if got := keysUnder(t, e, blob.JobPrefix(kept)); fmt.Sprint(got) != fmt.Sprint(keptKeys) {
		t.Errorf("another job's objects changed: %v, were %v", got, keptKeys)
	}
	// The outputs are gone, and the API says so rather than "not found".
	for _, path := range []string{"/manifest", "/manifest?stage=map", "/manifest?presign=true"} {
		r := e.call(alice, http.MethodGet, "/jobs/"+done+path, nil)
		if r.Status != http.StatusGone || r.apiErr(t).Code != "data_deleted" {
			t.Errorf("GET %s after the deletion: %d %s, want 410 data_deleted", path, r.Status, r.Body)
		}
	}
	var st control.JobStatus
	e.callJSON(alice, http.MethodGet, "/jobs/"+done, nil, http.StatusOK, &st)
	if st.DataDeleted == nil || !st.DataDeleted.Equal(first.DataDeleted) || st.State != string(sm.JobSucceeded) {
		t.Errorf("status after the deletion: state %s, dataDeleted %v; want SUCCEEDED, %s", st.State, st.DataDeleted, first.DataDeleted)
	}
	// The other job still answers its outputs.
	var outs control.OutputList
	e.callJSON(alice, http.MethodGet, "/jobs/"+kept+"/manifest", nil, http.StatusOK, &outs)
	if len(outs.Outputs) == 0 {
		t.Errorf("the kept job lists no outputs")
	}

	// Once the running job is cancelled its data can be deleted too.
	e.callJSON(alice, http.MethodPost, "/jobs/"+running+"/cancel", nil, http.StatusOK, &st)
	var d control.DataDeletion
	e.callJSON(alice, http.MethodDelete, data(running), nil, http.StatusOK, &d)
	if d.State != string(sm.JobCancelled) || !d.Complete {
		t.Errorf("deleting the cancelled job's data: %+v", d)
	}
}
