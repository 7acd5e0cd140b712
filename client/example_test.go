package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/batchwork/batchwork/client"
	"github.com/batchwork/batchwork/shared/spec"
)

// A client of the local runner (batchwork-local, or make demo) on its
// default port, as the owner alice, with the token the runner wrote for
// this run.
func Example_localRunner() {
	ctx := context.Background()
	u, _ := url.Parse("http://127.0.0.1:8080")
	token, hint, err := client.LocalToken(os.Getenv, u)
	if err != nil {
		log.Fatal(err)
	}
	c := &client.Client{Endpoint: u, Signer: client.LocalOwner{Owner: "alice", Token: token}, AuthHint: hint, Retries: 3}

	res, err := c.Submit(ctx, []byte("name: wordcount\nstages: [...]\n"), client.SubmitOptions{IdempotencyKey: "wordcount-2026-11-21"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("submitted", res.JobID)
}

// A client of a deployed stack: requests are signed with SigV4 from the
// default AWS credential chain, for the region in the endpoint's name.
func Example_deployedStack() {
	ctx := context.Background()
	u, _ := url.Parse("https://abc123.execute-api.eu-west-1.amazonaws.com")
	signer, err := client.NewSigV4(ctx, u, "", os.Getenv("AWS_PROFILE"), nil)
	if err != nil {
		log.Fatal(err)
	}
	c := &client.Client{Endpoint: u, Signer: signer, Retries: 3}

	id, err := c.WhoAmI(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("owner", id.Owner, "inputs", id.Inputs)
}

// fakeAPI answers the routes the examples call, as the API would.
func fakeAPI() (*client.Client, func()) {
	polls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.Method + " " + r.URL.Path + "?" + r.URL.RawQuery {
		case "POST /jobs?":
			if body, _ := io.ReadAll(r.Body); strings.Contains(string(body), "stages: []") {
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprint(w, `{"code":"invalid_spec","message":"invalid job spec: 1 problem","field":"stages",`+
					`"errors":[{"field":"stages","message":"must list at least one stage","line":2}]}`)
				return
			}
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, `{"jobId":"j19aa5e7c2a1f3b9d0e4c7","created":true}`)
		case "GET /jobs/j19aa5e7c2a1f3b9d0e4c7?":
			polls++
			state, done := "RUNNING", min(polls-1, 2)
			if done == 2 {
				state = "SUCCEEDED"
			}
			fmt.Fprintf(w, `{"id":"j19aa5e7c2a1f3b9d0e4c7","name":"wordcount","state":%q,"progress":{"tasksDone":%d,"tasksTotal":2}}`, state, done)
		case "GET /jobs/j19aa5e7c2a1f3b9d0e4c7/manifest?presign=true":
			fmt.Fprint(w, `{"job":"j19aa5e7c2a1f3b9d0e4c7","state":"SUCCEEDED","complete":true,"outputs":[{"stage":"count","partition":0,"key":"k0","url":"https://example.com/k0"},{"stage":"count","partition":1,"key":"k1","url":"https://example.com/k1"}]}`)
		case "GET /jobs?limit=2":
			fmt.Fprint(w, `{"jobs":[{"id":"j3","name":"c","state":"RUNNING"},{"id":"j2","name":"b","state":"FAILED"}],"nextCursor":"j2"}`)
		case "GET /jobs?cursor=j2&limit=2":
			fmt.Fprint(w, `{"jobs":[{"id":"j1","name":"a","state":"SUCCEEDED"}]}`)
		case "POST /jobs/j1/cancel?":
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"code":"job_ended","message":"job j1 already ended: SUCCEEDED","field":"id"}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"code":"not_found","message":"no such job","field":"id"}`)
		}
	}))
	u, _ := url.Parse(srv.URL)
	return &client.Client{Endpoint: u, Signer: client.LocalOwner{Owner: "alice"}}, srv.Close
}

// Submit a spec built in Go, follow the job to its end and read its
// outputs.
func ExampleClient_Watch() {
	c, stop := fakeAPI()
	defer stop()
	ctx := context.Background()

	job := &spec.Job{Name: "wordcount", Stages: []spec.Stage{{Name: "count", Task: "count", Partitions: &spec.Partitions{Count: 2}}}}
	res, err := c.SubmitSpec(ctx, job, client.SubmitOptions{})
	if err != nil {
		log.Fatal(err)
	}
	var end client.JobStatus
	for st, err := range c.Watch(ctx, res.JobID, client.WatchOptions{Interval: time.Millisecond}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s %d/%d\n", st.State, st.Progress.TasksDone, st.Progress.TasksTotal)
		end = st
	}
	if end.State != "SUCCEEDED" {
		log.Fatalf("job %s", end.State)
	}
	outs, err := c.Result(ctx, res.JobID, client.OutputsOptions{Presign: true})
	if err != nil {
		log.Fatal(err)
	}
	for _, o := range outs.Outputs {
		fmt.Println(o.Stage, o.Partition, o.URL)
	}
	// Output:
	// RUNNING 0/2
	// RUNNING 1/2
	// SUCCEEDED 2/2
	// count 0 https://example.com/k0
	// count 1 https://example.com/k1
}

// Iterate over every job, page after page.
func ExampleClient_Jobs() {
	c, stop := fakeAPI()
	defer stop()
	for j, err := range c.Jobs(context.Background(), client.JobsOptions{Page: client.Page{Limit: 2}}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(j.ID, j.Name, j.State)
	}
	// Output:
	// j3 c RUNNING
	// j2 b FAILED
	// j1 a SUCCEEDED
}

// Act on the kind of an error answer with errors.Is.
func ExampleAPIError() {
	c, stop := fakeAPI()
	defer stop()
	ctx := context.Background()

	_, err := c.Status(ctx, "j0000000000a0000000000")
	fmt.Println(errors.Is(err, client.ErrNotFound), err)

	_, err = c.Cancel(ctx, "j1")
	switch {
	case errors.Is(err, client.ErrEnded):
		fmt.Println("nothing to cancel:", err)
	case err != nil:
		log.Fatal(err)
	}

	// An invalid spec lists every problem, with its YAML line.
	_, err = c.Submit(ctx, []byte("name: empty\nstages: []\n"), client.SubmitOptions{})
	var ae *client.APIError
	if errors.Is(err, client.ErrInvalid) && errors.As(err, &ae) {
		for _, fe := range ae.Errors {
			fmt.Printf("line %d: %s: %s\n", fe.Line, fe.Field, fe.Message)
		}
	}
	// Output:
	// true no such job
	// nothing to cancel: job j1 already ended: SUCCEEDED
	// line 2: stages: must list at least one stage
}
