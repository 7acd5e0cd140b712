package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/lambdatask"
	"github.com/batchwork/batchwork/shared/split"
)

// fakeInvoker stands in for Lambda: fn plays the function.
type fakeInvoker struct {
	fn func(ctx context.Context, ev lambdatask.Event) (resp []byte, fnErr string, err error)

	mu       sync.Mutex
	function string
	events   []lambdatask.Event
}

func (f *fakeInvoker) Invoke(ctx context.Context, function string, payload []byte) ([]byte, string, error) {
	var ev lambdatask.Event
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, "", fmt.Errorf("fake: event: %w", err)
	}
	f.mu.Lock()
	f.function = function
	f.events = append(f.events, ev)
	f.mu.Unlock()
	return f.fn(ctx, ev)
}

// respond is a function that writes the given parts (part -> body) where
// the event says and answers with keys made by key.
func respond(b *testdouble.Blob, parts map[int]string, key func(ev lambdatask.Event, part int) string) func(context.Context, lambdatask.Event) ([]byte, string, error) {
	return func(ctx context.Context, ev lambdatask.Event) ([]byte, string, error) {
		var resp lambdatask.Response
		for p, body := range parts {
			if err := b.PutIfAbsent(ctx, ev.Outputs[p], []byte(body)); err != nil {
				return nil, "", err
			}
			resp.Outputs = append(resp.Outputs, lambdatask.Output{Part: p, Key: key(ev, p)})
		}
		raw, err := json.Marshal(resp)
		return raw, "", err
	}
}

func ownKey(ev lambdatask.Event, p int) string { return ev.Outputs[p] }

func answer(raw string, fnErr string, err error) func(context.Context, lambdatask.Event) ([]byte, string, error) {
	return func(context.Context, lambdatask.Event) ([]byte, string, error) { return []byte(raw), fnErr, err }
}

const lambdaOne = `
name: j
stages:
  - name: s
    lambda: my-fn
    partitions:
      count: 1
      params: [{day: "2026-11-23"}]
`

const lambdaShuffle = `
name: j
stages:
  - name: m
    lambda: arn:aws:lambda:eu-west-1:123456789012:function:mapper
    partitions: {count: 1}
    shuffle: {partitions: 3}
  - name: r
    task: t
    after: [m]
`

// TestLambdaTask invokes lambda stages through the runner with a fake
// Lambda: a response naming this attempt's outputs commits them, and
// anything else fails the attempt with a cause that says why.
func TestLambdaTask(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		spec     string
		fn       func(b *testdouble.Blob) func(context.Context, lambdatask.Event) ([]byte, string, error)
		noClient bool
		want     map[int]string // committed parts
		failWith string
	}{
		{name: "outputs committed", spec: lambdaOne,
			fn: func(b *testdouble.Blob) func(context.Context, lambdatask.Event) ([]byte, string, error) {
				return respond(b, map[int]string{0: "a\nb\n"}, ownKey)
			},
			want: map[int]string{0: "a\nb\n"}},
		{name: "an output named by its s3:// URI", spec: lambdaOne,
			fn: func(b *testdouble.Blob) func(context.Context, lambdatask.Event) ([]byte, string, error) {
				return respond(b, map[int]string{0: "x\n"}, func(ev lambdatask.Event, p int) string { return "s3://bucket/" + ev.Outputs[p] })
			},
			want: map[int]string{0: "x\n"}},
		{name: "parts not written are published empty", spec: lambdaShuffle,
			fn: func(b *testdouble.Blob) func(context.Context, lambdatask.Event) ([]byte, string, error) {
				return respond(b, map[int]string{1: "k\t1\n"}, ownKey)
			},
			want: map[int]string{0: "", 1: "k\t1\n", 2: ""}},
		{name: "no outputs at all", spec: lambdaOne,
			fn: func(*testdouble.Blob) func(context.Context, lambdatask.Event) ([]byte, string, error) {
				return answer(`{"outputs": []}`, "", nil)
			},
			want: map[int]string{0: ""}},
		{name: "another attempt's key", spec: lambdaOne,
			fn: func(b *testdouble.Blob) func(context.Context, lambdatask.Event) ([]byte, string, error) {
				return respond(b, map[int]string{0: "x"}, func(ev lambdatask.Event, p int) string { return blob.OutputKey("j1", "s", 0, 2, p) })
			},
			failWith: `lambda my-fn: response outputs[0]: key "` + blob.OutputKey("j1", "s", 0, 2, 0) + `" is not this attempt's part 0`},
		{name: "another job's key", spec: lambdaOne,
			fn: func(b *testdouble.Blob) func(context.Context, lambdatask.Event) ([]byte, string, error) {
				return respond(b, map[int]string{0: "x"}, func(ev lambdatask.Event, p int) string { return blob.OutputKey("other", "s", 0, 1, p) })
			},
			failWith: `key "` + blob.OutputKey("other", "s", 0, 1, 0) + `" is not this attempt's part 0`},
		{name: "another bucket's URI", spec: lambdaOne,
			fn: func(b *testdouble.Blob) func(context.Context, lambdatask.Event) ([]byte, string, error) {
				return respond(b, map[int]string{0: "x"}, func(ev lambdatask.Event, p int) string { return "s3://elsewhere/" + ev.Outputs[p] })
			},
			failWith: `key "s3://elsewhere/` + blob.OutputKey("j1", "s", 0, 1, 0) + `" is not this attempt's part 0`},
		{name: "another part's key", spec: lambdaShuffle,
			fn: func(b *testdouble.Blob) func(context.Context, lambdatask.Event) ([]byte, string, error) {
				return respond(b, map[int]string{0: "x"}, func(ev lambdatask.Event, p int) string { return ev.Outputs[2] })
			},
			failWith: "is not this attempt's part 0"},
		{name: "a part out of range", spec: lambdaOne,
			fn: func(*testdouble.Blob) func(context.Context, lambdatask.Event) ([]byte, string, error) {
				return answer(`{"outputs": [{"part": 1, "key": "k"}]}`, "", nil)
			},
			failWith: "response outputs[0]: part 1 is not one of this task's 1 output partitions"},
		{name: "a part twice", spec: lambdaOne,
			fn: func(b *testdouble.Blob) func(context.Context, lambdatask.Event) ([]byte, string, error) {
				return func(ctx context.Context, ev lambdatask.Event) ([]byte, string, error) {
					b.PutIfAbsent(ctx, ev.Outputs[0], nil)
					return fmt.Appendf(nil, `{"outputs": [{"part": 0, "key": %q}, {"part": 0, "key": %q}]}`, ev.Outputs[0], ev.Outputs[0]), "", nil
				}
			},
			failWith: "response outputs[1]: part 0 is listed twice"},
		{name: "an output listed but not written", spec: lambdaOne,
			fn: func(*testdouble.Blob) func(context.Context, lambdatask.Event) ([]byte, string, error) {
				return func(ctx context.Context, ev lambdatask.Event) ([]byte, string, error) {
					return fmt.Appendf(nil, `{"outputs": [{"part": 0, "key": %q}]}`, ev.Outputs[0]), "", nil
				}
			},
			failWith: "response outputs[0]: part 0 (" + blob.OutputKey("j1", "s", 0, 1, 0) + ") cannot be read"},
		{name: "the function reports an error", spec: lambdaOne,
			fn: func(*testdouble.Blob) func(context.Context, lambdatask.Event) ([]byte, string, error) {
				return answer(`{"error": "bad input on line 3"}`, "", nil)
			},
			failWith: "lambda my-fn: function reported: bad input on line 3"},
		{name: "a function error", spec: lambdaOne,
			fn: func(*testdouble.Blob) func(context.Context, lambdatask.Event) ([]byte, string, error) {
				return answer(`{"errorMessage": "division by zero", "errorType": "ZeroDivisionError"}`, "Unhandled", nil)
			},
			failWith: "lambda my-fn: function error (Unhandled): ZeroDivisionError: division by zero"},
		{name: "the invocation fails", spec: lambdaOne,
			fn: func(*testdouble.Blob) func(context.Context, lambdatask.Event) ([]byte, string, error) {
				return answer("", "", errors.New("AccessDeniedException: not authorized to perform lambda:InvokeFunction"))
			},
			failWith: "lambda my-fn: invoke: AccessDeniedException"},
		{name: "a response that is not JSON", spec: lambdaOne,
			fn: func(*testdouble.Blob) func(context.Context, lambdatask.Event) ([]byte, string, error) {
				return answer(`"done"`, "", nil)
			},
			failWith: `lambda my-fn: response "done" is not {"outputs"`},
		{name: "a host without a Lambda client", spec: lambdaOne, noClient: true,
			failWith: "lambda stages need an executor that can invoke Lambda functions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cp := &fakeCP{spec: mustSpec(t, tt.spec), lease: time.Minute}
			b := newBlob()
			r := &Runner{CP: cp, Blob: b, Registry: NewRegistry(), Log: discard(), HeartbeatEvery: time.Hour}
			inv := &fakeInvoker{}
			if !tt.noClient {
				inv.fn = tt.fn(b)
				r.Lambda = inv
			}
			res := r.Handle(context.Background(), feed.Delivery{Body: "j1/0/0"}, nil)
			_, commits, fails := cp.snapshot()
			if tt.failWith != "" {
				if len(fails) != 1 || len(commits) != 0 {
					t.Fatalf("commits %v, fails %v; want one failure (result %+v)", commits, fails, res)
				}
				if !strings.Contains(cp.causes[0], tt.failWith) {
					t.Errorf("cause %q does not contain %q", cp.causes[0], tt.failWith)
				}
				return
			}
			if len(commits) != 1 {
				t.Fatalf("commits %v, fails %v (%v); want one commit", commits, fails, cp.causes)
			}
			stage := cp.spec.Stages[0].Name
			for p, want := range tt.want {
				got, err := b.Get(context.Background(), blob.OutputKey("j1", stage, 0, 1, p))
				if err != nil {
					t.Fatalf("part %d: %v", p, err)
				}
				if string(got) != want {
					t.Errorf("part %d = %q, want %q", p, got, want)
				}
			}
			if want := cp.spec.Stages[0].Lambda; inv.function != want {
				t.Errorf("invoked %q, want %q", inv.function, want)
			}
		})
	}
}

// lambdaInputCP grants claims of a task with an S3 split, as the control
// plane does for a stage that reads an input prefix.
type lambdaInputCP struct {
	*fakeCP
	in split.Split
}

func (c lambdaInputCP) Claim(ctx context.Context, ref domain.TaskRef) (control.Claim, error) {
	cl, err := c.fakeCP.Claim(ctx, ref)
	cl.Task.Input = &c.in
	return cl, err
}

// TestLambdaEvent checks what the function is told: its task, parameters,
// input (an S3 split, or a shuffle partition's objects), output keys and
// deadline.
func TestLambdaEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	before := time.Now()
	tests := []struct {
		name string
		spec string
		task string // the message body
		cp   func(f *fakeCP) ControlPlane
		prep func(t *testing.T, b *testdouble.Blob)
		want lambdatask.Event // Deadline aside
	}{
		{name: "a partition with params", spec: lambdaOne, task: "j1/0/0",
			want: lambdatask.Event{
				Task:         lambdatask.TaskRef{Job: "j1", Stage: "s", Partition: 0, Attempt: 1},
				Params:       map[string]string{"day": "2026-11-23"},
				Format:       "lines",
				OutputPrefix: "s3://bucket/" + blob.AttemptPrefix("j1", "s", 0, 1),
				Outputs:      []string{blob.OutputKey("j1", "s", 0, 1, 0)},
			}},
		{name: "a job with run parameters",
			spec: `{"name": "j", "params": {"date": "2026-03-01", "lang": "en"}, "stages": [{"name": "s", "lambda": "f", "partitions": {"count": 1}}]}`,
			task: "j1/0/0",
			want: lambdatask.Event{
				Task:         lambdatask.TaskRef{Job: "j1", Stage: "s", Partition: 0, Attempt: 1},
				Params:       map[string]string{},
				RunParams:    map[string]string{"date": "2026-03-01", "lang": "en"},
				Format:       "lines",
				OutputPrefix: "s3://bucket/" + blob.AttemptPrefix("j1", "s", 0, 1),
				Outputs:      []string{blob.OutputKey("j1", "s", 0, 1, 0)},
			}},
		{name: "a split of an S3 input",
			spec: `{"name": "j", "stages": [{"name": "s", "lambda": "f", "partitions": {"input": {"prefix": "s3://data-bucket/in/"}}}]}`,
			task: "j1/0/0",
			cp:   func(f *fakeCP) ControlPlane { return lambdaInputCP{f, split.Split{Key: "in/a.txt", Start: 4, End: 9}} },
			prep: func(t *testing.T, b *testdouble.Blob) { b.PutIfAbsent(ctx, "in/a.txt", []byte("one\ntwo\nthree\n")) },
			want: lambdatask.Event{
				Task:         lambdatask.TaskRef{Job: "j1", Stage: "s", Partition: 0, Attempt: 1},
				Params:       map[string]string{},
				Input:        &lambdatask.Input{Bucket: "data-bucket", Key: "in/a.txt", Start: 4, End: 9},
				Format:       "lines",
				Source:       "0",
				OutputPrefix: "s3://bucket/" + blob.AttemptPrefix("j1", "s", 0, 1),
				Outputs:      []string{blob.OutputKey("j1", "s", 0, 1, 0)},
			}},
		{name: "a split pinned to its ETag and version",
			spec: `{"name": "j", "stages": [{"name": "s", "lambda": "f", "partitions": {"input": {"prefix": "s3://data-bucket/in/"}}}]}`,
			task: "j1/0/0",
			cp: func(f *fakeCP) ControlPlane {
				return lambdaInputCP{f, split.Split{Key: "in/a.txt", Start: 4, End: 9, ETag: "e1", Version: "v1"}}
			},
			prep: func(t *testing.T, b *testdouble.Blob) { b.PutIfAbsent(ctx, "in/a.txt", []byte("one\ntwo\nthree\n")) },
			want: lambdatask.Event{
				Task:         lambdatask.TaskRef{Job: "j1", Stage: "s", Partition: 0, Attempt: 1},
				Params:       map[string]string{},
				Input:        &lambdatask.Input{Bucket: "data-bucket", Key: "in/a.txt", Start: 4, End: 9, ETag: "e1", VersionID: "v1"},
				Format:       "lines",
				Source:       "0",
				OutputPrefix: "s3://bucket/" + blob.AttemptPrefix("j1", "s", 0, 1),
				Outputs:      []string{blob.OutputKey("j1", "s", 0, 1, 0)},
			}},
		{name: "a split of an input of several, in its own bucket",
			spec: `{"name": "j", "stages": [{"name": "s", "lambda": "f", "partitions": {"inputs": [` +
				`{"prefix": "s3://data-bucket/in/"}, {"name": "customers", "prefix": "s3://other-bucket/c/", "format": "jsonl"}]}}]}`,
			task: "j1/0/0",
			cp: func(f *fakeCP) ControlPlane {
				return lambdaInputCP{f, split.Split{Key: "c/a", Start: 0, End: 9, Source: 1}}
			},
			want: lambdatask.Event{
				Task:         lambdatask.TaskRef{Job: "j1", Stage: "s", Partition: 0, Attempt: 1},
				Params:       map[string]string{},
				Input:        &lambdatask.Input{Bucket: "other-bucket", Key: "c/a", Start: 0, End: 9},
				Format:       "jsonl",
				Source:       "customers",
				OutputPrefix: "s3://bucket/" + blob.AttemptPrefix("j1", "s", 0, 1),
				Outputs:      []string{blob.OutputKey("j1", "s", 0, 1, 0)},
			}},
		{name: "a partition of two shuffles",
			spec: `{"name": "j", "stages": [{"name": "m", "task": "m", "partitions": {"count": 2}, "shuffle": {"partitions": 2}},` +
				`{"name": "n", "task": "m", "partitions": {"count": 1}, "shuffle": {"partitions": 2}},` +
				`{"name": "r", "lambda": "reducer", "after": ["n", "m"]}]}`,
			task: "j1/2/1",
			prep: func(t *testing.T, b *testdouble.Blob) {
				writeShuffle(t, b, "m", 2, 2, false)
				writeShuffle(t, b, "n", 1, 2, false)
			},
			want: lambdatask.Event{
				Task:   lambdatask.TaskRef{Job: "j1", Stage: "r", Partition: 1, Attempt: 1},
				Params: map[string]string{},
				Shuffle: &lambdatask.Shuffle{Bucket: "bucket",
					Keys: []string{blob.OutputKey("j1", "n", 0, 1, 1), blob.OutputKey("j1", "m", 0, 1, 1), blob.OutputKey("j1", "m", 1, 1, 1)},
					Sources: []lambdatask.ShuffleSource{
						{Source: "n", Keys: []string{blob.OutputKey("j1", "n", 0, 1, 1)}},
						{Source: "m", Keys: []string{blob.OutputKey("j1", "m", 0, 1, 1), blob.OutputKey("j1", "m", 1, 1, 1)}},
					}},
				Format:       "lines",
				OutputPrefix: "s3://bucket/" + blob.AttemptPrefix("j1", "r", 1, 1),
				Outputs:      []string{blob.OutputKey("j1", "r", 1, 1, 0)},
			}},
		{name: "a shuffle partition",
			spec: `{"name": "j", "stages": [{"name": "m", "task": "m", "partitions": {"count": 2}, "shuffle": {"partitions": 2}},` +
				`{"name": "r", "lambda": "reducer", "after": ["m"]}]}`,
			task: "j1/1/1",
			prep: func(t *testing.T, b *testdouble.Blob) {
				key := blob.StageManifestKey("j1", "m")
				w := blob.NewManifestWriter(b, key, domain.Manifest{Job: "j1", Stage: "m", Bucket: "bucket"}, 100)
				for p := range 2 {
					for r := range 2 {
						if err := w.Add(ctx, domain.Output{Stage: "m", Partition: p, Attempt: 1, Part: r, Key: blob.OutputKey("j1", "m", p, 1, r)}); err != nil {
							t.Fatal(err)
						}
					}
				}
				if err := w.Close(ctx); err != nil {
					t.Fatal(err)
				}
			},
			want: lambdatask.Event{
				Task:   lambdatask.TaskRef{Job: "j1", Stage: "r", Partition: 1, Attempt: 1},
				Params: map[string]string{},
				Shuffle: &lambdatask.Shuffle{Bucket: "bucket", Keys: []string{
					blob.OutputKey("j1", "m", 0, 1, 1), blob.OutputKey("j1", "m", 1, 1, 1)}},
				Format:       "lines",
				OutputPrefix: "s3://bucket/" + blob.AttemptPrefix("j1", "r", 1, 1),
				Outputs:      []string{blob.OutputKey("j1", "r", 1, 1, 0)},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeCP{spec: mustSpec(t, tt.spec), lease: time.Minute}
			var cp ControlPlane = f
			if tt.cp != nil {
				cp = tt.cp(f)
			}
			b := newBlob()
			if tt.prep != nil {
				tt.prep(t, b)
			}
			inv := &fakeInvoker{fn: answer(`{"outputs": []}`, "", nil)}
			r := &Runner{CP: cp, Blob: b, Registry: NewRegistry(), Log: discard(), HeartbeatEvery: time.Hour, Lambda: inv}
			r.Handle(ctx, feed.Delivery{Body: tt.task}, nil)
			if len(inv.events) != 1 {
				t.Fatalf("%d invocations, want 1 (failures: %v)", len(inv.events), f.causes)
			}
			got := inv.events[0]
			deadline, err := time.Parse(time.RFC3339, got.Deadline)
			if err != nil || deadline.Before(before.Add(15*time.Minute)) || deadline.After(time.Now().Add(lambdatask.MaxWait)) {
				t.Errorf("deadline %q (%v): want RFC 3339, Lambda's longest run from now", got.Deadline, err)
			}
			got.Deadline = ""
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("event (-want +got):\n%s", d)
			}
			if _, commits, _ := f.snapshot(); len(commits) != 1 {
				t.Errorf("commits %v (failures %v), want 1", commits, f.causes)
			}
		})
	}
}

// openCounter is a blob that counts the opens of each key.
type openCounter struct {
	*testdouble.Blob
	mu    sync.Mutex
	opens map[string]int
}

var _ Blob = (*openCounter)(nil)

func (b *openCounter) Open(ctx context.Context, bucket, key string, start int64) (io.ReadCloser, error) {
	b.mu.Lock()
	b.opens[key]++
	b.mu.Unlock()
	return b.Blob.Open(ctx, bucket, key, start)
}

func (b *openCounter) Opener(bucket string) split.RangeOpener {
	return func(ctx context.Context, key string, start int64) (io.ReadCloser, error) {
		return b.Open(ctx, bucket, key, start)
	}
}

// A lambda stage's function reads its input itself (the event's range),
// so the executor opens none of it: no wasted GET per attempt, which for
// a CSV split past 0 would also read the object's header from its start.
// The event still carries the input's format, and the planned range.
func TestLambdaStageOpensNoInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := &fakeCP{spec: mustSpec(t, `{"name": "j", "stages": [{"name": "s", "lambda": "f", `+
		`"partitions": {"input": {"prefix": "s3://data-bucket/in/", "format": "csv"}}}]}`), lease: time.Minute}
	cp := lambdaInputCP{f, split.Split{Key: "in/a.csv", Start: 6, End: 20}}
	b := &openCounter{Blob: newBlob(), opens: map[string]int{}}
	b.PutIfAbsent(ctx, "in/a.csv", []byte("a,b,c\n1,2,3\n4,5,6\n7,8,9\n"))
	inv := &fakeInvoker{fn: answer(`{"outputs": []}`, "", nil)}
	r := &Runner{CP: cp, Blob: b, Registry: NewRegistry(), Log: discard(), HeartbeatEvery: time.Hour, Lambda: inv}
	r.Handle(ctx, feed.Delivery{Body: "j1/0/0"}, nil)
	if len(inv.events) != 1 {
		t.Fatalf("%d invocations, want 1 (failures: %v)", len(inv.events), f.causes)
	}
	ev := inv.events[0]
	if ev.Format != "csv" || ev.Input == nil || *ev.Input != (lambdatask.Input{Bucket: "data-bucket", Key: "in/a.csv", Start: 6, End: 20}) {
		t.Errorf("event format %q, input %+v; want csv and the planned range", ev.Format, ev.Input)
	}
	if n := b.opens["in/a.csv"]; n != 0 {
		t.Errorf("the executor opened the lambda stage's input %d times, want none: the function reads it", n)
	}
	if _, commits, _ := f.snapshot(); len(commits) != 1 {
		t.Errorf("commits %v (failures %v), want 1", commits, f.causes)
	}
}

// staleCP loses every lease at the first heartbeat.
type staleCP struct{ *fakeCP }

func (staleCP) Heartbeat(context.Context, control.Claim) error { return domain.ErrStaleClaim }

// TestLambdaLeaseLost: when the lease is lost while the function runs,
// the executor stops waiting and abandons the attempt: no commit, no
// failure recorded (the new holder owns the task).
func TestLambdaLeaseLost(t *testing.T) {
	t.Parallel()
	f := &fakeCP{spec: mustSpec(t, lambdaOne), lease: time.Minute}
	invoked := make(chan struct{})
	inv := &fakeInvoker{fn: func(ctx context.Context, ev lambdatask.Event) ([]byte, string, error) {
		close(invoked)
		<-ctx.Done() // a function that runs until the executor gives up
		return nil, "", ctx.Err()
	}}
	r := &Runner{CP: staleCP{f}, Blob: newBlob(), Registry: NewRegistry(), Log: discard(), HeartbeatEvery: time.Millisecond, Lambda: inv}
	done := make(chan feed.Result, 1)
	go func() { done <- r.Handle(context.Background(), feed.Delivery{Body: "j1/0/0"}, nil) }()
	within(t, invoked, 10*time.Second, "the invocation")
	res := within(t, done, 10*time.Second, "the runner to stop waiting")
	if res.Action != feed.Leave || !errors.Is(res.Err, errLeaseLost) {
		t.Errorf("result %+v, want feed.Leave with the lost lease", res)
	}
	if _, commits, fails := f.snapshot(); len(commits)+len(fails) != 0 {
		t.Errorf("commits %v, fails %v; want neither", commits, fails)
	}
}
