package main

import (
	"context"
	"fmt"
	"time"

	"github.com/batchwork/batchwork/cmd/bench/emuprobe"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/runner"
)

// probeRepeated probes an emulator n times, with a runner of slots
// slots running (idle), and prints each probe: how much the ceilings
// move between probes on this machine.
func probeRepeated(n, slots int) error {
	ctx := context.Background()
	reg := batchwork.NewRegistry()
	e, err := newBenchEnv(ctx, runner.Options{Prefix: fmt.Sprintf("bench-probe-%d", time.Now().Unix()), Slots: slots, Registry: reg,
		SweepEvery: time.Minute}, true)
	if err != nil {
		return err
	}
	defer e.close()
	e.start(ctx)
	for i := range n {
		p := emuprobe.Run(ctx, e.cfg, emuprobe.Target{Table: e.r.Resources.Table, Bucket: e.r.Resources.Bucket, Slots: slots})
		l, _ := loadAverage()
		fmt.Printf("probe %d (load average %.1f): %s\n", i+1, l, p.Describe())
	}
	return nil
}
