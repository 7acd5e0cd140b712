package control

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
	"github.com/google/go-cmp/cmp"
)

// storeOldJob records a job as a submission before the split size had its
// floor did: its spec is stored as given, never validated again. Its root
// stage is due at once, for the sweep to plan.
func (r *unitRig) storeOldJob(id string, splitSize spec.Size) {
	r.t.Helper()
	sp, err := spec.Parse([]byte(`{"name":"old","lease":"10s","stages":[{"name":"s","task":"work","partitions":{"input":{"prefix":"s3://in-bucket/data/"}}}]}`))
	if err != nil {
		r.t.Fatal(err)
	}
	sp.Stages[0].Partitions.Input.SplitSize = splitSize
	now := r.clock.Now()
	if _, _, err := r.store.JobCreate(r.ctx, dynamo.CreateJobParams{
		Job:     domain.Job{ID: id, Owner: "tester", Spec: sp, SpecHash: sp.Hash(), Created: now},
		IdemKey: id, StageDue: now, IdemTTL: time.Hour,
	}); err != nil {
		r.t.Fatal(err)
	}
}

// Planning checks its limits before it holds what they limit, and a job
// over one fails with the field to change. Not parallel: the first case
// measures the heap, and the other tests of the package would be in it.
func TestPlanLimits(t *testing.T) {
	cases := []struct {
		name      string
		splitSize spec.Size
		objects   []int // sizes under in-bucket/data/
		listLimit int
		wantTasks int    // when the plan is accepted
		wantErr   string // when the job fails: its error contains this
	}{{
		name:      "one-byte splits of 10 MiB: refused before they are made",
		splitSize: 1, objects: []int{10 << 20},
		wantErr: "stages[0].partitions.input.splitSize: s3://in-bucket/data/ in splits of 1 bytes gives 10485760 splits, more than 100000; raise splitSize",
	}, {
		name:      "one split more than the task limit",
		splitSize: 1, objects: []int{60_000, 40_001},
		wantErr: "gives 100001 splits, more than 100000",
	}, {
		name:      "exactly the task limit",
		splitSize: 1, objects: []int{60_000, 40_000},
		wantTasks: spec.MaxPartitions,
	}, {
		name:      "a listing over the limit",
		splitSize: spec.MinSplitSize, objects: []int{1, 1, 1, 1}, listLimit: 3,
		wantErr: "stages[0].partitions.input.prefix: s3://in-bucket/data/ has more than 3 objects; name a narrower prefix",
	}, {
		name:      "a listing at the limit",
		splitSize: spec.MinSplitSize, objects: []int{1, 1, 1}, listLimit: 3,
		wantTasks: 3,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newUnitRig(t)
			r.blob.SetListLimit(c.listLimit)
			for i, size := range c.objects {
				r.blob.Put("in-bucket", fmt.Sprintf("data/%03d", i), make([]byte, size))
			}
			r.storeOldJob("jold", c.splitSize)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			r.sweep()
			runtime.ReadMemStats(&after)
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("the sweep that planned allocated %.1f MiB; heap in use %.1f MiB before, %.1f MiB after",
				float64(allocated)/(1<<20), float64(before.HeapInuse)/(1<<20), float64(after.HeapInuse)/(1<<20))
			j := r.job("jold")
			if c.wantErr != "" {
				if j.State != sm.JobFailed || !strings.Contains(j.Error, c.wantErr) || !strings.Contains(j.Error, `stage "s": plan input: bad input`) {
					t.Fatalf("job %s (%q), want FAILED by bad input with %q", j.State, j.Error, c.wantErr)
				}
				if _, ok := r.blob.Object(blob.PlanKey("jold", "s")); ok {
					t.Error("a plan was written for a refused stage")
				}
				// A split is 32 bytes: ten million of them were 320 MiB.
				if allocated > 64<<20 {
					t.Errorf("planning allocated %d MiB, want under 64", allocated>>20)
				}
				return
			}
			if st := r.stage("jold", 0); j.State != sm.JobRunning || st.Total != c.wantTasks {
				t.Fatalf("job %s (%q), stage of %d tasks; want RUNNING with %d", j.State, j.Error, st.Total, c.wantTasks)
			}
		})
	}
}

// A submission cannot ask for tiny splits at all: the spec's floor names
// the field.
func TestSubmitRefusesTinySplits(t *testing.T) {
	t.Parallel()
	r := newUnitRig(t)
	_, err := r.svc.Submit(r.ctx, SubmitRequest{Owner: "tester", IdempotencyKey: "k", Spec: []byte(
		`{"name":"j","stages":[{"name":"s","task":"work","partitions":{"input":{"prefix":"s3://in-bucket/data/","splitSize":1}}}]}`)})
	if err == nil || !strings.Contains(err.Error(), "stages[0].partitions.input.splitSize: must be at least 4096 (bytes)") {
		t.Fatalf("submit: %v, want the split size refused", err)
	}
	if r.store.CallCount("JobCreate") != 0 {
		t.Error("a refused spec was recorded")
	}
}

// pagedShuffle is a map stage of 7 tasks with 3 shuffle parts each (21
// outputs) and its reduce stage of 3 tasks.
const pagedShuffle = `{"name":"unit","lease":"10s","stages":[` +
	`{"name":"map","task":"m","partitions":{"count":7},"shuffle":{"partitions":3}},` +
	`{"name":"reduce","task":"r","after":["map"]}]}`

// Manifests are written in pages of at most the page size, read from the
// store bucket by bucket, pages before the manifest, all after the stage
// completed and before its downstream starts; a writer that failed
// halfway is finished by the sweep, which keeps the pages there are.
func TestPagedManifests(t *testing.T) {
	t.Parallel()
	const pageSize = 4
	cases := []struct {
		name    string
		failPut int // the nth put of the committer fails (0: none)
		perCall int // every call (the commit, each sweep) runs out of time after this many puts
	}{
		{name: "the committer writes every page"},
		{name: "the third page fails: the sweep finishes the manifest", failPut: 3},
		{name: "the manifest object fails: the sweep writes it", failPut: 7},
		{name: "every call runs out of time after two pages: the sweeps go on from the last", perCall: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newUnitRig(t, func(c *Config) { c.ManifestPageSize = pageSize })
			job := r.submit(pagedShuffle)
			var claims []Claim
			for p := range 7 {
				claims = append(claims, r.claim(taskRef(job, 0, p)))
			}
			for _, cl := range claims[:6] {
				r.commit(cl, 3)
			}
			var puts atomic.Int32
			switch {
			case c.failPut > 0:
				r.blob.SetFault(func(m string) error {
					if m == "PutIfAbsent" && puts.Add(1) == int32(c.failPut) {
						return testdouble.ErrInjected
					}
					return nil
				})
			case c.perCall > 0:
				r.blob.SetFault(func(m string) error {
					if m == "PutIfAbsent" && puts.Add(1) > int32(c.perCall) {
						return context.DeadlineExceeded
					}
					return nil
				})
			}
			r.output(claims[6], 3)
			if err := r.svc.Commit(r.ctx, claims[6], CommitResult{Outputs: 3}); (err != nil) != (c.failPut+c.perCall > 0) {
				t.Fatalf("last commit: %v", err)
			}
			for sweeps := 0; r.stage(job, 1).State == sm.StageBlocked; sweeps++ {
				// 6 pages and the manifest: at two a call, the commit and 3 sweeps.
				if sweeps == 3 {
					t.Fatalf("downstream stage still BLOCKED after %d sweeps", sweeps)
				}
				if c.perCall > 0 {
					puts.Store(0)
				}
				r.clock.Advance(r.store.DueOf(stageItem(job, 0)).Sub(r.clock.Now()))
				if _, err := r.svc.Sweep(r.ctx); err != nil && c.perCall == 0 {
					t.Fatalf("sweep: %v", err)
				}
			}
			r.blob.SetFault(nil)
			key := blob.StageManifestKey(job, "map")
			m, err := blob.ReadManifest(r.ctx, r.blob, key)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Pages) != 6 || m.PageSize != pageSize || m.Len() != 21 || len(m.Outputs) != 0 {
				t.Fatalf("manifest: %d pages of %d, %d outputs (%d inline); want 6 pages of %d for 21", len(m.Pages), m.PageSize, m.Len(), len(m.Outputs), pageSize)
			}
			var want, got []string
			for p := range 7 {
				for part := range 3 {
					want = append(want, blob.OutputKey(job, "map", p, 1, part))
				}
			}
			completed := r.log.Index(fmt.Sprintf("stage %s/0 complete", job))
			done := r.log.Index(fmt.Sprintf("stage %s/1 start", job)) // its downstream
			for i, pk := range m.Pages {
				raw, _ := r.blob.Object(pk)
				var pg domain.ManifestPage
				if err := json.Unmarshal(raw, &pg); err != nil || len(pg.Outputs) > pageSize {
					t.Errorf("page %s: %d outputs (%v), want at most %d", pk, len(pg.Outputs), err, pageSize)
				}
				for _, o := range pg.Outputs {
					got = append(got, o.Key)
				}
				if put := r.log.Index("put " + pk); put < 0 || put > r.log.Index("put "+key) || (i == 0 && (put > done || put < completed)) {
					t.Errorf("page %s written at %d, the manifest at %d, the stage completed at %d, its downstream started at %d", pk, put, r.log.Index("put "+key), completed, done)
				}
			}
			if put := r.log.Index("put " + key); put < 0 || done < 0 || put > done || put < completed {
				t.Errorf("manifest written at %d, stage completed at %d, its downstream started at %d: want it after the completion, before the start", put, completed, done)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("manifest outputs (-want +got):\n%s", diff)
			}
			if n := r.store.CallCount("TaskListStage"); n != 0 {
				t.Errorf("the whole stage was read at once %d times; the manifest reads it bucket by bucket", n)
			}
			for _, e := range r.log.All() {
				if strings.HasPrefix(e, "put "+strings.TrimSuffix(key, ".json")) && r.log.Count(e) != 1 {
					t.Errorf("%q happened %d times, want once", e, r.log.Count(e))
				}
			}
			// The reduce tasks exist and the job completes through them.
			for part := range 3 {
				r.commit(r.claim(taskRef(job, 1, part)), 1)
			}
			r.wantState(taskRef(job, 1, 0), sm.TaskSucceeded, sm.StageCompleted, sm.JobSucceeded)
		})
	}
}

// A succeeded job's outputs page through a paged manifest in order, and
// each API page reads only the manifest pages it falls on.
func TestOutputsOfPagedManifest(t *testing.T) {
	t.Parallel()
	r := newUnitRig(t, func(c *Config) { c.ManifestPageSize = 4 })
	job := r.submit(oneStage(9, 3, ""))
	for p := range 9 {
		r.commit(r.claim(taskRef(job, 0, p)), 2) // 18 outputs: 5 pages
	}
	if j := r.job(job); j.State != sm.JobSucceeded {
		t.Fatalf("job %s", j.State)
	}
	m, err := blob.ReadManifest(r.ctx, r.blob, blob.JobManifestKey(job))
	if err != nil || len(m.Pages) != 5 {
		t.Fatalf("job manifest: %d pages (%v), want 5", len(m.Pages), err)
	}
	var want []string
	for p := range 9 {
		for part := range 2 {
			want = append(want, blob.OutputKey(job, "s", p, 1, part))
		}
	}
	for _, limit := range []int{1, 3, 4, 5, 18, 100} {
		t.Run(fmt.Sprint("limit ", limit), func(t *testing.T) {
			var got []string
			cur := ""
			for pages := 0; ; pages++ {
				if pages > 20 {
					t.Fatal("no end of pages")
				}
				var reads atomic.Int32
				counting := &countingGets{Blob: r.blob, gets: &reads}
				svc := New(unitTimings, r.store, r.queue, counting, testLogger(t))
				out, err := svc.Outputs(r.ctx, OutputsRequest{Owner: "tester", ID: job, Limit: limit, Cursor: cur})
				if err != nil {
					t.Fatal(err)
				}
				if !out.Complete || len(out.Outputs) > limit {
					t.Fatalf("page %+v", out)
				}
				// The manifest, and the pages the range falls on.
				if most := 1 + (limit+3)/4 + 1; int(reads.Load()) > most {
					t.Errorf("%d reads for a page of %d, want at most %d", reads.Load(), limit, most)
				}
				for _, o := range out.Outputs {
					got = append(got, o.Key)
				}
				if cur = out.NextCursor; cur == "" {
					break
				}
			}
			if !slices.Equal(want, got) {
				t.Errorf("outputs %v, want %v", got, want)
			}
		})
	}
}

// countingGets counts the objects a service reads.
type countingGets struct {
	*testdouble.Blob
	gets *atomic.Int32
}

func (c *countingGets) Get(ctx context.Context, key string) ([]byte, error) {
	c.gets.Add(1)
	return c.Blob.Get(ctx, key)
}
