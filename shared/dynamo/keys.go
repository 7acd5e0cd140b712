package dynamo

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/principal"
)

// The storage layout, in one place. One table holds every record; the
// partition key spreads load:
//
//	IDEM#<owner hash>#<key>         IDEM        idempotency record -> job id (owner hash: ownerKey)
//	JOB#<job>                       JOB         job: spec + status
//	JOB#<job>                       STAGE#<nn>  stage: status, totals (one Query reads all stages)
//	JOB#<job>                       SLOTS       the job's maxConcurrency slots (slots.go)
//	CNT#<job>#<stage>#<shard>       CNT         completion counter shard (own partition each)
//	TASK#<job>#<stage>#<bucket>     <partition> task, TaskBucket tasks per partition key
//	RDY#<job>#<stage>#<bucket>      <lo>#<hi>   ready marker: a materialized chunk's place in the sweep index (ready.go)
//	OWN#<owner hash>                JOB#<job>   owner's job index: name, status, times (newest first by job id)
//	OWN#<owner hash>                SLOTS       the owner's concurrency slots, across its jobs (slots.go)
//	ATT#<job>#<stage>#<bucket>      <part>#<att> how an attempt ended without committing (one per attempt)
//	EVT#<job>#<shard>               <ms>#2#<stage>#<part>#<att>  the same, ordered by time for the job's timeline
//	TASKNAMES                       TASKNAMES   the task catalog: names executors published (tasknames.go)
//	OBX#<event id>                  OBX         an event not yet put on the bus (outbox.go)
//
// Job ids sort by creation time, so a descending Query of an owner's index
// lists their jobs newest first without another index. Attempt-end records
// are written twice in one transaction: by task (for a task's attempt
// history) and by time (for the timeline), sharded EventShards ways so a
// retry storm never makes one partition hot.
//
// The sweep index ("due") is sparse: an item carries gpk/due only while the
// sweep has something to check on it (a lease, a pending step). gpk spreads
// the index over DueShards partitions. A task enters it at its claim, not
// at its materialization (ready.go).
const (
	attrPK  = "pk"
	attrSK  = "sk"
	attrGPK = "gpk"
	attrDue = "due"

	// DueIndex is the sweep's GSI name.
	DueIndex = "due"
	// DueShards is the number of gpk values the sweep index is spread over.
	// Every task passes through the index (in at its claim, out at its
	// commit: about 3 index write units per task), so at 10,000 tasks a
	// second in one job the index takes some 30,000 WCU/s, and each shard
	// must stay under a partition's 1,000 (keys_load_test.go): 16 shards
	// took 2,685 WCU/s each (as DynamoDB Local reported transactions) when
	// tasks entered at materialization; 64 keep the hottest near 500. Items written under fewer shards keep their
	// gpk, which the sweep still reads: raising this needs no migration;
	// lowering it would.
	DueShards = 64
	// TaskBucket is how many tasks share a partition key: enough to list a
	// stage's tasks with few Queries, few enough that a bucket never runs hot.
	TaskBucket = 100
	// MaxShards caps a stage's completion counters: the stage's completion
	// check reads them all (two BatchGetItems at the cap).
	MaxShards = 128
	// tasksPerShard is the block of neighbouring partitions that share a
	// counter (ShardOf), and bounds how many commits share one below
	// MaxShards: each counter holds the set of partitions it counted
	// (count.go), which must stay near 1 KB for a count to cost 1 write
	// unit, and the fewer counts per counter, the further its write rate
	// stays below a partition's 1,000 WCU.
	tasksPerShard = 64
)

// ShardCount is the number of completion counters for a stage of n tasks.
func ShardCount(n int) int {
	s := (n + tasksPerShard - 1) / tasksPerShard
	return max(1, min(s, MaxShards))
}

// ShardOf is the counter a task's commit counts down: blocks of
// tasksPerShard neighbouring partitions share one, dealt round the
// stage's counters. Neighbours are sent together and commit at about the
// same time, so an executor's batched counts (control's count batcher)
// mostly find one counter per block; a counter per partition modulo the
// counter count spread every batch over as many counters as it had tasks.
func ShardOf(partition, shards int) int { return (partition / tasksPerShard) % shards }

// ShardSizes is how many of a stage's first total partitions each of its
// counters counts (ShardOf's inverse, summed).
func ShardSizes(total, shards int) []int {
	n := make([]int, shards)
	for lo := 0; lo < total; lo += tasksPerShard {
		n[ShardOf(lo, shards)] += min(tasksPerShard, total-lo)
	}
	return n
}

func idemPK(owner, key string) string { return "IDEM#" + ownerKey(owner) + "#" + key }

// ownerKey is an owner's part of a key (principal.Key: a hash, the same
// one the data bucket's inputs area uses). The owner itself is kept in the
// records' attributes.
func ownerKey(owner string) string { return principal.Key(owner) }

func jobPK(job string) string { return "JOB#" + job }

const (
	jobSK  = "JOB"
	idemSK = "IDEM"
	cntSK  = "CNT"
)

func stageSK(idx int) string { return fmt.Sprintf("STAGE#%02d", idx) }

func shardPK(job string, stage, shard int) string {
	return "CNT#" + job + "#" + strconv.Itoa(stage) + "#" + strconv.Itoa(shard)
}

func taskPK(r domain.TaskRef) string {
	return taskBucketPK(r.Job, r.Stage, r.Partition/TaskBucket)
}

func taskBucketPK(job string, stage, bucket int) string {
	return "TASK#" + job + "#" + strconv.Itoa(stage) + "#" + strconv.Itoa(bucket)
}

// taskSK is the partition's number in six digits, as "%06d" renders it
// (the claim and the commit render it per task: without fmt).
func taskSK(partition int) string {
	if partition < 0 || partition > 999999 {
		return fmt.Sprintf("%06d", partition)
	}
	var b [6]byte
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte('0' + partition%10)
		partition /= 10
	}
	return string(b[:])
}

// EventShards spreads a job's timeline records over this many partitions.
const EventShards = 8

func ownerPK(owner string) string { return "OWN#" + ownerKey(owner) }

// executorPK is an executor's liveness record (sort key executorSK).
func executorPK(id string) string { return "EXEC#" + id }

const executorSK = "EXEC"

// The task catalog is one item (tasknames.go).
const (
	taskNamesPK = "TASKNAMES"
	taskNamesSK = "TASKNAMES"
)

func ownerJobSK(job string) string { return "JOB#" + job }

func attemptPK(job string, stage, bucket int) string {
	return "ATT#" + job + "#" + strconv.Itoa(stage) + "#" + strconv.Itoa(bucket)
}

func attemptSK(partition, attempt int) string { return fmt.Sprintf("%06d#%03d", partition, attempt) }

func eventPK(job string, shard int) string { return "EVT#" + job + "#" + strconv.Itoa(shard) }

// EventKey orders a job's timeline: the event time in milliseconds, then a
// class that puts, within one millisecond, a job's submission before stage
// starts, task events, stage ends and the job's end. Timeline cursors hold
// such a key, so derived and stored events page together.
func EventKey(at time.Time, class int, rest string) string {
	k := fmt.Sprintf("%013d#%d", max(at.UnixMilli(), 0), class)
	if rest != "" {
		k += "#" + rest
	}
	return k
}

// Event classes of EventKey.
const (
	EventClassSubmitted  = 0
	EventClassStageStart = 1
	EventClassTask       = 2
	EventClassStageEnd   = 3
	EventClassJobEnd     = 4
)

func taskEventRest(ref domain.TaskRef, attempt int) string {
	return fmt.Sprintf("%02d#%06d#%03d", ref.Stage, ref.Partition, attempt)
}

func duePK(pk string) string {
	h := fnv.New32a()
	h.Write([]byte(pk))
	return "D#" + strconv.Itoa(int(h.Sum32()%DueShards))
}

// DueKind says what kind of record the sweep found.
type DueKind string

const (
	DueJob   DueKind = "job"
	DueStage DueKind = "stage"
	DueTask  DueKind = "task"
)

// DueItem is one record the sweep index says needs a look.
type DueItem struct {
	Kind  DueKind
	Job   string
	Stage int
	Task  domain.TaskRef
	// Event is an outbox record's event id (DueEvent; outbox.go).
	Event string
}

func parseDueKey(pk, sk string) (DueItem, error) {
	if it, ok := parseOutboxKey(pk, sk); ok {
		return it, nil
	}
	switch {
	case strings.HasPrefix(pk, "JOB#") && sk == jobSK:
		return DueItem{Kind: DueJob, Job: strings.TrimPrefix(pk, "JOB#")}, nil
	case strings.HasPrefix(pk, "JOB#") && strings.HasPrefix(sk, "STAGE#"):
		idx, err := strconv.Atoi(strings.TrimPrefix(sk, "STAGE#"))
		if err != nil {
			return DueItem{}, fmt.Errorf("stage key %q: %w", sk, err)
		}
		return DueItem{Kind: DueStage, Job: strings.TrimPrefix(pk, "JOB#"), Stage: idx}, nil
	case strings.HasPrefix(pk, "TASK#"):
		parts := strings.Split(strings.TrimPrefix(pk, "TASK#"), "#")
		p, err := strconv.Atoi(sk)
		if len(parts) != 3 || err != nil {
			return DueItem{}, fmt.Errorf("task key %q/%q is malformed", pk, sk)
		}
		st, err := strconv.Atoi(parts[1])
		if err != nil {
			return DueItem{}, fmt.Errorf("task key %q: %w", pk, err)
		}
		ref := domain.TaskRef{Job: parts[0], Stage: st, Partition: p}
		return DueItem{Kind: DueTask, Job: ref.Job, Stage: st, Task: ref}, nil
	}
	return DueItem{}, fmt.Errorf("unexpected key %q/%q in the sweep index", pk, sk)
}
