package check

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/dynamo"
)

// The checker must not share code with what it checks.
func TestNoControlPlaneImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"/shared/", "/statemachine", "/internal/", "/examples/"} {
			if strings.HasPrefix(dep, "github.com/batchwork/batchwork") && strings.Contains(dep, banned) {
				t.Errorf("the checker depends on %s", dep)
			}
		}
	}
}

// The re-declared layout must still be the product's: a change there
// must be a deliberate change here.
func TestLayoutMatchesTheProduct(t *testing.T) {
	if got, want := outputKey("j1", "map", 12, 3, 4), blob.OutputKey("j1", "map", 12, 3, 4); got != want {
		t.Errorf("outputKey = %s, blob.OutputKey = %s", got, want)
	}
	if got, want := stageManifestKey("j1", "map"), blob.StageManifestKey("j1", "map"); got != want {
		t.Errorf("stageManifestKey = %s, blob.StageManifestKey = %s", got, want)
	}
	if got, want := jobPrefix("j1"), blob.JobPrefix("j1"); got != want {
		t.Errorf("jobPrefix = %s, blob.JobPrefix = %s", got, want)
	}
	if got, want := jobManifestKey("j1"), blob.JobManifestKey("j1"); got != want {
		t.Errorf("jobManifestKey = %s, blob.JobManifestKey = %s", got, want)
	}
	for _, c := range [][2]int{{0, 1}, {63, 32}, {64, 32}, {5000, 128}, {99999, 128}} {
		if got, want := shardOf(c[0], c[1]), dynamo.ShardOf(c[0], c[1]); got != want {
			t.Errorf("shardOf(%d, %d) = %d, dynamo.ShardOf = %d", c[0], c[1], got, want)
		}
	}
	if splitKind != string(dynamo.SplitKind) {
		t.Errorf("splitKind = %s, dynamo.SplitKind = %s", splitKind, dynamo.SplitKind)
	}
	stage, p, a, part, err := parseOutputKey("j1", blob.OutputKey("j1", "reduce", 7, 2, 1))
	if err != nil || stage != "reduce" || p != 7 || a != 2 || part != 1 {
		t.Errorf("parseOutputKey = %s %d %d %d %v", stage, p, a, part, err)
	}
}

func TestSinks(t *testing.T) {
	s := specDoc{Stages: []specStage{{Name: "map"}, {Name: "side"}, {Name: "join", After: []string{"map", "side"}}}}
	if got := s.sinks(); len(got) != 1 || got[0] != 2 {
		t.Fatalf("sinks %v, want [2]", got)
	}
}

func TestSortedLines(t *testing.T) {
	if a, b := sortedLines([]byte("b\t1\na\t2\n")), sortedLines([]byte("a\t2\nb\t1\n")); string(a) != string(b) {
		t.Fatalf("%q != %q", a, b)
	}
}

// An attempt of a cancelled job may start within the grace after the
// cancel returned (a process trusted the RUNNING it read just before),
// never later.
func TestLateStarts(t *testing.T) {
	cancel := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	j := Job{ID: "j1", Cancelled: true, CancelAccepted: cancel}
	for _, tc := range []struct {
		name  string
		start time.Time
		job   string
		late  bool
	}{
		{"before the cancel", cancel.Add(-time.Second), "j1", false},
		{"within the grace", cancel.Add(900 * time.Millisecond), "j1", false},
		{"at the end of the grace", cancel.Add(time.Second), "j1", false},
		{"after the grace", cancel.Add(1001 * time.Millisecond), "j1", true},
		{"another job", cancel.Add(time.Hour), "j2", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			starts := map[attemptRef]Start{{Job: tc.job, Stage: 0, Partition: 3, Attempt: 1}: {Job: tc.job, Partition: 3, Attempt: 1, At: tc.start, Proc: "exec-1"}}
			if got := lateStarts(starts, j, time.Second); (len(got) > 0) != tc.late {
				t.Errorf("late starts %q, want late=%v", got, tc.late)
			}
		})
	}
}

// A counter may lag its stage's commits (a committer died between its
// commit and its count) but never count more than committed, nor count a
// task that did not commit.
func TestCounters(t *testing.T) {
	tasks := func(states ...string) map[int]*taskRec {
		m := map[int]*taskRec{}
		for p, s := range states {
			m[p] = &taskRec{Partition: p, State: s}
		}
		return m
	}
	for _, tc := range []struct {
		name          string
		stage         string
		tasks         map[int]*taskRec
		cnt           counterRec
		violations    int
		wantUncounted int
	}{
		{"all counted", Completed, tasks(Succeeded, Succeeded), counterRec{Left: 0, Total: 2, Done: []int{0, 1}}, 0, 0},
		{"one committed, not counted yet", "RUNNING", tasks(Succeeded, Succeeded), counterRec{Left: 1, Total: 2, Done: []int{0}}, 0, 1},
		{"counted more than committed", "RUNNING", tasks(Succeeded, "CLAIMED"), counterRec{Left: 0, Total: 2, Done: []int{0}}, 1, 0},
		{"counted a task that did not commit", "RUNNING", tasks(Succeeded, "CLAIMED"), counterRec{Left: 1, Total: 2, Done: []int{1}}, 1, 0},
		{"completed with a count missing", Completed, tasks(Succeeded, Succeeded), counterRec{Left: 1, Total: 2, Done: []int{0}}, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cnt := tc.cnt
			rec := &jobRec{ID: "j1", Stages: map[int]*stageRec{0: {Name: "s", State: tc.stage, Total: 2, Shards: 1, Materialized: true,
				Tasks: tc.tasks, Counters: map[int]*counterRec{0: &cnt}}}}
			c := &checker{}
			c.counters(rec)
			if len(c.res.Violations) != tc.violations || c.res.Uncounted != tc.wantUncounted {
				t.Fatalf("violations %v, uncounted %d; want %d violations, %d uncounted", c.res.Violations, c.res.Uncounted, tc.violations, tc.wantUncounted)
			}
		})
	}
}

func TestAllCompleted(t *testing.T) {
	stages := func(states ...string) *jobRec {
		rec := &jobRec{Stages: map[int]*stageRec{}}
		for i, s := range states {
			rec.Stages[i] = &stageRec{Index: i, State: s}
			rec.Spec.Stages = append(rec.Spec.Stages, specStage{Name: fmt.Sprint("s", i)})
		}
		return rec
	}
	for _, tc := range []struct {
		name string
		rec  *jobRec
		want bool
	}{
		{"every stage completed", stages(Completed, Completed), true},
		{"one still running", stages(Completed, "RUNNING"), false},
		{"one cancelled", stages(Completed, "CANCELLED"), false},
		{"no stages", stages(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := allCompleted(tc.rec); got != tc.want {
				t.Fatalf("allCompleted = %v, want %v", got, tc.want)
			}
		})
	}
}
