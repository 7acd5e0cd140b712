package integration

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/batchwork/batchwork/internal/lineageschema"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/events"
	"github.com/batchwork/batchwork/shared/lineage"
	sm "github.com/batchwork/batchwork/statemachine"
)

// lineageEndpoint is an OpenLineage endpoint: it answers 503 while down,
// and keeps every event it accepted, each checked against the schema.
type lineageEndpoint struct {
	t  *testing.T
	v  *lineageschema.Validator
	mu sync.Mutex
	// down: refuse every POST.
	down    bool
	refused int
	got     []lineage.RunEvent
}

func newLineageEndpoint(t *testing.T) (*lineageEndpoint, string) {
	v, err := lineageschema.New()
	if err != nil {
		t.Fatal(err)
	}
	ep := &lineageEndpoint{t: t, v: v}
	srv := httptest.NewServer(ep)
	t.Cleanup(srv.Close)
	return ep, srv.URL
}

func (ep *lineageEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.down {
		ep.refused++
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if r.URL.Path != "/api/v1/lineage" {
		ep.t.Errorf("POST to %s", r.URL.Path)
	}
	if err := ep.v.Validate(body); err != nil {
		ep.t.Errorf("invalid run event %s: %v", body, err)
	}
	var re lineage.RunEvent
	if err := json.Unmarshal(body, &re); err != nil {
		ep.t.Errorf("decode %s: %v", body, err)
	}
	ep.got = append(ep.got, re)
	w.WriteHeader(http.StatusCreated)
}

// refusals is how many POSTs the endpoint refused while down. It is read
// under the lock: a delivery its sender gave up on (the prompt budget)
// may still be handled while the test reads.
func (ep *lineageEndpoint) refusals() int {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return ep.refused
}

func (ep *lineageEndpoint) setDown(down bool) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.down = down
}

// of returns the events received of job's run, in order of arrival.
func (ep *lineageEndpoint) of(job string) []lineage.RunEvent {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	var out []lineage.RunEvent
	for _, re := range ep.got {
		if re.Run.RunID == lineage.RunID(job) {
			out = append(out, re)
		}
	}
	return out
}

// waitTypes waits until job's run has events of the types want, in that
// order (a copy of one, at least once delivery, is allowed).
func (ep *lineageEndpoint) waitTypes(job string, want ...string) []lineage.RunEvent {
	ep.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		// In the order of their eventTime, as a consumer reads them: a
		// delivery left to the sweep (the request path gives the endpoint
		// 500 ms) arrives after later events of the same run.
		got := slices.Clone(ep.of(job))
		slices.SortStableFunc(got, func(a, b lineage.RunEvent) int { return strings.Compare(a.EventTime, b.EventTime) })
		var types []string
		for _, re := range got {
			if len(types) == 0 || types[len(types)-1] != re.EventType {
				types = append(types, re.EventType)
			}
		}
		if slices.Equal(types, want) {
			return got
		}
		if time.Now().After(deadline) {
			ep.t.Fatalf("run events of %s: %v, want %v", job, types, want)
		}
		time.Sleep(50 * time.Millisecond) // polling an HTTP endpoint, not synchronising goroutines
	}
}

// A job's run reaches the OpenLineage endpoint: START then COMPLETE with
// its input prefix (the ETags its plan pinned) and its published folder;
// FAIL with the error; ABORT when cancelled. Every body is valid against
// the OpenLineage schema.
func TestLineageRunEvents(t *testing.T) {
	t.Parallel()
	ep, url := newLineageEndpoint(t)
	release := make(chan struct{})
	defer close(release)
	reg := batchwork.NewRegistry()
	reg.Register("lin.copy", func(ctx context.Context, tk *batchwork.Task) error {
		_, err := io.Copy(tk.Out, tk.Input)
		return err
	})
	reg.Register("lin.fail", func(ctx context.Context, tk *batchwork.Task) error {
		return batchwork.Permanent(errors.New("bad data in the lineage test"))
	})
	reg.Register("lin.wait", func(ctx context.Context, tk *batchwork.Task) error {
		select {
		case <-ctx.Done():
		case <-release:
		}
		return ctx.Err()
	})
	e := newEnv(t, reg, envOptions{lineage: &lineage.Config{URL: url}})
	in := e.putInput("tester", "lin/a.txt", []byte("one\ntwo\n"))
	e.putInput("tester", "lin/b.txt", []byte("three\n"))

	ok := e.submit("lin-ok", []byte(`{"name":"lin-ok","output":"outputs:lin-ok/","stages":[{"name":"copy","task":"lin.copy","partitions":{"input":{"prefix":"inputs:lin/"}}}]}`))
	if st := e.waitJob(ok, time.Minute); st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s: %+v", ok, st)
	}
	got := ep.waitTypes(ok, lineage.Start, lineage.Complete)
	done := got[len(got)-1]
	if done.Job.Name != "tester/lin-ok" || !strings.HasPrefix(done.Job.Namespace, "batchwork://") {
		t.Errorf("job %+v", done.Job)
	}
	prefix := strings.TrimSuffix(in, "a.txt")
	if len(done.Inputs) != 1 || done.Inputs[0].Namespace+"/"+done.Inputs[0].Name != prefix {
		t.Fatalf("inputs %+v, want %s", done.Inputs, prefix)
	}
	pins := done.Inputs[0].InputFacets.PinnedObjects
	if pins == nil || pins.Count != 2 || pins.Objects[0].ETag == "" || !strings.HasSuffix(pins.Objects[0].Key, "lin/a.txt") {
		t.Errorf("pinned objects %+v", pins)
	}
	if len(done.Outputs) != 1 || !strings.HasSuffix(done.Outputs[0].Name, "/lin-ok/") || done.Outputs[0].Namespace != "s3://"+e.r.Resources.Bucket {
		t.Errorf("outputs %+v", done.Outputs)
	}
	if start := got[0]; start.EventTime >= done.EventTime {
		t.Errorf("START at %s, COMPLETE at %s", start.EventTime, done.EventTime)
	}

	failed := e.submit("lin-fail", []byte(oneStage("lin-fail", "lin.fail", 1)))
	if st := e.waitJob(failed, time.Minute); st.State != string(sm.JobFailed) {
		t.Fatalf("job %s: %+v", failed, st)
	}
	got = ep.waitTypes(failed, lineage.Start, lineage.Fail)
	if f := got[len(got)-1].Run.Facets.ErrorMessage; f == nil || !strings.Contains(f.Message, "bad data in the lineage test") {
		t.Errorf("FAIL's error facet %+v", f)
	}

	cancelled := e.submit("lin-cancel", []byte(oneStage("lin-cancel", "lin.wait", 1)))
	if _, err := e.r.Service.Cancel(context.Background(), "tester", cancelled); err != nil {
		t.Fatal(err)
	}
	ep.waitTypes(cancelled, lineage.Start, lineage.Abort)
}

// An endpoint that fails at first does not lose the event: its outbox
// record stays (noted as accepted by the bus, which is not asked again)
// and the sweep delivers it once the endpoint is back.
func TestLineageEndpointDownThenSweep(t *testing.T) {
	t.Parallel()
	ep, url := newLineageEndpoint(t)
	reg := batchwork.NewRegistry()
	reg.Register("work", func(ctx context.Context, tk *batchwork.Task) error { return nil })
	e := newEnv(t, reg, envOptions{noRun: true})
	clk := newTestClock()
	log := slog.New(slog.DiscardHandler)
	svc := newService(e, testTimings, e.r.Store, e.r.Queue, clk, log)
	sink := lineage.NewSink(lineage.Config{URL: url}, e.r.Resources.Table, e.r.Store, e.r.Blob, log)
	sink.Now = clk.Now
	svc.Events = events.NewPublisher(eventbridge.NewFromConfig(e.cfg), e.r.Resources.EventBus, e.r.Store, sink)

	ep.setDown(true)
	id := submitTo(t, svc, "down", oneStage("lin-down", "work", 1))
	ctx := context.Background()
	ev, found, err := e.r.Store.OutboxEvent(ctx, events.SubmittedID(id))
	if err != nil || !found || !slices.Equal(ev.Delivered, []string{events.BusDestination}) {
		t.Fatalf("outbox record after a refused delivery: found=%v delivered=%v, %v; want it kept, noted as on the bus", found, ev.Delivered, err)
	}
	if n := ep.refusals(); n == 0 || len(ep.of(id)) != 0 {
		t.Fatalf("the endpoint refused %d and got %d events", n, len(ep.of(id)))
	}

	ep.setDown(false)
	clk.Advance(max(dynamo.OutboxGrace, lineage.DefaultPause) + time.Second)
	for i := 0; ; i++ {
		if _, found, err := e.r.Store.OutboxEvent(ctx, events.SubmittedID(id)); err != nil || !found {
			break
		}
		if i == 10 {
			t.Fatalf("the START event still waits after %d sweeps", i)
		}
		if _, err := svc.Sweep(ctx); err != nil {
			t.Fatalf("sweep: %v", err)
		}
	}
	got := ep.of(id)
	if len(got) != 1 || got[0].EventType != lineage.Start || got[0].EventTime != events.TimeString(ev.Time) {
		t.Fatalf("events %+v, want one START at the event's time %s", got, events.TimeString(ev.Time))
	}
}

// A job submitted with a start time (submit --at) reports START when it
// starts, at its start time, not when it was submitted WAITING; one
// cancelled while it waits reports ABORT alone.
func TestLineageWaitingJob(t *testing.T) {
	t.Parallel()
	ep, url := newLineageEndpoint(t)
	reg := batchwork.NewRegistry()
	reg.Register("t", func(ctx context.Context, tk *batchwork.Task) error { return nil })
	e := newEnv(t, reg, envOptions{lineage: &lineage.Config{URL: url}})
	ctx := context.Background()
	submit := func(key string, at time.Time) string {
		res, err := e.r.Service.Submit(ctx, control.SubmitRequest{Owner: "tester", IdempotencyKey: key, Spec: []byte(atSpec), At: at})
		if err != nil || res.StartAt == nil {
			t.Fatalf("submit at %s: %+v, %v; want a WAITING job", at, res, err)
		}
		return res.JobID
	}
	// 3 s: the start must still be ahead when a loaded machine's submit returns.
	at := time.Now().UTC().Add(3 * time.Second).Truncate(time.Millisecond)
	waiting := submit("lin-at", at)
	cancelled := submit("lin-at-cancel", time.Now().Add(time.Hour))
	// The submission's own delivery ran within Submit: a START for a
	// WAITING job would be here already.
	if got := ep.of(waiting); len(got) != 0 {
		t.Fatalf("events of a WAITING job: %+v, want none before it starts", got)
	}
	waitState(t, e, waiting, sm.JobSucceeded, time.Minute)
	got := ep.waitTypes(waiting, lineage.Start, lineage.Complete)
	if start := got[0].EventTime; start < events.TimeString(at) {
		t.Errorf("START at %s, before the job's start time %s", start, events.TimeString(at))
	}
	if _, err := e.r.Service.Cancel(ctx, "tester", cancelled); err != nil {
		t.Fatal(err)
	}
	ep.waitTypes(cancelled, lineage.Abort)
}
