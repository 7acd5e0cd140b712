package lineage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/lineageschema"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/events"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/split"
)

type fakeJobs map[string]domain.Job

func (f fakeJobs) JobGet(_ context.Context, id string) (domain.Job, error) {
	j, ok := f[id]
	if !ok {
		return domain.Job{}, fmt.Errorf("get job %s: %w", id, domain.ErrNotFound)
	}
	return j, nil
}

type fakePlans map[string][]byte

func (f fakePlans) Get(_ context.Context, key string) ([]byte, error) {
	raw, ok := f[key]
	if !ok {
		return nil, domain.ErrNotFound
	}
	return raw, nil
}
func (fakePlans) Bucket() string { return "data-bucket" }

// endpoint is an OpenLineage endpoint that answers the statuses queued in
// codes (then 201), keeping the bodies it accepted.
type endpoint struct {
	mu     sync.Mutex
	codes  []int
	bodies [][]byte
	auth   []string
}

func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.auth = append(e.auth, r.Header.Get("Authorization"))
	if len(e.codes) > 0 {
		code := e.codes[0]
		e.codes = e.codes[1:]
		w.WriteHeader(code)
		return
	}
	if r.URL.Path != "/api/v1/lineage" || r.Method != http.MethodPost {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	e.bodies = append(e.bodies, body)
	w.WriteHeader(http.StatusCreated)
}

func testJob() (domain.Job, fakePlans) {
	sp := &spec.Job{Name: "wc", Output: "s3://out-bucket/owner1/wc/", Stages: []spec.Stage{
		{Name: "map", Partitions: &spec.Partitions{Input: &spec.Input{Prefix: "s3://data-bucket/inputs/k/corpus/"}}},
		{Name: "reduce", After: []string{"map"}},
	}}
	plan, _ := json.Marshal([]split.Split{
		{Key: "inputs/k/corpus/b.txt", End: 10, ETag: "e-b"},
		{Key: "inputs/k/corpus/a.txt", End: 5, ETag: "e-a", Version: "v1"},
		{Key: "inputs/k/corpus/a.txt", Start: 5, End: 9, ETag: "e-a", Version: "v1"},
	})
	return domain.Job{ID: "j1", Owner: "arn:aws:iam::1:role/alice", Spec: sp},
		fakePlans{blob.PlanKey("j1", "map"): plan}
}

func TestSinkDeliversValidRunEvents(t *testing.T) {
	v, err := lineageschema.New()
	if err != nil {
		t.Fatal(err)
	}
	job, plans := testJob()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	detail := events.Detail{Owner: job.Owner, JobID: "j1", JobName: "wc"}
	waiting := detail
	waiting.State = "WAITING"
	ended := func(typ, state, reason string) events.Event {
		d := detail
		d.State, d.Error = state, reason
		return events.New(events.EndedID("j1"), typ, at, d)
	}
	cases := []struct {
		name      string
		ev        events.Event
		deleted   bool
		wantType  string // "": nothing sent
		wantError string
		wantIn    bool
	}{
		{name: "submitted", ev: events.New(events.SubmittedID("j1"), events.JobSubmitted, at, detail), wantType: Start, wantIn: true},
		{name: "submitted WAITING: nothing until it starts", ev: events.New(events.SubmittedID("j1"), events.JobSubmitted, at, waiting)},
		{name: "started", ev: events.New(events.StartedID("j1"), events.JobStarted, at, detail), wantType: Start, wantIn: true},
		{name: "succeeded", ev: ended(events.JobSucceeded, "SUCCEEDED", ""), wantType: Complete, wantIn: true},
		{name: "failed", ev: ended(events.JobFailed, "FAILED", "stage \"map\": boom"), wantType: Fail, wantError: "stage \"map\": boom", wantIn: true},
		{name: "cancelled", ev: ended(events.JobCancelled, "CANCELLED", "cancelled by its owner"), wantType: Abort, wantError: "cancelled by its owner", wantIn: true},
		{name: "deleted job: no datasets", ev: ended(events.JobSucceeded, "SUCCEEDED", ""), deleted: true, wantType: Complete},
		{name: "stage completed: nothing", ev: events.New(events.StageCompletedID("j1", 0), events.StageCompleted, at, detail)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ep := &endpoint{}
			srv := httptest.NewServer(ep)
			defer srv.Close()
			jobs := fakeJobs{"j1": job}
			if c.deleted {
				jobs = fakeJobs{}
			}
			s := NewSink(Config{URL: srv.URL + "/", APIKey: "k1"}, "bw-table", jobs, plans, slog.New(slog.DiscardHandler))
			if err := s.Deliver(t.Context(), c.ev); err != nil {
				t.Fatal(err)
			}
			if c.wantType == "" {
				if len(ep.bodies) != 0 {
					t.Fatalf("sent %s", ep.bodies)
				}
				return
			}
			if len(ep.bodies) != 1 || ep.auth[0] != "Bearer k1" {
				t.Fatalf("bodies %d, auth %v", len(ep.bodies), ep.auth)
			}
			body := ep.bodies[0]
			if err := v.Validate(body); err != nil {
				t.Fatalf("invalid event %s: %v", body, err)
			}
			var re RunEvent
			if err := json.Unmarshal(body, &re); err != nil {
				t.Fatal(err)
			}
			if re.EventType != c.wantType || re.EventTime != "2026-03-01T12:00:00.000Z" || re.Run.RunID != RunID("j1") ||
				re.Job.Namespace != "batchwork://bw-table" || re.Job.Name != job.Owner+"/wc" {
				t.Errorf("event %s", body)
			}
			if got := ""; re.Run.Facets.ErrorMessage != nil {
				got = re.Run.Facets.ErrorMessage.Message
				if got != c.wantError {
					t.Errorf("error facet %q, want %q", got, c.wantError)
				}
			} else if c.wantError != "" {
				t.Errorf("no error facet, want %q", c.wantError)
			}
			if !c.wantIn {
				if len(re.Inputs)+len(re.Outputs) != 0 {
					t.Errorf("datasets of a deleted job: %s", body)
				}
				return
			}
			if len(re.Inputs) != 1 || re.Inputs[0].Namespace != "s3://data-bucket" || re.Inputs[0].Name != "inputs/k/corpus/" {
				t.Fatalf("inputs %s", body)
			}
			pins := re.Inputs[0].InputFacets.PinnedObjects
			if pins.Count != 2 || pins.Objects[0] != (PinnedObject{Key: "inputs/k/corpus/a.txt", ETag: "e-a", VersionID: "v1"}) ||
				pins.Objects[1] != (PinnedObject{Key: "inputs/k/corpus/b.txt", ETag: "e-b"}) || re.Inputs[0].Facets.Version.DatasetVersion == "" {
				t.Errorf("pins %s", body)
			}
			if len(re.Outputs) != 1 || re.Outputs[0] != (OutputDataset{Namespace: "s3://out-bucket", Name: "owner1/wc/"}) {
				t.Errorf("outputs %s", body)
			}
		})
	}
}

// A job that does not publish names its own area as its output; the run
// id is a UUID that depends on the job id alone.
func TestOutputAndRunID(t *testing.T) {
	job, plans := testJob()
	job.Spec.Output = ""
	b := &Builder{Namespace: "ns", Jobs: fakeJobs{"j1": job}, Plans: plans}
	re, ok, err := b.Build(t.Context(), events.New("x", events.JobSubmitted, time.Now(), events.Detail{JobID: "j1"}))
	if err != nil || !ok || re.Outputs[0] != (OutputDataset{Namespace: "s3://data-bucket", Name: "jobs/j1/"}) {
		t.Fatalf("%+v %v %v", re, ok, err)
	}
	if RunID("j1") != RunID("j1") || RunID("j1") == RunID("j2") || len(RunID("j1")) != 36 || RunID("j1")[14] != '5' {
		t.Errorf("run ids %s %s", RunID("j1"), RunID("j2"))
	}
}

// The transport tries a passing failure again within its attempts, gives
// up on a rejection at once, and the sink drops a rejected event but keeps
// (and pauses after) one that failed.
func TestTransportAndSinkFailures(t *testing.T) {
	job, plans := testJob()
	ev := events.New(events.SubmittedID("j1"), events.JobSubmitted, time.Now(), events.Detail{JobID: "j1", JobName: "wc"})
	cases := []struct {
		name      string
		codes     []int
		wantErr   bool
		wantPosts int
		wantSent  int
	}{
		{name: "503 then accepted", codes: []int{503}, wantPosts: 2, wantSent: 1},
		{name: "401 twice: kept", codes: []int{401, 401}, wantErr: true, wantPosts: 2},
		{name: "400: dropped", codes: []int{400}, wantPosts: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ep := &endpoint{codes: c.codes}
			srv := httptest.NewServer(ep)
			defer srv.Close()
			s := NewSink(Config{URL: srv.URL}, "t", fakeJobs{"j1": job}, plans, slog.New(slog.DiscardHandler))
			s.Transport.Backoff = time.Millisecond
			err := s.Deliver(t.Context(), ev)
			if (err != nil) != c.wantErr || len(ep.auth) != c.wantPosts || len(ep.bodies) != c.wantSent {
				t.Fatalf("err %v, posts %d, sent %d", err, len(ep.auth), len(ep.bodies))
			}
			if c.wantErr {
				if err := s.Deliver(t.Context(), ev); !errors.Is(err, ErrPaused) || len(ep.auth) != c.wantPosts {
					t.Errorf("right after a failure: %v, %d posts; want ErrPaused and no post", err, len(ep.auth))
				}
			}
		})
	}
}

func TestConfigFromEnv(t *testing.T) {
	cases := []struct {
		env     map[string]string
		want    string // EndpointURL, "" off
		wantErr string
	}{
		{env: map[string]string{}},
		{env: map[string]string{EnvURL: "http://marquez:5000"}, want: "http://marquez:5000/api/v1/lineage"},
		{env: map[string]string{EnvURL: "https://x/", EnvEndpoint: "/v2/events"}, want: "https://x/v2/events"},
		{env: map[string]string{EnvURL: "http://m", EnvDisabled: "true"}},
		{env: map[string]string{EnvURL: "marquez:5000"}, wantErr: EnvURL},
		{env: map[string]string{EnvURL: "http://m", EnvEndpoint: "http://n/x"}, wantErr: EnvEndpoint},
	}
	for _, c := range cases {
		cfg, err := ConfigFromEnv(func(k string) string { return c.env[k] })
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%v: error %v, want one naming %s", c.env, err, c.wantErr)
			}
			continue
		}
		if err != nil || cfg.Enabled() != (c.want != "") || (c.want != "" && cfg.EndpointURL() != c.want) {
			t.Errorf("%v: %+v %v, want %q", c.env, cfg, err, c.want)
		}
	}
}

// A stage of several inputs names each prefix as an input dataset, each
// with the objects its own splits pinned (split.Split.Source), whether or
// not two stages share a prefix.
func TestInputsOfSeveralPrefixes(t *testing.T) {
	sp := &spec.Job{Name: "join", Stages: []spec.Stage{
		{Name: "join", Partitions: &spec.Partitions{Inputs: []spec.Input{
			{Name: "orders", Prefix: "s3://data-bucket/inputs/k/orders/"},
			{Name: "users", Prefix: "s3://other-bucket/users/"},
		}}},
		{Name: "more", Partitions: &spec.Partitions{Input: &spec.Input{Prefix: "s3://other-bucket/users/"}}},
	}}
	joinPlan, _ := json.Marshal([]split.Split{
		{Key: "inputs/k/orders/o1", End: 3, ETag: "e-o1"},
		{Key: "users/u1", End: 4, ETag: "e-u1", Source: 1},
		{Key: "inputs/k/orders/o2", End: 5, ETag: "e-o2"},
	})
	morePlan, _ := json.Marshal([]split.Split{{Key: "users/u2", End: 4, ETag: "e-u2"}})
	b := &Builder{Namespace: "ns", Jobs: fakeJobs{"j1": {ID: "j1", Owner: "o", Spec: sp}},
		Plans: fakePlans{blob.PlanKey("j1", "join"): joinPlan, blob.PlanKey("j1", "more"): morePlan}}
	re, ok, err := b.Build(t.Context(), events.New(events.EndedID("j1"), events.JobSucceeded, time.Now(), events.Detail{Owner: "o", JobID: "j1", JobName: "join"}))
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	type in struct{ dataset, pins string }
	var got []in
	for _, d := range re.Inputs {
		var pins []string
		if d.InputFacets != nil {
			for _, o := range d.InputFacets.PinnedObjects.Objects {
				pins = append(pins, o.Key+"@"+o.ETag)
			}
		}
		got = append(got, in{d.Namespace + "/" + d.Name, strings.Join(pins, ",")})
	}
	want := []in{
		{"s3://data-bucket/inputs/k/orders/", "inputs/k/orders/o1@e-o1,inputs/k/orders/o2@e-o2"},
		{"s3://other-bucket/users/", "users/u1@e-u1,users/u2@e-u2"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("inputs %v, want %v", got, want)
	}
	if re.Inputs[0].Facets.Version.DatasetVersion == re.Inputs[1].Facets.Version.DatasetVersion {
		t.Errorf("two inputs of one version %s", re.Inputs[0].Facets.Version.DatasetVersion)
	}
}
