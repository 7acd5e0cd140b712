package dynamo

import (
	"testing"

	"github.com/batchwork/batchwork/shared/domain"
)

// indexUnitsPerTask is what one task writes to the sweep index, as the
// bench's load model measures it (DynamoDB's own ConsumedCapacity, on
// DynamoDB Local; README, Performance): the entry its claim puts, and the
// commit's removal of it in a transaction (2), plus its share of its
// chunk's ready marker (ready.go). Before the markers the entry was put at
// materialization (2, in a transaction) and moved by the claim (2): about
// 6. A change that adds
// index writes to the hot path must raise this, and this test then says
// whether DueShards still holds (integration/readymarkers_test.go checks
// the figure itself against DynamoDB Local).
const indexUnitsPerTask = 3.1

// The per-partition limits the load model holds the table to.
const (
	partitionWCU = 1000
	targetRate   = 10000 // tasks a second, in one job
)

// TestDueIndexHasNoHotShard places every task of a 100,000-task job (and
// of a job of many small stages) in the sweep index the way the store
// does, and checks that at 10,000 tasks a second the hottest index shard
// stays under a partition's write limit. With 16 shards it took 2,685
// WCU/s (268%): the load model's first hot key after the job item.
func TestDueIndexHasNoHotShard(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		stages int
		tasks  int // per stage
	}{
		{"one stage of 100,000", 1, 100000},
		{"50 stages of 2,000", 50, 2000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			perShard := map[string]int{}
			total := 0
			for st := range c.stages {
				for p := range c.tasks {
					ref := domain.TaskRef{Job: "j1a209b5892d0e32a60d0b", Stage: st, Partition: p}
					perShard[duePK(taskPK(ref)+taskSK(p))]++
					total++
				}
			}
			if len(perShard) != DueShards {
				t.Fatalf("tasks landed on %d index shards, want all %d", len(perShard), DueShards)
			}
			hottest, key := 0, ""
			for k, n := range perShard {
				if n > hottest {
					hottest, key = n, k
				}
			}
			wcu := float64(hottest) / float64(total) * targetRate * indexUnitsPerTask
			// 10% margin, for the hash's unevenness over other job ids.
			limit := 0.9 * partitionWCU
			if wcu > limit {
				t.Errorf("hottest index shard %s takes %d of %d tasks: %.0f WCU/s at %d tasks/s, over %.0f (%d shards)",
					key, hottest, total, wcu, targetRate, limit, DueShards)
			}
		})
	}
}
