// Package check verifies a chaos run from what it left behind: the
// DynamoDB table and the S3 bucket, read directly with the AWS SDK, and
// the executors' own record of the attempts they started. It shares no
// code with the control plane (no shared/control, shared/dynamo,
// internal/executor, shared/batch, shared/blob or statemachine; a test
// enforces it): the layout it relies on is re-declared here, so the
// checker cannot agree with a bug by construction.
//
// What it verifies, per job of the chaos run:
//
//   - the job ended as the harness asked: SUCCEEDED, or CANCELLED when a
//     cancel was accepted; never FAILED, never still RUNNING (stuck);
//   - every task holds exactly one committed attempt (SUCCEEDED with
//     catt, 1 <= catt <= att <= mx) and that attempt was started by an
//     executor; no two attempts of a task reported a commit, and the
//     attempt that did is the record's (a second commit would overwrite
//     the first in the record, not in the executors' reports); every completion counter equals its tasks minus its
//     commits (a double or lost count shows), and is zero for every
//     completed stage; no stage started before its upstream completed;
//   - a speculative copy runs only in a stage that speculates, is
//     counted by it, is newer than the claim it runs beside, and of the
//     two at most one commits (speculation.go);
//   - the job manifest and the stage manifests of shuffle stages list
//     exactly the committed attempts' outputs, at their layout keys;
//   - each output is byte-identical to the fault-free run's output of
//     the same stage, partition and part (shuffle parts as sorted lines:
//     a map's emission order is not part of its result), and passes its
//     job's Verify (a checkpointing task's records: none skipped or
//     repeated);
//   - for a rerun: it reused exactly the stages before the one it ran
//     from, each from its source, with no task records or counters of
//     its own and its source's total; its manifests list the source's
//     committed outputs for them, at the source's keys (rerun.go);
//   - for a dynamically split stage: its tasks' byte ranges tile each
//     input object exactly once, and its outputs together hold the same
//     lines as the fault-free run's and as the input (dynsplit.go);
//   - for a job that must miss its deadline: FAILED with the deadline
//     error, and no job manifest;
//   - for a deleted job: no item of the table names it, no object is
//     under its area;
//   - for a cancelled job: no attempt started, no stage started or
//     completed and no job or stage manifest written after the cancel
//     was accepted.
package check

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Deployment is where one run's state lives.
type Deployment struct{ Table, Bucket string }

// Job pairs a chaos job with the fault-free run's job of the same spec.
type Job struct {
	ID, Reference string
	// Kind names the workload, for messages ("wordcount", ...).
	Kind string
	// Cancelled is set when the harness's cancel was accepted, at
	// CancelAccepted: when the accepted call returned, so the cancel had
	// been applied by then.
	Cancelled      bool
	CancelAccepted time.Time
	// Deleted: the harness deleted the job once it ended.
	Deleted bool
	// WantError, when set, is part of the error the job must fail with
	// (a job past its deadline), unless it was cancelled first.
	WantError string
	// Normalize, when set, rewrites an output of either run before the
	// comparison (the diamond example writes its attempt number).
	Normalize func([]byte) []byte
	// Verify, when set, checks each of the job's outputs on its own (a
	// checkpointing task's output numbers its records: none skipped or
	// repeated by a resume).
	Verify func([]byte) error
	// RerunOf, when set, is the chaos job this job reran, from stage
	// RerunFrom (rerun.go); Reference is then the fault-free run's twin
	// of RerunOf.
	RerunOf, RerunFrom string
	// SplitInput, when set, is the prefix of the chaos bucket that the
	// job's dynamicSplit stage reads (dynsplit.go).
	SplitInput string
}

// Start is one attempt an executor started: its claim was granted with
// the job RUNNING, and the task function ran. At is the claim's own
// timestamp, taken before its write.
type Start struct {
	Job                       string
	Stage, Partition, Attempt int
	At                        time.Time
	// Proc names the executor process, for evidence.
	Proc string
}

// Input is what to check.
type Input struct {
	AWS              aws.Config
	Chaos, Reference Deployment
	Jobs             []Job
	Starts           []Start
	// Commits are the commits the executors reported as they happened.
	Commits []Commit
	// Copies are the speculative copies' claims the executors reported.
	Copies []Copy
	// Executors names the executor processes by their liveness id (the
	// task record's holder), for evidence.
	Executors map[string]string
	// StartGrace is how long after a cancel an attempt may still start:
	// a process trusts a job state it read for this long (the control
	// plane's job-state TTL), so a claim granted later than that after the
	// cancel applied broke the guard.
	StartGrace time.Duration
}

// Deleted is the state Result.States counts deleted jobs in (the table
// has no state for them: nothing is left).
const Deleted = "DELETED"

// Violation is one broken guarantee.
type Violation struct {
	Job, Kind, What string
	// Detail is the evidence: the tasks' records and attempts.
	Detail []string
}

func (v Violation) String() string { return fmt.Sprintf("job %s (%s): %s", v.Job, v.Kind, v.What) }

// Result is the checker's verdict and what it counted on the way.
type Result struct {
	Violations []Violation
	// States counts the chaos jobs by their final state (RUNNING: stuck).
	States map[string]int
	// Tasks and Attempts over the chaos jobs; Attempts counts claims
	// (att), so attempts - tasks is the work redone.
	Tasks, Attempts int
	// Compared is the number of outputs compared with the fault-free run.
	Compared int
	// Uncommitted counts objects of attempts that did not commit (fenced
	// or killed executors, published before the commit): they exist and
	// no manifest lists them.
	Uncommitted int
	// LateCommits counts commits of a cancelled job's tasks after the
	// job ended, by attempts that started before the cancel: allowed
	// (shared/control/cancel.go), and never in a manifest.
	LateCommits int
	// FinishedCancels counts cancelled jobs whose cancel landed after
	// their last stage completed and before their success was recorded:
	// the job manifest was written (before the success, so that a
	// SUCCEEDED job always has one), the cancel won, and the job record
	// names no manifest. Allowed, as an object nothing refers to.
	FinishedCancels int
	// Uncounted counts committed tasks of stages that did not complete
	// that their counters have not counted yet: their committer died
	// between its commit and its count, and the sweep counts them at
	// their chunk's last look (shared/dynamo/count.go).
	Uncounted int
	// Unstarted counts attempts of jobs that were not cancelled whose
	// claim was written but whose task never started: the claimer died
	// between the two, or its claim was lost to it (a lost response).
	// Each one costs an attempt and a lease.
	Unstarted []Attempt
	// Tolerated counts the tasks that failed for good within their
	// stage's toleratedFailures: not lost, and never in a manifest.
	Tolerated int
	// Commits counts the commits the executors reported.
	Commits int
	// Copies counts the speculative copies' claims the executors
	// reported, and CopiesWon those whose copy committed (its holder was
	// fenced).
	Copies, CopiesWon int
	// Verified counts the outputs Job.Verify accepted, and
	// VerifiedRetried the tasks behind them that committed on a later
	// attempt than their first (a checkpointing task resumed, or started
	// over when it had saved no checkpoint yet).
	Verified, VerifiedRetried int
	// Reruns counts the reruns checked, and ReusedStages their reused
	// stages that passed.
	Reruns, ReusedStages int
	// Splits counts the dynamic splits recorded, and TiledObjects the
	// input objects whose tasks' byte ranges were checked to tile them.
	Splits, TiledObjects int
	// MaxAttempt is the highest attempt any task of the chaos run reached.
	MaxAttempt int
	// EndLag and ReferenceEndLag are, per succeeded job, the time from
	// its last commit to its end (sorted): the follow-up steps (stage
	// completion, manifests, downstream starts) a commit's executor does,
	// or, when it died first, the sweep.
	EndLag, ReferenceEndLag []time.Duration
}

// endLag is a succeeded job's time from its last commit to its end.
func endLag(rec *jobRec) (time.Duration, bool) {
	if rec.State != Succeeded {
		return 0, false
	}
	var last time.Time
	for _, st := range rec.Stages {
		for _, t := range st.Tasks {
			if t.Updated.After(last) {
				last = t.Updated
			}
		}
	}
	return rec.Ended.Sub(last), !last.IsZero()
}

func sortedLags(jobs map[string]*jobRec, ids []string) []time.Duration {
	var out []time.Duration
	for _, id := range ids {
		if rec, ok := jobs[id]; ok {
			if d, ok := endLag(rec); ok {
				out = append(out, d)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Run checks every job.
func Run(ctx context.Context, in Input) (Result, error) {
	db := dynamodb.NewFromConfig(in.AWS)
	s3c := s3.NewFromConfig(in.AWS, func(o *s3.Options) { o.UsePathStyle = true })
	chaos, keys, err := scanTableKeys(ctx, db, in.Chaos.Table)
	if err != nil {
		return Result{}, err
	}
	ref, err := scanTable(ctx, db, in.Reference.Table)
	if err != nil {
		return Result{}, err
	}
	c := &checker{
		chaos: chaos, ref: ref,
		chaosS3: newStore(s3c, in.Chaos.Bucket), refS3: newStore(s3c, in.Reference.Bucket),
		keys:   keys,
		starts: map[attemptRef]Start{}, commits: map[string]map[taskID][]Commit{}, copies: map[string][]Copy{}, executors: in.Executors, startGrace: in.StartGrace,
		res: Result{States: map[string]int{}},
	}
	c.addCopies(in.Copies)
	for _, s := range in.Starts {
		c.starts[attemptRef{s.Job, s.Stage, s.Partition, s.Attempt}] = s
	}
	c.addCommits(in.Commits)
	for _, j := range in.Jobs {
		if err := c.job(ctx, j); err != nil {
			return c.res, fmt.Errorf("check job %s: %w", j.ID, err)
		}
	}
	sort.Slice(c.res.Violations, func(a, b int) bool { return c.res.Violations[a].String() < c.res.Violations[b].String() })
	var ids, refIDs []string
	for _, j := range in.Jobs {
		ids, refIDs = append(ids, j.ID), append(refIDs, j.Reference)
	}
	c.res.EndLag, c.res.ReferenceEndLag = sortedLags(chaos, ids), sortedLags(ref, refIDs)
	return c.res, nil
}

// Attempt names one attempt of a task.
type Attempt struct {
	Job                       string
	Stage, Partition, Attempt int
}

type attemptRef = Attempt

type checker struct {
	chaos, ref     map[string]*jobRec
	keys           []string // every chaos item's "pk sk job"
	chaosS3, refS3 store
	starts         map[attemptRef]Start
	commits        map[string]map[taskID][]Commit // by job
	copies         map[string][]Copy              // by job
	executors      map[string]string
	startGrace     time.Duration
	res            Result
	cur            Job
	rec            *jobRec
}

func (c *checker) fail(format string, args ...any) {
	c.res.Violations = append(c.res.Violations, Violation{Job: c.cur.ID, Kind: c.cur.Kind, What: fmt.Sprintf(format, args...)})
}

// failWithEvidence is fail with every task of the job that did not
// succeed at its first attempt: its record, who started which attempt,
// and how the attempts ended.
func (c *checker) failWithEvidence(format string, args ...any) {
	c.fail(format, args...)
	v := &c.res.Violations[len(c.res.Violations)-1]
	for _, st := range c.rec.sortedStages() {
		parts := make([]int, 0, len(st.Tasks))
		for p := range st.Tasks {
			parts = append(parts, p)
		}
		slices.Sort(parts)
		for _, p := range parts {
			t := st.Tasks[p]
			if t.State == Succeeded && t.Attempt == 1 {
				continue
			}
			v.Detail = append(v.Detail, c.taskEvidence(st, t)...)
		}
	}
}

func (c *checker) taskEvidence(st *stageRec, t *taskRec) []string {
	holder := t.Executor
	if name := c.executors[holder]; name != "" {
		holder += " (" + name + ")"
	}
	out := []string{fmt.Sprintf("task %s/%d: %s, attempt %d of %d, committed %d, updated %s, holder %s, error %q",
		st.Name, t.Partition, t.State, t.Attempt, t.MaxAttempts, t.CommittedAttempt, ms(t.Updated), holder, t.Err)}
	for a := 1; a <= t.Attempt; a++ {
		line := fmt.Sprintf("  attempt %d: ", a)
		if s, ok := c.starts[attemptRef{c.rec.ID, st.Index, t.Partition, a}]; ok {
			line += fmt.Sprintf("started %s by %s", ms(s.At), s.Proc)
		} else {
			line += "never started (no executor logged its claim)"
		}
		for _, e := range st.Ends[t.Partition] {
			if e.Attempt == a {
				line += fmt.Sprintf("; ended %s %s: %s", e.Kind, ms(e.At), e.Err)
			}
		}
		out = append(out, line)
	}
	return out
}

func (c *checker) job(ctx context.Context, j Job) error {
	c.cur = j
	if j.Deleted {
		return c.deleted(ctx, j)
	}
	rec, ok := c.chaos[j.ID]
	c.rec = rec
	if !ok || rec.State == "" {
		c.fail("no job item in the table")
		return nil
	}
	c.res.States[rec.State]++
	if !c.endState(rec, j) {
		return nil
	}
	c.tasks(rec)
	c.commitHistory(rec)
	c.speculation(rec)
	c.reuse(rec)
	c.counters(rec)
	c.stageOrder(rec)
	if err := c.tiling(ctx, rec); err != nil {
		return err
	}
	switch {
	case j.Cancelled:
		return c.cancelled(ctx, rec, j)
	case j.WantError != "":
		return c.failedAsPlanned(ctx, rec, j)
	}
	return c.succeeded(ctx, rec, j)
}

// endState checks the job ended as it should; false stops the job's
// other checks (a stuck or failed job has nothing to compare).
func (c *checker) endState(rec *jobRec, j Job) bool {
	want := Succeeded
	switch {
	case j.Cancelled:
		want = Cancelled
	case j.WantError != "":
		want = Failed
	}
	switch {
	case rec.State == want && want == Failed && !strings.Contains(rec.Err, j.WantError):
		c.failWithEvidence("FAILED with %q, want an error with %q", rec.Err, j.WantError)
	case rec.State == want:
		return true
	case rec.State == Running:
		c.failWithEvidence("stuck: still RUNNING when the run ended")
	case rec.State == Failed:
		c.failWithEvidence("FAILED: %s", rec.Err)
	default:
		c.failWithEvidence("ended %s, want %s (error %q)", rec.State, want, rec.Err)
	}
	c.tasks(rec) // still worth knowing whether the records are sound
	c.commitHistory(rec)
	c.speculation(rec)
	c.reuse(rec)
	c.counters(rec)
	return false
}

// tasks checks every task holds at most one committed attempt, and that
// a committed attempt is one an executor started.
func (c *checker) tasks(rec *jobRec) {
	for _, st := range rec.sortedStages() {
		for _, t := range st.Tasks {
			c.res.Tasks++
			c.res.Attempts += t.Attempt
			c.res.MaxAttempt = max(c.res.MaxAttempt, t.Attempt)
			where := fmt.Sprintf("task %s/%d", st.Name, t.Partition)
			if t.MaxAttempts > 0 && t.Attempt > t.MaxAttempts {
				c.fail("%s: attempt %d beyond max %d", where, t.Attempt, t.MaxAttempts)
			}
			if !c.cur.Cancelled {
				for a := 1; a <= t.Attempt; a++ {
					if _, ok := c.starts[attemptRef{rec.ID, st.Index, t.Partition, a}]; !ok {
						c.res.Unstarted = append(c.res.Unstarted, Attempt{rec.ID, st.Index, t.Partition, a})
					}
				}
			}
			if t.State != Succeeded {
				if t.CommittedAttempt != 0 {
					c.fail("%s: %s but has committed attempt %d", where, t.State, t.CommittedAttempt)
				}
				continue
			}
			if t.CommittedAttempt < 1 || t.CommittedAttempt > t.Attempt {
				c.fail("%s: SUCCEEDED with committed attempt %d of %d", where, t.CommittedAttempt, t.Attempt)
				continue
			}
			if _, ok := c.starts[attemptRef{rec.ID, st.Index, t.Partition, t.CommittedAttempt}]; !ok {
				c.fail("%s: committed attempt %d was never started by an executor (no claim in any executor's log)", where, t.CommittedAttempt)
			}
		}
	}
}

// shardOf is the product's dynamo.ShardOf, re-declared (the checker
// shares no code with what it checks; TestLayoutMatchesTheProduct).
func shardOf(partition, shards int) int { return (partition / 64) % shards }

// counters checks each completion counter against the tasks it counts:
// left = tasks - commits, never negative, zero once the stage completed.
func (c *checker) counters(rec *jobRec) {
	for _, st := range rec.sortedStages() {
		// A rerun's reused stage has no task records (rerun.go).
		if _, reused := rec.Reused[st.Index]; st.State == Completed && (!st.Materialized || len(st.Tasks) != st.Total && !reused) {
			c.fail("stage %s COMPLETED with %d task items of %d (materialized %v)", st.Name, len(st.Tasks), st.Total, st.Materialized)
		}
		if !st.Materialized || st.Shards == 0 {
			continue
		}
		// A shard counts its partitions, whether written or not: a task
		// of a stage partitioned by count has no item until its claim.
		// commits counts what counts a shard down: a commit, or a failure
		// the stage tolerated.
		tasks, commits := make([]int, st.Shards), make([]int, st.Shards)
		for p := 0; p < st.Total; p++ {
			tasks[shardOf(p, st.Shards)]++
		}
		tolerated := 0
		for _, t := range st.Tasks {
			if t.Partition < 0 || t.Partition >= st.Total {
				c.fail("stage %s has an item for task %d, beyond its %d partitions", st.Name, t.Partition, st.Total)
				continue
			}
			k := shardOf(t.Partition, st.Shards)
			toleratedFail := t.State == Failed && t.Tolerated
			if t.State == Succeeded || toleratedFail {
				commits[k]++
			}
			if toleratedFail {
				tolerated++
			}
			if st.State == Completed && t.State != Succeeded && !toleratedFail {
				c.fail("stage %s COMPLETED but task %d is %s", st.Name, t.Partition, t.State)
			}
		}
		var tol *tolerance
		if st.Index < len(rec.Spec.Stages) {
			tol = rec.Spec.Stages[st.Index].ToleratedFailures
		}
		if allowed := tol.allowed(st.Total); tolerated > allowed || tolerated != st.Tolerated {
			c.fail("stage %s: %d tasks failed tolerated, the stage counts %d and allows %d", st.Name, tolerated, st.Tolerated, allowed)
		}
		c.res.Tolerated += tolerated
		for k := 0; k < st.Shards; k++ {
			cnt, ok := st.Counters[k]
			switch {
			case !ok:
				c.fail("stage %s: counter %d missing", st.Name, k)
				continue
			case cnt.Total != tasks[k]:
				c.fail("stage %s: counter %d counts %d tasks, the stage has %d", st.Name, k, cnt.Total, tasks[k])
			case cnt.Left < cnt.Total-commits[k]:
				c.fail("stage %s: counter %d left %d, but only %d of its %d tasks committed (want at least %d): a task counted twice or before its commit", st.Name, k, cnt.Left, commits[k], cnt.Total, cnt.Total-commits[k])
			case st.State == Completed && cnt.Left != 0:
				c.fail("stage %s COMPLETED with counter %d at %d", st.Name, k, cnt.Left)
			case cnt.Left > cnt.Total-commits[k]:
				// A committer died between its commit and its count; the
				// sweep counts the task at its chunk's last look.
				c.res.Uncounted += cnt.Left - (cnt.Total - commits[k])
			}
			for _, p := range cnt.Done {
				if t := st.Tasks[p]; t == nil || t.State != Succeeded || shardOf(p, st.Shards) != k {
					c.fail("stage %s: counter %d counted partition %d, which is not a committed task of it", st.Name, k, p)
				}
			}
		}
	}
}

// stageOrder checks no stage started before every stage it runs after
// completed. Both times are taken before their writes, and a start reads
// its upstream as COMPLETED first, so a sound start is never earlier.
func (c *checker) stageOrder(rec *jobRec) {
	for _, st := range rec.sortedStages() {
		if st.Started.IsZero() || st.Index >= len(rec.Spec.Stages) {
			continue
		}
		for _, up := range rec.Spec.Stages[st.Index].After {
			u, ok := rec.Stages[rec.Spec.index(up)]
			switch {
			case !ok || u.State != Completed:
				c.fail("stage %s started while its upstream %s is not COMPLETED", st.Name, up)
			case st.Started.Before(u.Ended):
				c.fail("stage %s started at %s, before its upstream %s completed at %s", st.Name, ms(st.Started), up, ms(u.Ended))
			}
		}
	}
}

// lateStarts are the attempts of cancelled job j that started more than
// grace after its cancel returned.
func lateStarts(starts map[attemptRef]Start, j Job, grace time.Duration) []string {
	var late []string
	for ref, at := range starts {
		if ref.Job == j.ID && at.At.After(j.CancelAccepted.Add(grace)) {
			late = append(late, fmt.Sprintf("attempt %d of task %d/%d started at %s by %s, more than %s after the cancel returned at %s",
				ref.Attempt, ref.Stage, ref.Partition, ms(at.At), at.Proc, grace, ms(j.CancelAccepted)))
		}
	}
	slices.Sort(late)
	return late
}

// allCompleted says whether every stage of a job completed: a cancel
// that lands then, before the job's success is recorded, finds a job
// manifest already written (the completions themselves are checked
// against the cancel's time above).
func allCompleted(rec *jobRec) bool {
	if len(rec.Stages) == 0 || len(rec.Stages) != len(rec.Spec.Stages) {
		return false
	}
	for _, st := range rec.Stages {
		if st.State != Completed {
			return false
		}
	}
	return true
}

// cancelled checks nothing of a cancelled job moved after the cancel was
// accepted. The times compared are taken before each write, and the
// cancel had applied when its call returned, so a later timestamp means
// the write came after the cancel and its guard (job RUNNING) should
// have refused it.
func (c *checker) cancelled(ctx context.Context, rec *jobRec, j Job) error {
	for _, late := range lateStarts(c.starts, j, c.startGrace) {
		c.fail("%s", late)
	}
	for _, st := range rec.sortedStages() {
		if st.Started.After(j.CancelAccepted) {
			c.fail("stage %s started at %s, after the cancel returned at %s", st.Name, ms(st.Started), ms(j.CancelAccepted))
		}
		if st.State == Completed && st.Ended.After(j.CancelAccepted) {
			c.fail("stage %s completed at %s, after the cancel returned at %s", st.Name, ms(st.Ended), ms(j.CancelAccepted))
		}
		for _, t := range st.Tasks {
			if t.State == Succeeded && t.Updated.After(rec.Ended) {
				c.res.LateCommits++
			}
		}
	}
	if rec.Manifest != "" {
		c.fail("cancelled job has a manifest %s", rec.Manifest)
	}
	ok, err := c.chaosS3.exists(ctx, jobManifestKey(j.ID))
	if err != nil {
		return err
	}
	if ok && !allCompleted(rec) {
		c.fail("cancelled job has a job manifest object %s", jobManifestKey(j.ID))
	}
	if ok && allCompleted(rec) {
		c.res.FinishedCancels++
	}
	// A stage's manifest is written as it completes, for a running job
	// only: a stage that did not complete before the cancel has none.
	for i, sp := range rec.Spec.Stages {
		if st := rec.Stages[i]; st != nil && st.State == Completed && !st.Ended.After(j.CancelAccepted) {
			continue
		}
		key := stageManifestKey(j.ID, sp.Name)
		ok, err := c.chaosS3.exists(ctx, key)
		if err != nil {
			return err
		}
		if ok {
			c.fail("cancelled job has a manifest %s of stage %s, which did not complete before the cancel", key, sp.Name)
		}
	}
	return c.uncommitted(ctx, rec)
}

// deleted checks a deleted job left nothing: no item of the table names
// it, no object is under its area.
func (c *checker) deleted(ctx context.Context, j Job) error {
	c.res.States[Deleted]++
	var left []string
	for _, k := range c.keys {
		if strings.Contains(k, j.ID) {
			left = append(left, strings.TrimSpace(k))
		}
	}
	if len(left) > 0 {
		c.fail("deleted job left %d records: %s", len(left), strings.Join(left[:min(len(left), 5)], "; "))
	}
	objs, err := c.chaosS3.list(ctx, jobPrefix(j.ID))
	if err != nil {
		return err
	}
	if len(objs) > 0 {
		c.fail("deleted job left %d objects: %s", len(objs), strings.Join(objs[:min(len(objs), 5)], "; "))
	}
	return nil
}

// failedAsPlanned checks a job that had to fail (past its deadline)
// published nothing: no job manifest, and no stage left running.
func (c *checker) failedAsPlanned(ctx context.Context, rec *jobRec, j Job) error {
	if rec.Manifest != "" {
		c.fail("failed job has a manifest %s", rec.Manifest)
	}
	ok, err := c.chaosS3.exists(ctx, jobManifestKey(j.ID))
	if err != nil {
		return err
	}
	if ok {
		c.fail("failed job has a job manifest object %s", jobManifestKey(j.ID))
	}
	for _, st := range rec.sortedStages() {
		if st.State == Running {
			c.fail("stage %s still RUNNING in a job that ended FAILED", st.Name)
		}
	}
	return c.uncommitted(ctx, rec)
}

// succeeded checks a succeeded job's manifests and compares its outputs
// with the fault-free run's.
func (c *checker) succeeded(ctx context.Context, rec *jobRec, j Job) error {
	for _, st := range rec.sortedStages() {
		if st.State != Completed {
			c.fail("job SUCCEEDED with stage %s %s", st.Name, st.State)
		}
	}
	if len(rec.Stages) != len(rec.Spec.Stages) {
		c.fail("%d stage items for %d stages in the spec", len(rec.Stages), len(rec.Spec.Stages))
	}
	if rec.Manifest != jobManifestKey(j.ID) {
		c.fail("manifest attribute %q, want %q", rec.Manifest, jobManifestKey(j.ID))
	}
	refRec, ok := c.ref[j.Reference]
	if !ok || refRec.State != Succeeded {
		state := "missing"
		if ok {
			state = refRec.State + " " + refRec.Err
		}
		c.fail("fault-free run's job %s is %s: nothing to compare with", j.Reference, state)
		return nil
	}
	compare := c.compare
	if j.SplitInput != "" {
		// Splits depend on timing: the runs' partitions differ.
		compare = c.compareSinks
	}
	if err := compare(ctx, rec, refRec, jobManifestKey(j.ID), jobManifestKey(j.Reference), rec.Spec.sinks(), j.Normalize); err != nil {
		return err
	}
	for i, st := range rec.Spec.Stages {
		if st.Shuffle == nil {
			continue
		}
		// A map task emits in whatever order it likes: compare its
		// shuffle parts as sets of lines, each partition of an indexed
		// object on its own (its index holds sizes, which a Normalize
		// may change).
		norm := func(b []byte) []byte {
			var out []byte
			for r, p := range shuffleParts(b) {
				if j.Normalize != nil {
					p = j.Normalize(p)
				}
				out = fmt.Appendf(out, "-- partition %d\n", r)
				out = append(out, sortedLines(p)...)
			}
			return out
		}
		if err := c.compare(ctx, rec, refRec, stageManifestKey(j.ID, st.Name), stageManifestKey(j.Reference, st.Name), []int{i}, norm); err != nil {
			return err
		}
	}
	return c.uncommitted(ctx, rec)
}

// manifests reads the chaos run's manifest at key and the fault-free
// run's at refKey; ok is false (the failure noted) if either is missing.
func (c *checker) manifests(ctx context.Context, key, refKey string) (got, want manifest, ok bool) {
	got, err := c.chaosS3.manifest(ctx, key)
	if err != nil {
		c.fail("manifest: %v", err)
		return got, want, false
	}
	if want, err = c.refS3.manifest(ctx, refKey); err != nil {
		c.fail("fault-free run's manifest: %v", err)
		return got, want, false
	}
	return got, want, true
}

// compare checks the chaos run's manifest at key lists exactly the
// committed outputs of stages, and that each output equals the fault-free
// run's (manifest refKey).
func (c *checker) compare(ctx context.Context, rec, refRec *jobRec, key, refKey string, stages []int, norm func([]byte) []byte) error {
	got, want, ok := c.manifests(ctx, key, refKey)
	if !ok {
		return nil
	}
	mine := c.manifestSlots(rec, key, got, stages)
	theirs := map[slot]string{}
	for _, o := range want.Outputs {
		theirs[slot{o.Stage, o.Partition, o.Part}] = o.Key
	}
	if len(mine) != len(theirs) {
		c.fail("%s lists %d outputs, the fault-free run's %d", key, len(mine), len(theirs))
	}
	var keys, refKeys []string
	for s, k := range mine {
		if rk, ok := theirs[s]; ok {
			keys, refKeys = append(keys, k), append(refKeys, rk)
		} else {
			c.fail("%s lists %v, which the fault-free run does not have", key, s)
		}
	}
	a, err := c.chaosS3.fetchAll(ctx, keys)
	if err != nil {
		c.fail("read outputs: %v", err)
		return nil
	}
	b, err := c.refS3.fetchAll(ctx, refKeys)
	if err != nil {
		return fmt.Errorf("read the fault-free run's outputs: %w", err)
	}
	for i := range keys {
		x, y := a[keys[i]], b[refKeys[i]]
		c.verify(rec, keys[i], x)
		if norm != nil {
			x, y = norm(x), norm(y)
		}
		c.res.Compared++
		if string(x) != string(y) {
			c.fail("output %s (%d bytes) differs from the fault-free run's %s (%d bytes)", keys[i], len(x), refKeys[i], len(y))
		}
	}
	return nil
}

// verify applies the job's Verify to one of its outputs.
func (c *checker) verify(rec *jobRec, key string, out []byte) {
	if c.cur.Verify == nil {
		return
	}
	if err := c.cur.Verify(out); err != nil {
		c.fail("output %s: %v", key, err)
		return
	}
	c.res.Verified++
	if _, _, att, _, err := parseOutputKey(rec.ID, key); err == nil && att > 1 {
		c.res.VerifiedRetried++
	}
}

// manifestSlots checks a manifest against the task records: every listed
// output is a committed attempt's at its layout key, listed once, and
// every committed output of the stages is listed.
func (c *checker) manifestSlots(rec *jobRec, key string, m manifest, stages []int) map[slot]string {
	out := map[slot]string{}
	for _, o := range m.Outputs {
		s := slot{o.Stage, o.Partition, o.Part}
		idx := rec.Spec.index(o.Stage)
		if _, ok := rec.Stages[idx]; !ok || !slices.Contains(stages, idx) {
			c.fail("%s lists %s, not an output of its stages", key, o.Key)
			continue
		}
		// A reused stage's outputs are its source's (rerun.go).
		own := c.stageOwner(rec, idx)
		var t *taskRec
		ok := false
		if st := own.Stages[idx]; st != nil {
			t, ok = st.Tasks[o.Partition]
		}
		switch {
		case !ok:
			c.fail("%s lists %s of a task that does not exist", key, o.Key)
		case t.State != Succeeded || o.Attempt != t.CommittedAttempt:
			c.fail("%s lists attempt %d of task %s/%d, whose committed attempt is %d (%s)", key, o.Attempt, o.Stage, o.Partition, t.CommittedAttempt, t.State)
		case o.Key != outputKey(own.ID, o.Stage, o.Partition, t.CommittedAttempt, o.Part):
			c.fail("%s lists key %s, want %s", key, o.Key, outputKey(own.ID, o.Stage, o.Partition, t.CommittedAttempt, o.Part))
		case o.Part < 0 || o.Part >= t.Outputs:
			c.fail("%s lists part %d of task %s/%d, which committed %d", key, o.Part, o.Stage, o.Partition, t.Outputs)
		}
		if _, dup := out[s]; dup {
			c.fail("%s lists %v twice", key, s)
		}
		out[s] = o.Key
	}
	for _, idx := range stages {
		if _, ok := rec.Stages[idx]; !ok {
			continue
		}
		st, ok := c.stageOwner(rec, idx).Stages[idx]
		if !ok {
			continue
		}
		for _, t := range st.Tasks {
			for p := 0; p < t.Outputs; p++ {
				if _, ok := out[slot{st.Name, t.Partition, p}]; !ok {
					c.fail("%s misses part %d of task %s/%d", key, p, st.Name, t.Partition)
				}
			}
		}
	}
	return out
}

// uncommitted counts the objects of attempts that did not commit, and
// flags objects outside the layout.
func (c *checker) uncommitted(ctx context.Context, rec *jobRec) error {
	keys, err := c.chaosS3.list(ctx, outputsPrefix(rec.ID))
	if err != nil {
		return err
	}
	for _, k := range keys {
		stage, part, att, _, err := parseOutputKey(rec.ID, k)
		if err != nil {
			c.fail("%v", err)
			continue
		}
		st, ok := rec.Stages[rec.Spec.index(stage)]
		if !ok {
			c.fail("object %s of an unknown stage", k)
			continue
		}
		if _, reused := rec.Reused[st.Index]; reused {
			c.fail("object %s of reused stage %s: a reused stage runs no task", k, stage)
			continue
		}
		if t, ok := st.Tasks[part]; !ok || t.CommittedAttempt != att {
			c.res.Uncommitted++
		}
	}
	return nil
}

func ms(t time.Time) string { return t.Format("15:04:05.000") }
