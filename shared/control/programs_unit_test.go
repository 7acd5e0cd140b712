package control

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/shared/spec"
)

// fakePrograms is a task catalog that keeps programs too, and counts the
// programs' reads and writes.
type fakePrograms struct {
	*fakeCatalog
	pmu      sync.Mutex
	programs []string
	preads   int
	pwrites  [][]string
}

func (f *fakePrograms) CatalogAddPrograms(_ context.Context, names []string) error {
	f.pmu.Lock()
	defer f.pmu.Unlock()
	f.pwrites = append(f.pwrites, slices.Clone(names))
	for _, n := range names {
		if !slices.Contains(f.programs, n) {
			f.programs = append(f.programs, n)
		}
	}
	return nil
}

func (f *fakePrograms) CatalogPrograms(context.Context) ([]string, error) {
	f.pmu.Lock()
	defer f.pmu.Unlock()
	f.preads++
	return slices.Clone(f.programs), nil
}

func (f *fakePrograms) reads() int {
	f.pmu.Lock()
	defer f.pmu.Unlock()
	return f.preads
}

func setupPrograms(t *testing.T, check bool, static []string, published ...string) (*unitRig, *fakePrograms) {
	t.Helper()
	r := newUnitRig(t, func(c *Config) { c.CheckTaskNames, c.StaticPrograms = check, static })
	cat := &fakePrograms{fakeCatalog: &fakeCatalog{}, programs: published}
	r.svc.Catalog = cat
	return r, cat
}

const execSpec = `{"name":"j","stages":[` +
	`{"name":"m","exec":["wordcount.py","map"],"partitions":{"count":1},"shuffle":{"partitions":2}},` +
	`{"name":"r","exec":["sum.sh"],"after":["m"]}]}`

// An exec stage whose program no executor has published is refused at
// submit, naming stages[i].exec[0] and listing the known programs, as a
// task name is: executors hand back a task they cannot run (none claims
// it), so accepted it would wait forever. A stack of Lambda executors
// only, which run no programs and publish none, refuses every exec spec.
func TestSubmitChecksPrograms(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		check     bool
		static    []string // Config.StaticPrograms: the Fargate image's, listed at deploy
		published []string
		want      []spec.FieldError // nil: accepted
	}{
		{name: "published programs", check: true, published: []string{"sum.sh", "wordcount.py"}},
		{name: "one unknown program", check: true, published: []string{"wordcount.py", "zz.sh"},
			want: []spec.FieldError{{Field: "stages[1].exec[0]", Message: `unknown program "sum.sh"; known programs: wordcount.py, zz.sh`}}},
		{name: "no executor runs programs (Lambda only)", check: true,
			want: []spec.FieldError{
				{Field: "stages[0].exec[0]", Message: `unknown program "wordcount.py": no executor here runs programs (exec stages run on the Fargate or local executor, from its programs directory, BATCHWORK_EXEC_DIR, and none has published any; the operator can also list them at deploy, as BATCHWORK_EXEC_PROGRAMS)`},
				{Field: "stages[1].exec[0]", Message: `unknown program "sum.sh": no executor here runs programs (exec stages run on the Fargate or local executor, from its programs directory, BATCHWORK_EXEC_DIR, and none has published any; the operator can also list them at deploy, as BATCHWORK_EXEC_PROGRAMS)`},
			}},
		{name: "check off", check: false},
		{name: "static programs (a Fargate service not started yet)", check: true, static: []string{"sum.sh", "wordcount.py"}},
		{name: "static and published programs", check: true, static: []string{"wordcount.py"}, published: []string{"sum.sh"}},
		{name: "static programs are listed too", check: true, static: []string{"wordcount.py"}, published: []string{"a.sh"},
			want: []spec.FieldError{{Field: "stages[1].exec[0]", Message: `unknown program "sum.sh"; known programs: a.sh, wordcount.py`}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, _ := setupPrograms(t, tc.check, tc.static, tc.published...)
			_, err := r.svc.Submit(r.ctx, SubmitRequest{Owner: "tester", IdempotencyKey: "k", Spec: []byte(execSpec)})
			if tc.want == nil {
				if err != nil {
					t.Fatalf("submit: %v, want accepted", err)
				}
				return
			}
			var ve *spec.ValidationError
			var unknown *UnknownTaskError
			if !errors.As(err, &ve) || !errors.As(err, &unknown) {
				t.Fatalf("submit: %v (%T), want an *UnknownTaskError wrapping a *spec.ValidationError (a 400)", err, err)
			}
			if diff := cmp.Diff(tc.want, ve.Errors); diff != "" {
				t.Errorf("field errors (-want +got):\n%s", diff)
			}
			if n := r.store.CallCount("JobCreate"); n != 0 {
				t.Errorf("CreateJob called %d times for a refused spec", n)
			}
		})
	}
}

// Programs are read as task names are: cached for TaskNamesTTL while they
// hit, read again once on a miss, and not at all for a spec without exec
// stages (the one catalog item must not become a hot key).
func TestProgramCatalogReadsAreCached(t *testing.T) {
	t.Parallel()
	r, cat := setupPrograms(t, true, nil, "sum.sh", "wordcount.py")
	check := func(body string) error {
		sp, err := spec.Parse([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return r.svc.Admitter.CheckPrograms(r.ctx, sp)
	}
	if err := check(stagesSpec("a")); err != nil || cat.reads() != 0 {
		t.Fatalf("a spec without exec stages: %v after %d reads, want accepted without a read", err, cat.reads())
	}
	for i := range 5 {
		if err := check(execSpec); err != nil {
			t.Fatal(err)
		}
		if cat.reads() != 1 {
			t.Fatalf("submit %d: %d reads, want 1 (cached)", i, cat.reads())
		}
	}
	missing := `{"name":"j","stages":[{"name":"s","exec":["new.sh"],"partitions":{"count":1}}]}`
	if err := check(missing); err == nil || cat.reads() != 2 {
		t.Fatalf("a miss: %v after %d reads, want refused after one more read", err, cat.reads())
	}
	// Published meanwhile by another executor: the miss's read sees it.
	cat.CatalogAddPrograms(r.ctx, []string{"new.sh"})
	if err := check(missing); err != nil || cat.reads() != 3 {
		t.Fatalf("after publishing: %v after %d reads, want accepted after one more read", err, cat.reads())
	}
	r.clock.Advance(TaskNamesTTL)
	if err := check(execSpec); err != nil || cat.reads() != 4 {
		t.Fatalf("after the TTL: %v after %d reads, want one more read", err, cat.reads())
	}
}

func TestPublishPrograms(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		published  []string
		publish    []string
		wantErr    error
		wantWrites [][]string
	}{
		{name: "first publication", publish: []string{"wordcount.py", "a+b"}, wantWrites: [][]string{{"wordcount.py", "a+b"}}},
		{name: "only new names are written", published: []string{"a.sh"}, publish: []string{"a.sh", "b.sh"}, wantWrites: [][]string{{"b.sh"}}},
		{name: "nothing new: no write", published: []string{"a.sh"}, publish: []string{"a.sh"}},
		{name: "a name no exec stage can hold", publish: []string{"ok.sh", "../x", ".hidden"}, wantErr: ErrInvalidTaskNames},
		{name: "too many", publish: manyNames(MaxPublishedNames + 1), wantErr: ErrInvalidTaskNames},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, cat := setupPrograms(t, true, nil, tc.published...)
			if err := r.svc.PublishPrograms(r.ctx, tc.publish); !errors.Is(err, tc.wantErr) {
				t.Fatalf("publish: %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantWrites, cat.pwrites); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
		})
	}
	// A process's own publication counts at once, within the TTL.
	r, _ := setupPrograms(t, true, nil, "a.sh")
	sp, _ := spec.Parse([]byte(`{"name":"j","stages":[{"name":"s","exec":["b.sh"],"partitions":{"count":1}}]}`))
	if err := r.svc.Admitter.CheckPrograms(r.ctx, sp); err == nil {
		t.Fatal("b.sh accepted before it was published")
	}
	if err := r.svc.PublishPrograms(r.ctx, []string{"b.sh"}); err != nil {
		t.Fatal(err)
	}
	if err := r.svc.Admitter.CheckPrograms(r.ctx, sp); err != nil {
		t.Fatalf("b.sh refused after this process published it: %v", err)
	}
	// A service without a catalog: nothing to publish to, nothing checked.
	r2, _ := setupTaskNames(t, true, nil)
	r2.svc.Catalog = nil
	if err := r2.svc.PublishPrograms(r2.ctx, []string{"a.sh"}); !errors.Is(err, ErrNoTaskCatalog) {
		t.Fatalf("publish without a catalog: %v, want ErrNoTaskCatalog", err)
	}
	if err := r2.svc.Admitter.CheckPrograms(r2.ctx, sp); err != nil {
		t.Fatalf("check without a catalog: %v, want none", err)
	}
}
