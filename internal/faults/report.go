package faults

import (
	"context"
	"time"
)

// ReportEvery calls report with the injector's cumulative Counts every
// period until ctx ends, and once more then, so a process that stops
// cleanly reports everything and one that is killed loses at most its
// last period. A chaos harness sums the last report of every process. A
// nil injector reports nothing: ReportEvery returns at once.
func ReportEvery(ctx context.Context, inj *Injector, period time.Duration, report func(map[string]int)) {
	if inj == nil || period <= 0 {
		return
	}
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			report(inj.Counts())
			return
		case <-tick.C:
			report(inj.Counts())
		}
	}
}
