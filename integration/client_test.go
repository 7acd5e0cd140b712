package integration

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/batchwork/batchwork/client"
	"github.com/batchwork/batchwork/examples/diamond"
	"github.com/batchwork/batchwork/shared/batchwork"
)

// newClient is a Go client of the test's runner, as owner.
func (e *env) newClient(owner string) *client.Client {
	u, err := url.Parse(e.r.URL)
	if err != nil {
		e.t.Fatal(err)
	}
	return &client.Client{Endpoint: u, Signer: client.LocalOwner{Owner: owner, Token: e.r.Token}, Retries: 3}
}

// The Go client drives the local runner's API end to end: a submitted
// job is watched to its end and its outputs read back through presigned
// URLs; the owner's jobs list page by page; a running job is cancelled,
// and a cancel of an ended one is the typed conflict; an unknown job, and
// another owner's, are the typed not-found.
func TestClientDrivesTheLocalRunner(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	release := make(chan struct{})
	diamond.Register(reg, func(ctx context.Context, tk *batchwork.Task) error {
		if tk.Stage == "a" {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	reg.Register("hang", func(ctx context.Context, tk *batchwork.Task) error {
		<-ctx.Done()
		return ctx.Err()
	})
	e := newEnv(t, reg, envOptions{})
	ctx := t.Context()
	c := e.newClient("client-tester")

	// submit → watch → result
	sub, err := c.Submit(ctx, diamond.Spec("watched", 2), client.SubmitOptions{IdempotencyKey: "client-it-1"})
	if err != nil || !sub.Created {
		t.Fatalf("submit: %+v, %v", sub, err)
	}
	again, err := c.Submit(ctx, diamond.Spec("watched", 2), client.SubmitOptions{IdempotencyKey: "client-it-1"})
	if err != nil || again.Created || again.JobID != sub.JobID {
		t.Fatalf("submit with the same key: %+v, %v; want job %s, not created", again, err, sub.JobID)
	}
	var states []string
	var end client.JobStatus
	for st, err := range c.Watch(ctx, sub.JobID, client.WatchOptions{Interval: 100 * time.Millisecond}) {
		if err != nil {
			t.Fatal(err)
		}
		if len(states) == 0 {
			close(release) // seen running: let stage a go on
		}
		states = append(states, st.State)
		end = st
	}
	if states[0] != "RUNNING" || end.State != "SUCCEEDED" || end.Progress.TasksDone != 8 {
		t.Fatalf("watch saw %v, ended %+v", states, end)
	}
	res, err := c.Result(ctx, sub.JobID, client.OutputsOptions{Presign: true})
	if err != nil || !res.Complete || len(res.Outputs) != 2 {
		t.Fatalf("result: %+v, %v", res, err)
	}
	for _, o := range res.Outputs {
		resp, err := http.Get(o.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := "d/" + string(rune('0'+o.Partition)) + " attempt 1 params map[]\n"; string(body) != want {
			t.Fatalf("output %d holds %q, want %q", o.Partition, body, want)
		}
	}

	// cancel: a running job, then an ended one
	hang, err := c.Submit(ctx, []byte("name: hangs\nlease: 3s\nstages:\n  - {name: s, task: hang, partitions: {count: 2}}\n"), client.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Cancel(ctx, hang.JobID)
	if err != nil || st.State != "CANCELLED" {
		t.Fatalf("cancel: %+v, %v", st, err)
	}
	_, err = c.Cancel(ctx, sub.JobID)
	if !errors.Is(err, client.ErrEnded) || !errors.Is(err, client.ErrConflict) {
		t.Fatalf("cancel of a succeeded job: %v, want ErrEnded", err)
	}

	// list, one job a page
	third, err := c.Submit(ctx, []byte("name: third\nstages:\n  - {name: s, task: hang, partitions: {count: 1}}\n"), client.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = c.Cancel(context.WithoutCancel(ctx), third.JobID) }()
	first, err := c.ListJobs(ctx, client.JobsOptions{Page: client.Page{Limit: 1}})
	if err != nil || len(first.Jobs) != 1 || first.NextCursor == "" {
		t.Fatalf("first page: %+v, %v", first, err)
	}
	var ids []string
	for j, err := range c.Jobs(ctx, client.JobsOptions{Page: client.Page{Limit: 1}}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	if want := []string{third.JobID, hang.JobID, sub.JobID}; !slices.Equal(ids, want) {
		t.Fatalf("jobs %v, want %v (newest first)", ids, want)
	}
	var cancelled []string
	for j, err := range c.Jobs(ctx, client.JobsOptions{State: "CANCELLED"}) {
		if err != nil {
			t.Fatal(err)
		}
		cancelled = append(cancelled, j.ID)
	}
	if !slices.Equal(cancelled, []string{hang.JobID}) {
		t.Fatalf("cancelled jobs %v, want %v", cancelled, hang.JobID)
	}

	// not found: no such job, and another owner's
	if _, err := c.Status(ctx, "j0000000000a0000000000"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("status of no job: %v, want ErrNotFound", err)
	}
	if _, err := e.newClient("client-other").Status(ctx, sub.JobID); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("status of another owner's job: %v, want ErrNotFound", err)
	}
	var ae *client.APIError
	if _, err := c.Status(ctx, "j0000000000a0000000000"); !errors.As(err, &ae) || ae.Code != client.CodeNotFound {
		t.Fatalf("status of no job: %v, want code %s", err, client.CodeNotFound)
	}
}
