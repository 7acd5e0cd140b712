package check

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The storage layout, re-declared from shared/dynamo (keys.go, codec.go)
// on purpose: the checker must not trust the code it checks, so a change
// there that breaks the layout breaks the checker loudly instead of
// silently agreeing with it.
const (
	pkJob  = "JOB#"  // JOB#<job>: sk JOB (the job), STAGE#<nn> (its stages)
	pkTask = "TASK#" // TASK#<job>#<stage>#<bucket>, sk <partition> (%06d)
	pkCnt  = "CNT#"  // CNT#<job>#<stage>#<shard>, sk CNT
	pkAtt  = "ATT#"  // ATT#<job>#<stage>#<bucket>, sk <partition>#<attempt>: how an attempt ended uncommitted
	// pkEvent is a job's timeline: EVT#<job>#<shard>, a dynamic split
	// among its entries (shared/dynamo/keys.go, dynsplit.go).
	pkEvent = "EVT#"
	// pkOutbox is an event waiting to be published (shared/events).
	pkOutbox = "OBX#"
	skJob    = "JOB"
	skStg    = "STAGE#"
	// taskBucket is how many tasks share a task partition key.
	taskBucket = 100

	aState     = "st"
	aAttempt   = "att"
	aMax       = "mx"
	aCommitAtt = "catt"
	aOutputs   = "nout"
	aUpdated   = "upd"
	aEnded     = "end"
	aStarted   = "sta"
	aName      = "nm"
	aSpec      = "spec"
	aManifest  = "man"
	aTotal     = "tot"
	aShards    = "nsh"
	aMat       = "mat"
	aLeft      = "left"
	aErr       = "err"
	aExecutor  = "ex"
	aKind      = "k"
	aAt        = "at"
	// A task that failed for good within its stage's toleratedFailures
	// is FAILED with tol set, counted down on its shard (not in its done
	// set), and counted in its stage's tfl.
	aTaskTolerated  = "tol"
	aStageTolerated = "tfl"
	// A rerun's job item maps each stage it reuses (by index) to the job
	// whose committed outputs it reuses (shared/dynamo/redrive.go).
	aReused = "rru"
	// An input task's byte range of its object (shared/dynamo/tasks.go).
	aInKey   = "ik"
	aInStart = "is"
	aInEnd   = "ie"
	// A timeline entry's stage index.
	aEventStage = "stg"
)

// States as the table spells them (statemachine/lifecycles.go).
const (
	Running   = "RUNNING"
	Succeeded = "SUCCEEDED"
	Failed    = "FAILED"
	Cancelled = "CANCELLED"
	Completed = "COMPLETED"
	Claimed   = "CLAIMED"
)

// jobRec is a job item.
type jobRec struct {
	ID       string
	State    string
	Err      string
	Manifest string
	Ended    time.Time
	Spec     specDoc
	Stages   map[int]*stageRec
	// Reused maps a rerun's reused stages to their source jobs.
	Reused map[int]string
}

// specDoc is the part of a stored spec the checker needs.
type specDoc struct {
	Stages []specStage `json:"stages"`
}

type specStage struct {
	Name              string     `json:"name"`
	After             []string   `json:"after"`
	Shuffle           *struct{}  `json:"shuffle"`
	ToleratedFailures *tolerance `json:"toleratedFailures"`
	Speculation       *struct{}  `json:"speculation"`
}

// tolerance is a stage's toleratedFailures.
type tolerance struct {
	Count   int     `json:"count"`
	Percent float64 `json:"percent"`
}

// allowed is how many of total tasks may fail for good: the product's
// spec.Tolerance.Allowed (a floor of the percentage).
func (t *tolerance) allowed(total int) int {
	switch {
	case t == nil:
		return 0
	case t.Percent > 0:
		return int(int64(math.Round(t.Percent*1e6)) * int64(total) / 100e6)
	}
	return t.Count
}

// sinks are the stages no stage runs after: the job manifest lists theirs.
func (s specDoc) sinks() []int {
	feeds := map[string]bool{}
	for _, st := range s.Stages {
		for _, a := range st.After {
			feeds[a] = true
		}
	}
	var out []int
	for i, st := range s.Stages {
		if !feeds[st.Name] {
			out = append(out, i)
		}
	}
	return out
}

func (s specDoc) index(name string) int {
	for i, st := range s.Stages {
		if st.Name == name {
			return i
		}
	}
	return -1
}

// stageRec is a stage item with its tasks and counters.
type stageRec struct {
	Index        int
	Name         string
	State        string
	Total        int
	Shards       int
	Materialized bool
	// Tolerated counts the failed tasks the stage tolerated.
	Tolerated int
	// CopiesLaunched counts the speculative copies the stage launched.
	CopiesLaunched int
	// Splits counts the dynamic splits of the stage's tasks on the job's
	// timeline.
	Splits   int
	Started  time.Time
	Ended    time.Time
	Tasks    map[int]*taskRec // by partition
	Counters map[int]*counterRec
	// Ends are the attempt-end records by partition: evidence for a
	// failed job, not checked.
	Ends map[int][]attemptEnd
}

type attemptEnd struct {
	Attempt int
	Kind    string
	At      time.Time
	Err     string
}

type taskRec struct {
	Partition        int
	State            string
	Attempt          int
	MaxAttempts      int
	CommittedAttempt int
	Outputs          int
	Updated          time.Time
	Err              string
	Executor         string
	// Tolerated: FAILED within the stage's toleratedFailures.
	Tolerated bool
	// Input is an input task's byte range; nil for other tasks.
	Input *byteRange
}

// byteRange is the part [Start, End) of object Key a task reads.
type byteRange struct {
	Key        string
	Start, End int64
}

// counterRec is a completion counter: Done is the set of partitions it
// counted (a commit's count is idempotent by it).
type counterRec struct {
	Left, Total int
	Done        []int
}

// TaskKey is the primary key of a task item, for readers outside the
// checker (the harness reads claims right before a kill).
func TaskKey(job string, stage, partition int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("%s%s#%d#%d", pkTask, job, stage, partition/taskBucket)},
		"sk": &types.AttributeValueMemberS{Value: fmt.Sprintf("%06d", partition)},
	}
}

// JobKey is the primary key of a job item.
func JobKey(job string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: pkJob + job},
		"sk": &types.AttributeValueMemberS{Value: skJob},
	}
}

// TaskState is what the harness needs of a task item.
type TaskState struct {
	Job                       string
	Stage, Partition          int
	State                     string
	Attempt, CommittedAttempt int
}

// DecodeTaskState reads a task item.
func DecodeTaskState(it map[string]types.AttributeValue) (TaskState, error) {
	job, stage, _, err := splitKey(getS(it, "pk"), pkTask)
	if err != nil {
		return TaskState{}, err
	}
	part, err := strconv.Atoi(getS(it, "sk"))
	if err != nil {
		return TaskState{}, fmt.Errorf("task key %q: %w", getS(it, "sk"), err)
	}
	return TaskState{Job: job, Stage: stage, Partition: part, State: getS(it, aState),
		Attempt: int(getN(it, aAttempt)), CommittedAttempt: int(getN(it, aCommitAtt))}, nil
}

// DecodeJobState reads a job item's id and state.
func DecodeJobState(it map[string]types.AttributeValue) (id, state string) {
	return strings.TrimPrefix(getS(it, "pk"), pkJob), getS(it, aState)
}

// scanTable reads the whole table consistently and groups it by job. The
// chaos table is small (thousands of items), and a scan sees every item,
// including any the control plane's own indexes would miss.
func scanTable(ctx context.Context, db *dynamodb.Client, table string) (map[string]*jobRec, error) {
	jobs, _, err := scanTableKeys(ctx, db, table)
	return jobs, err
}

// scanTableKeys is scanTable that also returns every item's key and job
// attribute ("pk sk job"), for records of kinds the checker does not
// decode (indexes, idempotency records): what a deleted job must not
// leave. Event outbox entries are left out: the sweep publishes and
// deletes them.
func scanTableKeys(ctx context.Context, db *dynamodb.Client, table string) (map[string]*jobRec, []string, error) {
	var keys []string
	jobs := map[string]*jobRec{}
	job := func(id string) *jobRec {
		j, ok := jobs[id]
		if !ok {
			j = &jobRec{ID: id, Stages: map[int]*stageRec{}}
			jobs[id] = j
		}
		return j
	}
	stage := func(id string, idx int) *stageRec {
		j := job(id)
		s, ok := j.Stages[idx]
		if !ok {
			s = &stageRec{Index: idx, Tasks: map[int]*taskRec{}, Counters: map[int]*counterRec{}, Ends: map[int][]attemptEnd{}}
			j.Stages[idx] = s
		}
		return s
	}
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("scan %s: %w", table, err)
		}
		for _, it := range page.Items {
			if pk := getS(it, "pk"); !strings.HasPrefix(pk, pkOutbox) {
				keys = append(keys, pk+" "+getS(it, "sk")+" "+getS(it, "job"))
			}
			if err := addItem(it, job, stage); err != nil {
				return nil, nil, err
			}
		}
	}
	return jobs, keys, nil
}

func addItem(it map[string]types.AttributeValue, job func(string) *jobRec, stage func(string, int) *stageRec) error {
	pk, sk := getS(it, "pk"), getS(it, "sk")
	switch {
	case strings.HasPrefix(pk, pkJob) && sk == skJob:
		j := job(strings.TrimPrefix(pk, pkJob))
		j.State, j.Err, j.Manifest, j.Ended = getS(it, aState), getS(it, aErr), getS(it, aManifest), getT(it, aEnded)
		if err := json.Unmarshal([]byte(getS(it, aSpec)), &j.Spec); err != nil {
			return fmt.Errorf("job %s: spec: %w", j.ID, err)
		}
		if m, ok := it[aReused].(*types.AttributeValueMemberM); ok {
			j.Reused = map[int]string{}
			for k, v := range m.Value {
				idx, err := strconv.Atoi(k)
				src, ok := v.(*types.AttributeValueMemberS)
				if err != nil || !ok {
					return fmt.Errorf("job %s: reused stage %q: not an index mapped to a job", j.ID, k)
				}
				j.Reused[idx] = src.Value
			}
		}
	case strings.HasPrefix(pk, pkJob) && strings.HasPrefix(sk, skStg):
		idx, err := strconv.Atoi(strings.TrimPrefix(sk, skStg))
		if err != nil {
			return fmt.Errorf("stage key %s/%s: %w", pk, sk, err)
		}
		s := stage(strings.TrimPrefix(pk, pkJob), idx)
		s.Name, s.State, s.Total, s.Shards = getS(it, aName), getS(it, aState), int(getN(it, aTotal)), int(getN(it, aShards))
		s.Materialized, s.Started, s.Ended = getB(it, aMat), getT(it, aStarted), getT(it, aEnded)
		s.Tolerated = int(getN(it, aStageTolerated))
		s.CopiesLaunched = int(getN(it, aCopiesLaunched))
	case strings.HasPrefix(pk, pkTask):
		id, idx, _, err := splitKey(pk, pkTask)
		if err != nil {
			return err
		}
		part, err := strconv.Atoi(sk)
		if err != nil {
			return fmt.Errorf("task key %s/%s: %w", pk, sk, err)
		}
		t := &taskRec{
			Partition: part, State: getS(it, aState), Attempt: int(getN(it, aAttempt)), MaxAttempts: int(getN(it, aMax)),
			CommittedAttempt: int(getN(it, aCommitAtt)), Outputs: int(getN(it, aOutputs)), Updated: getT(it, aUpdated),
			Err: getS(it, aErr), Executor: getS(it, aExecutor), Tolerated: getB(it, aTaskTolerated),
		}
		if k := getS(it, aInKey); k != "" {
			t.Input = &byteRange{Key: k, Start: getN(it, aInStart), End: getN(it, aInEnd)}
		}
		stage(id, idx).Tasks[part] = t
	case strings.HasPrefix(pk, pkCnt):
		id, idx, shard, err := splitKey(pk, pkCnt)
		if err != nil {
			return err
		}
		cnt := &counterRec{Left: int(getN(it, aLeft)), Total: int(getN(it, aTotal))}
		if set, ok := it["done"].(*types.AttributeValueMemberNS); ok {
			for _, v := range set.Value {
				n, err := strconv.Atoi(v)
				if err != nil {
					return fmt.Errorf("counter %s: done holds %q", pk, v)
				}
				cnt.Done = append(cnt.Done, n)
			}
		}
		stage(id, idx).Counters[shard] = cnt
	case strings.HasPrefix(pk, pkEvent) && getS(it, aKind) == splitKind:
		id, _, ok := strings.Cut(strings.TrimPrefix(pk, pkEvent), "#")
		if !ok {
			return fmt.Errorf("malformed key %q", pk)
		}
		stage(id, int(getN(it, aEventStage))).Splits++
	case strings.HasPrefix(pk, pkAtt):
		id, idx, _, err := splitKey(pk, pkAtt)
		if err != nil {
			return err
		}
		var part, att int
		if _, err := fmt.Sscanf(sk, "%06d#%03d", &part, &att); err != nil {
			return fmt.Errorf("attempt key %s/%s: %w", pk, sk, err)
		}
		st := stage(id, idx)
		st.Ends[part] = append(st.Ends[part], attemptEnd{Attempt: att, Kind: getS(it, aKind), At: getT(it, aAt), Err: getS(it, aErr)})
	}
	return nil
}

// splitKey parses "<prefix><job>#<stage>#<n>".
func splitKey(pk, prefix string) (job string, stage, n int, err error) {
	parts := strings.Split(strings.TrimPrefix(pk, prefix), "#")
	if len(parts) != 3 {
		return "", 0, 0, fmt.Errorf("malformed key %q", pk)
	}
	if stage, err = strconv.Atoi(parts[1]); err == nil {
		n, err = strconv.Atoi(parts[2])
	}
	if err != nil {
		return "", 0, 0, fmt.Errorf("malformed key %q: %w", pk, err)
	}
	return parts[0], stage, n, nil
}

// sortedStages returns a job's stages by index.
func (j *jobRec) sortedStages() []*stageRec {
	out := make([]*stageRec, 0, len(j.Stages))
	for _, s := range j.Stages {
		out = append(out, s)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Index < out[b].Index })
	return out
}

func getS(it map[string]types.AttributeValue, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func getN(it map[string]types.AttributeValue, name string) int64 {
	if v, ok := it[name].(*types.AttributeValueMemberN); ok {
		n, _ := strconv.ParseInt(v.Value, 10, 64)
		return n
	}
	return 0
}

func getB(it map[string]types.AttributeValue, name string) bool {
	v, ok := it[name].(*types.AttributeValueMemberBOOL)
	return ok && v.Value
}

// getT reads a time stored as Unix milliseconds.
func getT(it map[string]types.AttributeValue, name string) time.Time {
	if n := getN(it, name); n != 0 {
		return time.UnixMilli(n)
	}
	return time.Time{}
}
