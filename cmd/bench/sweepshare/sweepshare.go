// Package sweepshare is the bench's accounting of the sweep's walk of the
// due index in a job's requests.
//
// Every sweep run reads the index: one Scan while it is small, else a
// Query per shard besides (dynamo.DueShards, shared/control/sweep:
// Sweeper.Sweep). A deployment runs it on a schedule (tuning.SweepRate,
// the construct's default), so the walk is a fixed cost of the deployment
// per unit of time, not a cost of each job. The bench counts a job's
// requests from its submission to its end, plus one settling sweep
// (cmd/bench/settle.go) that does the work the job leaves for the sweep;
// that sweep's walk, and any walk of the runner's own sweep ticker within
// the job, would charge a job of a few seconds a whole walk or two. A job
// is charged the walks a deployed schedule makes over its time instead, at
// the walk's most: a Scan and DueShards queries per SweepRate, pro rata.
// Everything else a sweep does for the job (its items, the ready markers
// it reads and removes, the dead-letter and schedule looks) stays charged
// in full.
package sweepshare

import (
	"fmt"
	"strings"
	"time"

	"github.com/batchwork/batchwork/internal/loadmodel"
	"github.com/batchwork/batchwork/shared/dynamo"
)

// Share is a job's requests with the sweep's walk charged pro rata.
type Share struct {
	// Whole is every request counted.
	Whole int
	// Walk is the due index's reads among them (scans and queries): the
	// walks of the sweep runs counted.
	Walk int
	// Walked is the job's time, and Interval the deployed sweep's period.
	Walked, Interval time.Duration
}

// Of is the share of snap's requests that a job lasting walked owes,
// with the deployed sweep running every interval.
func Of(snap loadmodel.Snapshot, walked, interval time.Duration) Share {
	sh := Share{Walked: walked, Interval: interval}
	for _, n := range snap.Totals().Requests {
		sh.Whole += n
	}
	// Only the walk reads the index; the writes of the items in it
	// touch its keys too, as writes.
	for k, st := range snap.Keys {
		if k.Service == "DynamoDB" && strings.HasSuffix(k.Resource, "/"+dynamo.DueIndex) {
			sh.Walk += st.Reads
		}
	}
	return sh
}

// walkMost is a sweep run's most reads of the index: a Scan that found
// it large, then a Query per shard.
const walkMost = dynamo.DueShards + 1

// WalkCharged is the walk queries the job is charged: a deployed
// schedule's walks over the job's time.
func (sh Share) WalkCharged() float64 {
	if sh.Interval <= 0 {
		return float64(sh.Walk)
	}
	return float64(walkMost) * sh.Walked.Seconds() / sh.Interval.Seconds()
}

// Charged is the requests charged to the job: Whole with the counted
// walks replaced by WalkCharged.
func (sh Share) Charged() float64 { return float64(sh.Whole-sh.Walk) + sh.WalkCharged() }

// Describe says both counts, per task, for a reader to see what the walk
// weighs.
func (sh Share) Describe(tasks int) string {
	return fmt.Sprintf("%.2f a task of %d requests counted; of those, the sweep's walks of the due index (at most %d reads a walk): %d reads counted, %.1f charged (%.1fs of the job over a walk every %s, as deployed)",
		float64(sh.Whole)/float64(tasks), sh.Whole, walkMost, sh.Walk, sh.WalkCharged(), sh.Walked.Seconds(), sh.Interval)
}
