package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/cmd/chaos/chaostasks"
	"github.com/batchwork/batchwork/cmd/chaos/check"
)

// Report is what a chaos run found.
type Report struct {
	Options Options
	// Kinds counts the jobs per example.
	Kinds map[string]int
	// States count each run's jobs by final state (RUNNING: stuck).
	Chaos, Reference map[string]int
	// Wall is each run's time from the first submission until every job
	// ended.
	ChaosWall, ReferenceWall time.Duration
	// Kills counts the executors killed; KillsSkipped the kills not made
	// because every executor ran a task's last attempts (victim.go).
	Kills, KillsSkipped int
	// Redriven counts the chaos run's jobs that failed as planned and
	// were redriven, and Reran the reruns the harness made of its
	// succeeded rerun jobs.
	Redriven, Reran int
	// Faults sums every process's last report by kind and by service.
	Faults, FaultsByService map[string]int
	Recovery                Recovery
	Check                   check.Result
	// UnstartedByKill counts the attempts that never started whose holder
	// was an executor the harness killed (its takeover names it); the
	// rest are unexplained (see Unexplained).
	UnstartedByKill int
	Unexplained     []string
	// Violations are the checker's and the harness's: executors that died
	// on their own, cancels the API never answered.
	Violations []string
}

// deleted is the state the checker counts a deleted job in.
const deleted = check.Deleted

// Recovery is how long the tasks a killed executor held took to be
// claimed again.
type Recovery struct {
	// Held counts the tasks killed executors held (CLAIMED by their
	// attempt in the table right after the kill).
	Held int
	// Times are the reclaims' delays after their kill, sorted; Started
	// the delays to the next attempt that an executor started.
	Times, Started []time.Duration
	// Not reclaimed: the dead executor's commit had applied anyway (its
	// request was in flight), the job was cancelled, or neither.
	// JobCancelled counts the tasks of jobs that ended first: cancelled,
	// or failed as planned (a deadline).
	CommittedInFlight, JobCancelled int
	NotReclaimed                    []string
	// Slow names the reclaims that took over SlowRecovery, for a look
	// at chaos.log.
	Slow []string
}

// SlowRecovery is the recovery target: reclaims slower than this are
// listed by task.
const SlowRecovery = 5 * time.Second

// percentile returns the p-th percentile (0..1) of sorted times.
func percentile(times []time.Duration, p float64) time.Duration {
	if len(times) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(times)))) - 1
	return times[max(0, min(i, len(times)-1))]
}

// spread formats sorted times as p50, p99 and max.
func spread(times []time.Duration) string {
	if len(times) == 0 {
		return "-"
	}
	r := func(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }
	return fmt.Sprintf("p50 %s  p99 %s  max %s  (n=%d)", r(percentile(times, 0.5)), r(percentile(times, 0.99)), r(times[len(times)-1]), len(times))
}

// report assembles the report of both runs and the checker.
func (h *harness) report(ref, chaos *phase, res check.Result) *Report {
	r := &Report{
		Options: h.o, Kinds: map[string]int{}, Chaos: res.States, Reference: map[string]int{},
		ChaosWall: chaos.wall, ReferenceWall: ref.wall, Kills: len(chaos.kills), KillsSkipped: chaos.spared,
		Faults: map[string]int{}, FaultsByService: map[string]int{}, Check: res,
	}
	r.Reran = len(chaos.reruns)
	for i, j := range chaos.jobs {
		r.Kinds[j.w.Kind]++
		if j.redriven {
			r.Redriven++
		}
		st := ref.jobs[i].state
		if ref.jobs[i].deleted {
			st = deleted
		}
		r.Reference[st]++
	}
	for _, counts := range chaos.faults {
		for k, n := range counts {
			// Keys are "Service.Operation kind".
			op, kind, _ := strings.Cut(k, " ")
			svc, _, _ := strings.Cut(op, ".")
			r.Faults[kind] += n
			r.FaultsByService[svc] += n
		}
	}
	r.UnstartedByKill, r.Unexplained = explainUnstarted(chaos, res.Unstarted)
	for _, v := range res.Violations {
		r.Violations = append(r.Violations, strings.Join(append([]string{v.String()}, v.Detail...), "\n    "))
	}
	r.Violations = append(r.Violations, chaos.crashes...)
	for _, c := range ref.crashes {
		r.Violations = append(r.Violations, "fault-free run: "+c)
	}
	return r
}

// explainUnstarted sorts the attempts that were claimed but never started
// into those whose claimer the harness killed (between its claim and its
// start) and the rest: a claim written and then lost by a live executor
// would be among the rest.
func explainUnstarted(p *phase, unstarted []check.Attempt) (byKill int, rest []string) {
	killed := map[string]bool{}
	for _, k := range p.kills {
		killed[k.proc] = true
	}
	for _, a := range unstarted {
		// Who made the claim: the process whose takeover created it, or
		// the holder a later takeover names.
		claimer, known := p.takenBy[a]
		if !known {
			claimer, known = p.copyBy[a]
		}
		if !known {
			ex, ok := p.takenFrom[a]
			claimer, known = p.executors[ex], ok
		}
		if known && killed[claimer] {
			byKill++
			continue
		}
		how := "claimed by an unknown executor (reclaimed after its lease)"
		if known {
			how = fmt.Sprintf("claimed by %s, which was not killed", claimer)
		}
		rest = append(rest, fmt.Sprintf("task %s/%d/%d attempt %d: %s", a.Job, a.Stage, a.Partition, a.Attempt, how))
	}
	return byKill, rest
}

// recovery measures, for each task a killed executor held, the time from
// the kill to the task's next claim by another executor: a takeover (the
// control plane's log line, written when the new attempt's claim applied)
// or a started attempt (the claim lines every executor logs; a claim's
// time is its own timestamp), whichever came first. Started counts only
// the latter: a takeover whose executor is killed in turn before it starts
// the task recovers nothing yet.
func (h *harness) recovery(ctx context.Context, p *phase) (Recovery, error) {
	type task struct {
		job         string
		stage, part int
	}
	next := map[task][]check.Start{}
	started := map[task][]check.Start{}
	for _, s := range p.starts {
		k := task{s.Job, s.Stage, s.Partition}
		next[k] = append(next[k], s)
		started[k] = append(started[k], s)
	}
	for _, s := range p.takeovers {
		k := task{s.Job, s.Stage, s.Partition}
		next[k] = append(next[k], s)
	}
	firstAfter := func(ss []check.Start, attempt int) time.Time {
		var first time.Time
		for _, s := range ss {
			if s.Attempt > attempt && (first.IsZero() || s.At.Before(first)) {
				first = s.At
			}
		}
		return first
	}
	// A job that ended without succeeding (cancelled, or failed as its
	// workload planned: past its deadline) leaves its tasks where they
	// were: nothing claims them again.
	cancelled := map[string]bool{}
	for _, j := range append(slices.Clone(p.jobs), p.reruns...) {
		cancelled[j.id] = j.cancelled || (wantError(j.w.Kind) != "" && j.state == check.Failed)
	}
	var r Recovery
	var unknown []check.TaskState
	for _, k := range p.kills {
		for _, t := range k.held {
			r.Held++
			k2 := task{t.Job, t.Stage, t.Partition}
			if s := firstAfter(started[k2], t.Attempt); !s.IsZero() {
				r.Started = append(r.Started, s.Sub(k.at))
			}
			if first := firstAfter(next[k2], t.Attempt); !first.IsZero() {
				d := first.Sub(k.at)
				r.Times = append(r.Times, d)
				if d > SlowRecovery {
					r.Slow = append(r.Slow, fmt.Sprintf("task %s/%d/%d attempt %d held by %s (killed %s): reclaimed after %s",
						t.Job, t.Stage, t.Partition, t.Attempt, k.proc, k.at.UTC().Format("15:04:05.000"), d.Round(10*time.Millisecond)))
				}
				continue
			}
			unknown = append(unknown, t)
		}
	}
	slices.Sort(r.Times)
	slices.Sort(r.Started)
	return r, h.classifyUnreclaimed(ctx, p.dep.Table, unknown, cancelled, &r)
}

// classifyUnreclaimed says why held tasks were never claimed again.
func (h *harness) classifyUnreclaimed(ctx context.Context, table string, held []check.TaskState, cancelled map[string]bool, r *Recovery) error {
	var keys []map[string]types.AttributeValue
	for _, t := range held {
		keys = append(keys, check.TaskKey(t.Job, t.Stage, t.Partition))
	}
	items, err := batchGet(ctx, h.db, table, keys)
	if err != nil {
		return err
	}
	final := map[[3]any]check.TaskState{}
	for _, it := range items {
		t, err := check.DecodeTaskState(it)
		if err != nil {
			return err
		}
		final[[3]any{t.Job, t.Stage, t.Partition}] = t
	}
	for _, t := range held {
		f := final[[3]any{t.Job, t.Stage, t.Partition}]
		switch {
		case f.State == check.Succeeded && f.CommittedAttempt == t.Attempt:
			r.CommittedInFlight++
		case cancelled[t.Job]:
			r.JobCancelled++
		default:
			r.NotReclaimed = append(r.NotReclaimed, fmt.Sprintf("task %s/%d/%d attempt %d: now %s attempt %d", t.Job, t.Stage, t.Partition, t.Attempt, f.State, f.Attempt))
		}
	}
	return nil
}

// Print writes the report as a table.
func (r *Report) Print(w io.Writer) {
	o := r.Options
	fmt.Fprintf(w, "\nchaos run: %d jobs (%s), %d executors x %d slots, faults %q, a kill every %s, lease %s, seed %d\n",
		o.Jobs, counts(r.Kinds), o.Executors, o.Slots, o.Faults, o.KillEvery, o.Lease, o.Seed)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\tchaos run\tfault-free run\n")
	for _, st := range []string{check.Succeeded, check.Failed, check.Cancelled, deleted, check.Running} {
		name := strings.ToLower(st)
		switch st {
		case check.Running:
			name = "stuck (RUNNING)"
		case deleted:
			name = "deleted once ended"
		}
		fmt.Fprintf(tw, "jobs %s\t%d\t%d\n", name, r.Chaos[st], r.Reference[st])
	}
	fmt.Fprintf(tw, "jobs redriven after they failed\t%d\t\n", r.Redriven)
	fmt.Fprintf(tw, "wall time\t%s\t%s\n", r.ChaosWall.Round(100*time.Millisecond), r.ReferenceWall.Round(100*time.Millisecond))
	fmt.Fprintf(tw, "tasks / attempts\t%d / %d\t\n", r.Check.Tasks, r.Check.Attempts)
	fmt.Fprintf(tw, "tasks failed within their stage's toleratedFailures\t%d\t\n", r.Check.Tolerated)
	fmt.Fprintf(tw, "commits reported as they happened\t%d (each task by one attempt, the one its record holds)\t\n", r.Check.Commits)
	budget := "the examples' 3"
	if o.MaxAttempts > 0 {
		budget = fmt.Sprint(o.MaxAttempts)
	}
	fmt.Fprintf(tw, "reruns made (from %s) and checked, stages they reused\t%d, %d, %d (no task run, the source's outputs listed)\t\n", chaostasks.RerunFrom, r.Reran, r.Check.Reruns, r.Check.ReusedStages)
	fmt.Fprintf(tw, "dynamic splits made\t%d (input objects tiled by their tasks: %d)\t\n", r.Check.Splits, r.Check.TiledObjects)
	fmt.Fprintf(tw, "speculative copies claimed\t%d (%d committed, their holders fenced)\t\n", r.Check.Copies, r.Check.CopiesWon)
	fmt.Fprintf(tw, "most attempts of one task\t%d (budget %s)\t\n", r.Check.MaxAttempt, budget)
	fmt.Fprintf(tw, "executor kills (SIGKILL)\t%d (%d skipped: every executor ran a task's last attempts)\t\n", r.Kills, r.KillsSkipped)
	fmt.Fprintf(tw, "faults injected\t%s\t\n", counts(r.Faults))
	fmt.Fprintf(tw, "  by service\t%s\t\n", counts(r.FaultsByService))
	rc := r.Recovery
	fmt.Fprintf(tw, "tasks held by killed executors\t%d\t\n", rc.Held)
	fmt.Fprintf(tw, "recovery, kill to next claim\t%s\t\n", spread(rc.Times))
	fmt.Fprintf(tw, "  kill to next started attempt\t%s\t\n", spread(rc.Started))
	fmt.Fprintf(tw, "  not reclaimed\t%d committed in flight, %d job cancelled or past its deadline, %d other\t\n", rc.CommittedInFlight, rc.JobCancelled, len(rc.NotReclaimed))
	fmt.Fprintf(tw, "last commit to job end\t%s\t%s\n", spread(r.Check.EndLag), spread(r.Check.ReferenceEndLag))
	fmt.Fprintf(tw, "outputs byte-identical to the fault-free run\t%d compared\t\n", r.Check.Compared)
	fmt.Fprintf(tw, "checkpointing tasks' outputs numbered without a gap or repeat\t%d (%d committed by a retry)\t\n", r.Check.Verified, r.Check.VerifiedRetried)
	fmt.Fprintf(tw, "uncommitted attempt outputs (in no manifest)\t%d\t\n", r.Check.Uncommitted)
	fmt.Fprintf(tw, "commits after a cancel (attempt started before it)\t%d\t\n", r.Check.LateCommits)
	fmt.Fprintf(tw, "committed tasks not counted yet (stage not completed)\t%d\t\n", r.Check.Uncounted)
	fmt.Fprintf(tw, "cancels after the last stage completed (job manifest unreferenced)\t%d\t\n", r.Check.FinishedCancels)
	fmt.Fprintf(tw, "attempts claimed but never started\t%d (%d by an executor killed mid-claim, %d other)\t\n",
		len(r.Check.Unstarted), r.UnstartedByKill, len(r.Unexplained))
	fmt.Fprintf(tw, "violations\t%d\t\n", len(r.Violations))
	_ = tw.Flush()
	for _, v := range r.Violations {
		fmt.Fprintf(w, "VIOLATION: %s\n", v)
	}
	for _, s := range rc.NotReclaimed {
		fmt.Fprintf(w, "not reclaimed: %s\n", s)
	}
	for _, s := range r.Unexplained {
		fmt.Fprintf(w, "never started: %s\n", s)
	}
	for _, s := range rc.Slow {
		fmt.Fprintf(w, "slow recovery: %s\n", s)
	}
}

// counts formats a count map as "a 3, b 1", largest first.
func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		if m[keys[a]] != m[keys[b]] {
			return m[keys[a]] > m[keys[b]]
		}
		return keys[a] < keys[b]
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
