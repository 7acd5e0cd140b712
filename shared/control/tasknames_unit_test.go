package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/shared/spec"
)

// fakeCatalog is a task catalog that counts its reads and writes.
type fakeCatalog struct {
	mu       sync.Mutex
	names    []string
	programs []string
	reads    int
	writes   [][]string
	err      error
}

func (f *fakeCatalog) CatalogAddTaskNames(_ context.Context, names []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.writes = append(f.writes, slices.Clone(names))
	for _, n := range names {
		if !slices.Contains(f.names, n) {
			f.names = append(f.names, n)
		}
	}
	return nil
}

func (f *fakeCatalog) CatalogTaskNames(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.err != nil {
		return nil, f.err
	}
	return slices.Clone(f.names), nil // unsorted, as a fake may be
}

// AddPrograms and Programs keep programs as the store's catalog does;
// fakePrograms counts them.
func (f *fakeCatalog) CatalogAddPrograms(_ context.Context, names []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	for _, n := range names {
		if !slices.Contains(f.programs, n) {
			f.programs = append(f.programs, n)
		}
	}
	return nil
}

func (f *fakeCatalog) CatalogPrograms(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return slices.Clone(f.programs), nil
}

func (f *fakeCatalog) set(names ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.names = names
}

func (f *fakeCatalog) readCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

// setupTaskNames is a unit rig that checks task names against static
// names and a fake catalog holding published.
func setupTaskNames(t *testing.T, check bool, static []string, published ...string) (*unitRig, *fakeCatalog) {
	t.Helper()
	r := newUnitRig(t, func(c *Config) { c.CheckTaskNames, c.StaticTaskNames = check, static })
	cat := &fakeCatalog{names: published}
	r.svc.Catalog = cat
	return r, cat
}

// stagesSpec is a job of one single-task stage per task name.
func stagesSpec(tasks ...string) string {
	var stages []string
	for i, task := range tasks {
		stages = append(stages, fmt.Sprintf(`{"name":"s%d","task":%q,"partitions":{"count":1}}`, i, task))
	}
	return `{"name":"names","stages":[` + strings.Join(stages, ",") + `]}`
}

func TestSubmitChecksTaskNames(t *testing.T) {
	t.Parallel()
	known := []string{"diamond.a", "wordcount.map", "wordcount.reduce"}
	cases := []struct {
		name      string
		check     bool
		static    []string
		published []string
		tasks     []string
		want      []spec.FieldError // nil: accepted
	}{
		{name: "published name", check: true, published: known, tasks: []string{"wordcount.map"}},
		{name: "static name", check: true, static: []string{"lambda.only"}, tasks: []string{"lambda.only"}},
		{name: "static and published names", check: true, static: []string{"lambda.only"}, published: known,
			tasks: []string{"lambda.only", "wordcount.reduce"}},
		{name: "unknown name lists the known ones", check: true, published: known, tasks: []string{"wordcount.mapp"},
			want: []spec.FieldError{{Field: "stages[0].task",
				Message: `unknown task "wordcount.mapp"; known tasks: diamond.a, wordcount.map, wordcount.reduce`}}},
		{name: "static names are listed too", check: true, static: []string{"zz.static"}, published: []string{"a.pub"}, tasks: []string{"nope"},
			want: []spec.FieldError{{Field: "stages[0].task", Message: `unknown task "nope"; known tasks: a.pub, zz.static`}}},
		{name: "every unknown stage is named", check: true, published: known, tasks: []string{"wordcount.map", "x", "diamond.a", "y"},
			want: []spec.FieldError{
				{Field: "stages[1].task", Message: `unknown task "x"; known tasks: diamond.a, wordcount.map, wordcount.reduce`},
				{Field: "stages[3].task", Message: `unknown task "y"; known tasks: diamond.a, wordcount.map, wordcount.reduce`},
			}},
		{name: "none published", check: true, tasks: []string{"wordcount.map"},
			want: []spec.FieldError{{Field: "stages[0].task", Message: `unknown task "wordcount.map": no executor has published its task names yet ` +
				`(executors publish them when they start; the operator can also list them at deploy, as BATCHWORK_TASK_NAMES)`}}},
		{name: "check off accepts any name", check: false, published: known, tasks: []string{"wordcount.mapp"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, _ := setupTaskNames(t, tc.check, tc.static, tc.published...)
			_, err := r.svc.Submit(r.ctx, SubmitRequest{Owner: "tester", IdempotencyKey: "k", Spec: []byte(stagesSpec(tc.tasks...))})
			if tc.want == nil {
				if err != nil {
					t.Fatalf("submit: %v, want accepted", err)
				}
				return
			}
			var ve *spec.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("submit: %v (%T), want a *spec.ValidationError", err, err)
			}
			if diff := cmp.Diff(tc.want, ve.Errors); diff != "" {
				t.Errorf("field errors (-want +got):\n%s", diff)
			}
			// Refused before anything is written: no job, no idempotency
			// record.
			if n := r.store.CallCount("JobCreate"); n != 0 {
				t.Errorf("CreateJob called %d times for a refused spec", n)
			}
		})
	}
}

// Stages that run a program or a Lambda function name no task: they are
// not checked, and a spec of only such stages does not read the catalog.
func TestExecAndLambdaStagesAreNotChecked(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		stage string
	}{
		{"exec", `{"name":"s","exec":["wordcount.py","--map"],"partitions":{"count":1}}`},
		{"lambda", `{"name":"s","lambda":"my-function","partitions":{"count":1}}`},
		{"lambda arn", `{"name":"s","lambda":"arn:aws:lambda:us-east-1:123456789012:function:my-function:live","partitions":{"count":1}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, cat := setupTaskNames(t, true, nil) // nothing known at all
			sp, err := spec.Parse([]byte(`{"name":"j","stages":[` + tc.stage + `]}`))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if err := r.svc.Admitter.CheckTaskNames(r.ctx, sp); err != nil {
				t.Fatalf("check: %v, want none", err)
			}
			if n := cat.readCount(); n != 0 {
				t.Errorf("catalog read %d times for a spec without tasks", n)
			}
		})
	}
}

// The catalog is read once per TaskNamesTTL while names hit; a name the
// cached copy lacks is read again at once (an executor that just started
// counts), and only once per submit.
func TestTaskNameCache(t *testing.T) {
	t.Parallel()
	type step struct {
		advance   time.Duration
		publish   []string // the catalog's names from this step on (nil: unchanged)
		task      string
		wantOK    bool
		wantReads int // total catalog reads after the step
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"hits are cached for the TTL", []step{
			{task: "a", wantOK: true, wantReads: 1},
			{advance: TaskNamesTTL - time.Millisecond, task: "a", wantOK: true, wantReads: 1},
			{advance: time.Millisecond, task: "a", wantOK: true, wantReads: 2},
		}},
		{"a miss re-reads and sees a just-published name", []step{
			{task: "a", wantOK: true, wantReads: 1},
			{publish: []string{"a", "b"}, task: "b", wantOK: true, wantReads: 2},
			{task: "b", wantOK: true, wantReads: 2}, // the re-read is cached
		}},
		{"a miss re-reads once", []step{
			{task: "a", wantOK: true, wantReads: 1},
			{task: "nope", wantOK: false, wantReads: 2},
			{task: "nope", wantOK: false, wantReads: 3},
		}},
		{"a fresh read that misses is not repeated", []step{
			{task: "nope", wantOK: false, wantReads: 1},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, cat := setupTaskNames(t, true, nil, "a")
			for i, s := range tc.steps {
				r.clock.Advance(s.advance)
				if s.publish != nil {
					cat.set(s.publish...)
				}
				sp, err := spec.Parse([]byte(stagesSpec(s.task)))
				if err != nil {
					t.Fatal(err)
				}
				err = r.svc.Admitter.CheckTaskNames(r.ctx, sp)
				if (err == nil) != s.wantOK {
					t.Fatalf("step %d (%s): check = %v, want ok %v", i, s.task, err, s.wantOK)
				}
				if got := cat.readCount(); got != s.wantReads {
					t.Fatalf("step %d (%s): %d catalog reads, want %d", i, s.task, got, s.wantReads)
				}
			}
		})
	}
}

// A catalog that cannot be read fails the submit with an error (a 500),
// never accepts or refuses the spec on a guess.
func TestTaskNameCheckCatalogError(t *testing.T) {
	t.Parallel()
	r, cat := setupTaskNames(t, true, nil)
	boom := errors.New("table unavailable")
	cat.err = boom
	_, err := r.svc.Submit(r.ctx, SubmitRequest{Owner: "tester", IdempotencyKey: "k", Spec: []byte(stagesSpec("a"))})
	var ve *spec.ValidationError
	if !errors.Is(err, boom) || errors.As(err, &ve) {
		t.Fatalf("submit: %v, want the catalog's error, not a validation error", err)
	}
}

func TestPublishTaskNames(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		published  []string
		publish    []string
		wantErr    string
		wantWrites [][]string
	}{
		{name: "first publication writes every name", publish: []string{"b", "a"}, wantWrites: [][]string{{"b", "a"}}},
		{name: "only new names are written", published: []string{"a"}, publish: []string{"a", "b"}, wantWrites: [][]string{{"b"}}},
		{name: "nothing new: no write", published: []string{"a", "b"}, publish: []string{"b", "a"}},
		{name: "no names: no write", publish: nil},
		{name: "a name no stage can hold", publish: []string{"ok", "bad name", ".dot"}, wantErr: `"bad name", ".dot" cannot be named`},
		{name: "too long", publish: []string{strings.Repeat("x", spec.MaxNameLen+1)}, wantErr: "cannot be named"},
		{name: "too many", publish: manyNames(MaxPublishedNames + 1), wantErr: "at most"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, cat := setupTaskNames(t, true, nil, tc.published...)
			err := r.svc.PublishTaskNames(r.ctx, tc.publish)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrInvalidTaskNames) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("publish: %v, want ErrInvalidTaskNames containing %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatalf("publish: %v", err)
			}
			if diff := cmp.Diff(tc.wantWrites, cat.writes); diff != "" {
				t.Errorf("catalog writes (-want +got):\n%s", diff)
			}
		})
	}
}

// A process's own publication counts for its next submit, even inside the
// TTL of a copy read before it.
func TestPublishedNamesCountAtOnce(t *testing.T) {
	t.Parallel()
	r, _ := setupTaskNames(t, true, nil, "a")
	if _, err := r.svc.KnownTaskNames(r.ctx, false); err != nil { // cache ["a"]
		t.Fatal(err)
	}
	if err := r.svc.PublishTaskNames(r.ctx, []string{"b"}); err != nil {
		t.Fatal(err)
	}
	got, err := r.svc.KnownTaskNames(r.ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b"}, got); diff != "" {
		t.Errorf("known names (-want +got):\n%s", diff)
	}
}

func TestPublishWithoutCatalog(t *testing.T) {
	t.Parallel()
	r, _ := setupTaskNames(t, true, nil)
	r.svc.Catalog = nil
	if err := r.svc.PublishTaskNames(r.ctx, []string{"a"}); !errors.Is(err, ErrNoTaskCatalog) {
		t.Fatalf("publish: %v, want ErrNoTaskCatalog", err)
	}
}

func TestParseTaskNames(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "", want: nil},
		{in: "wordcount.map,wordcount.reduce", want: []string{"wordcount.map", "wordcount.reduce"}},
		{in: " a, b\tc\na,", want: []string{"a", "b", "c"}},
		{in: "ok,bad/name", wantErr: `"bad/name"`},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseTaskNames(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseTaskNames(%q) = %v, %v; want an error naming %s", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseTaskNames(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func manyNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("t%d", i)
	}
	return names
}
