package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"slices"
	"time"

	"github.com/batchwork/batchwork/cmd/bench/emuprobe"
	sortex "github.com/batchwork/batchwork/examples/sort"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/principal"
	"github.com/batchwork/batchwork/shared/runner"
	"github.com/batchwork/batchwork/shared/tuning"
)

// The sort benchmark (examples/sort): records of 100 bytes with 10-byte
// keys, put in S3 as objects of up to 64 MB, sorted by a job whose map
// stage reads them (a map task per split) into a range shuffle and whose
// reducers write them in key order; the outputs are then validated as
// valsort does (order across the partitions, count, checksum). Its
// figures: the job's wall time on the emulator, and the AWS requests it
// made (counted as the throughput job's are) priced per TB.
//
// Per TB is a linear extrapolation of the requests counted: at the same
// split size and bytes per reducer, a TB has proportionally more map
// tasks, reducers, PUTs and control-plane writes. One term is not linear:
// every reducer reads the header and its slice of every map task's run,
// 2 × maps × reducers GETs; the bench prints that term at a TB too.

// The benchmark's flags, beside it: 50 MB sorts in 8 s on the emulator
// on 2 cores, 24 s when they are busy (100 MB in 27 to 46 s).
var (
	sortMB       = flag.Int("sort-mb", 50, "MB of 100-byte records the sort benchmark sorts (0: skip)")
	sortSplit    = flag.Int64("sort-split", 16<<20, "bytes per map task of the sort benchmark")
	sortReducers = flag.Int("sort-reducers", 8, "reducers of the sort benchmark")
)

// sortBench is the benchmark's shape.
type sortBench struct {
	mb       int   // data to sort, MB (10^6 bytes)
	split    int64 // bytes per map task
	reducers int
	slots    int
}

func runSort(b sortBench) error {
	ctx := context.Background()
	reg := batchwork.NewRegistry()
	sortex.Register(reg)
	e, err := newBenchEnv(ctx, runner.Options{
		Prefix: fmt.Sprintf("bench-sort-%d", time.Now().Unix()), Slots: b.slots, Registry: reg, SweepEvery: time.Minute,
	}, false)
	if err != nil {
		return err
	}
	defer e.close()
	e.start(ctx)
	r, rec, watcher := e.r, e.rec, e.watcher

	// The input, not timed nor counted.
	records := uint64(b.mb) * 1e6 / sortex.RecordLen
	const perObject = 640_000 // 64 MB
	prefix := blob.InputsPrefix(principal.Key("bench")) + "sort/"
	objects := 0
	for first := uint64(0); first < records; first += perObject {
		data := sortex.Generate(first, min(perObject, records-first))
		if err := r.Blob.PutIfAbsent(ctx, fmt.Sprintf("%sin-%05d", prefix, objects), data); err != nil {
			return err
		}
		objects++
	}
	bytesIn := int64(records) * sortex.RecordLen

	rec.Reset()
	cpu0 := emuprobe.CPUTime()
	st, elapsed, err := runJob(ctx, r, watcher, "bench-sort", sortex.Spec("sort", "inputs:sort/", b.split, b.reducers), 20*time.Minute, 100*time.Millisecond)
	if err != nil {
		return err
	}
	snap := rec.Snapshot()
	cpu := emuprobe.CPUTime() - cpu0
	if st.State != "SUCCEEDED" {
		return fmt.Errorf("sort job %s: %s", st.State, st.Error)
	}
	maps := st.Stages[0].Total

	// Validation, not timed.
	m, err := blob.ReadManifest(ctx, r.Blob, st.Manifest)
	if err != nil {
		return err
	}
	var outs []domain.Output
	if err := blob.EachManifestOutput(ctx, r.Blob, m, func(o domain.Output) error { outs = append(outs, o); return nil }); err != nil {
		return err
	}
	slices.SortFunc(outs, func(a, b domain.Output) int { return a.Partition - b.Partition })
	var v sortex.Validator
	for _, o := range outs {
		raw, err := r.Blob.Get(ctx, o.Key)
		if err != nil {
			return err
		}
		if err := v.Add(bytes.NewReader(raw), fmt.Sprintf("partition %d", o.Partition)); err != nil {
			return fmt.Errorf("sort output invalid: %w", err)
		}
	}
	if want := sortex.Summarize(0, records); v.Summary != want {
		return fmt.Errorf("sort output holds %d records, checksum %x; generated %d, %x", v.Records, v.Checksum, want.Records, want.Checksum)
	}

	fmt.Printf("sort: %d MB (%d records of 100 bytes) in %d objects, %d map tasks of %d MiB x %d reducers, %d slots: %s in %.1fs (%.1f MB/s); validated: order across partitions, count, checksum %x\n",
		b.mb, records, objects, maps, b.split>>20, b.reducers, b.slots, st.State, elapsed.Seconds(), float64(bytesIn)/1e6/elapsed.Seconds(), v.Checksum)
	printRequests(snap, maps+b.reducers, "task")
	// costOf prices per million of its unit: one unit, the job, is the
	// job's cost times a million.
	c := costOf(snap, 1, lambdaModel{batch: 1})
	perTB := 1e12 / float64(bytesIn) / 1e6
	fmt.Printf("  cost per TB, requests only, extrapolated linearly from this run (us-east-1 list prices of %s): DynamoDB %s, SQS %s, S3 %s; %s in all\n",
		PricesDate, usd(c.dynamo*perTB), usd(c.sqs*perTB), usd(c.s3*perTB), usd(c.beforeCompute()*perTB))
	// The maps x reducers term at a TB, sized as a TB would be: map
	// tasks of the most a map task may sort, as many reducers.
	tasks := 1e12 / float64(tuning.MaxTaskOutput)
	gets := 2 * tasks * tasks
	fmt.Printf("  not linear: every reducer GETs the header and its slice of every run; at a TB in map tasks of %d MiB (the most one may sort) and as many reducers, 2 x %.0f x %.0f = %.3g GETs, %s (fewer with headers cached per host)\n",
		tuning.MaxTaskOutput>>20, tasks, tasks, gets, usd(gets*prices.S3Tier2/1000))
	fmt.Printf("  compute is not in these: %.1f s of bench-process CPU (executors reading, sorting, merging and writing; the control plane), %.1f CPU-hours per TB linearly\n",
		cpu.Seconds(), cpu.Seconds()*1e12/float64(bytesIn)/3600)
	return nil
}
