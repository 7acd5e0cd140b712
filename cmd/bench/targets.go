package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/batchwork/batchwork/cmd/bench/sweepshare"
	"github.com/batchwork/batchwork/internal/loadmodel"
	"github.com/batchwork/batchwork/shared/tuning"
)

// The no-op throughput job's targets (issue 31): AWS requests per task
// (claim, commit and their shares of batched counts and SQS batches; the
// pollers' requests during the run and the settling sweep's included, the
// sweep's walks charged for the job's time: sweepshare), and throughput
// against the emulator floor, which only a quiet machine measures (the
// floor's probe and the job share the cores differently under load).
const (
	maxRequestsPerNoOp = 2.5
	minFloorShare      = 0.95
)

// printRequestsVerdict prints the requests per no-op task against
// maxRequestsPerNoOp, with the sweep's walks of the due index charged for
// the job's time walked as deployed (sweepshare), beside the whole count.
func printRequestsVerdict(snap loadmodel.Snapshot, tasks int, walked time.Duration) {
	sh := sweepshare.Of(snap, walked, tuning.SweepRate)
	rpt := sh.Charged() / float64(tasks)
	fmt.Printf("  requests per no-op task %.2f (target <= %.1f): %s\n", rpt, maxRequestsPerNoOp, met(rpt <= maxRequestsPerNoOp))
	fmt.Printf("    %s\n", sh.Describe(tasks))
}

// floorVerdict is the throughput's verdict against minFloorShare of the
// floor, with the machine's load average beside it.
func floorVerdict(rate, floor float64) string {
	load := ""
	if l, ok := loadAverage(); ok {
		load = fmt.Sprintf(", load average %.1f: only a quiet machine's ratio speaks for the target", l)
	}
	return fmt.Sprintf("target >= %.0f%%: %s%s", 100*minFloorShare, met(rate >= minFloorShare*floor), load)
}

// loadAverage is the machine's one-minute load average, where the system
// shows it (/proc/loadavg).
func loadAverage() (float64, bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	l, err := strconv.ParseFloat(f[0], 64)
	return l, err == nil
}
