package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/batchwork/batchwork/examples/wordcount"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/ddbwire"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/principal"
	"github.com/batchwork/batchwork/shared/runner"
)

// The skewed word count (issue 29): the same word count (a map emitting
// every occurrence, wordcount.MapEach, and a summing reduce with skew:
// combinable) over text of one size twice, once with Zipf-distributed
// words and once with one word making half of the words (its partition
// then holds half of the shuffle). Its figure: the skewed run's wall time
// over the even run's, which should stay under skewTarget.
var (
	skewMB       = flag.Int("skew-mb", 12, "MB of text of each run of the skewed word count (0: skip)")
	skewSplit    = flag.Int64("skew-split", 1<<20, "bytes per map task of the skewed word count")
	skewReducers = flag.Int("skew-reducers", 16, "reducers of the skewed word count")
	skewOff      = flag.Bool("skew-off", false, "also run the skewed text without skew: (what splitting saves)")
)

// skewTarget is the bound on the skewed run's wall time, in times
// the even run's.
const skewTarget = 1.5

func runSkew(mb int, split int64, reducers, slots int) error {
	ctx := context.Background()
	emu, err := startEmulator(ctx)
	if err != nil {
		return err
	}
	defer emu.Stop()
	cfg := emu.AWSConfig()
	reg := batchwork.NewRegistry()
	wordcount.Register(reg)
	r, err := runner.New(ctx, runner.Options{
		AWS: cfg, Prefix: fmt.Sprintf("bench-skew-%d", time.Now().Unix()), Slots: slots, Registry: reg,
		Log: slog.New(slog.NewJSONHandler(io.Discard, nil)), SweepEvery: time.Minute,
	})
	if err != nil {
		return err
	}
	db, err := ddbwire.ForStore(cfg, os.Getenv(ddbwire.EnvClient))
	if err != nil {
		return err
	}
	watcher := control.New(control.Config{Queues: r.Resources.Queues}, dynamo.New(db, r.Resources.Table), nil, nil, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	defer func() { cancel(); <-done }()

	size := mb * 1e6
	prefix := blob.InputsPrefix(principal.Key("bench"))
	if err := r.Blob.PutIfAbsent(ctx, prefix+"skew/even/text.txt", wordcount.Corpus(11, size)); err != nil {
		return err
	}
	if err := r.Blob.PutIfAbsent(ctx, prefix+"skew/hot/text.txt", wordcount.HotCorpus(11, size, "hotword")); err != nil {
		return err
	}
	// A first job on a fresh emulator and runner is slower (connections,
	// the emulator's first requests): an untimed one goes first.
	if err := r.Blob.PutIfAbsent(ctx, prefix+"skew/warm/text.txt", wordcount.Corpus(3, 1e6)); err != nil {
		return err
	}
	warm, err := r.Service.Submit(ctx, control.SubmitRequest{Owner: "bench", IdempotencyKey: "bench-skew-warm",
		Spec: wordcount.SkewSpec("skew-warm", "inputs:skew/warm/", split, reducers, true, 1)})
	if err != nil {
		return err
	}
	if _, err := waitEvery(ctx, watcher, warm.JobID, 20*time.Minute, 100*time.Millisecond); err != nil {
		return err
	}
	// minBytes: a tenth of the data, so only a partition far over an even
	// share (1/reducers) is split at this size.
	minBytes := int64(size / 10)
	var took [3]time.Duration
	var tasks [3]int
	runs := []string{"even", "hot"}
	if *skewOff {
		runs = append(runs, "hot")
	}
	for i, name := range runs {
		start := time.Now()
		res, err := r.Service.Submit(ctx, control.SubmitRequest{Owner: "bench", IdempotencyKey: fmt.Sprintf("bench-skew-%d", i),
			Spec: wordcount.SkewSpec(fmt.Sprintf("skew-%s-%d", name, i), "inputs:skew/"+name+"/", split, reducers, i < 2, minBytes)})
		if err != nil {
			return err
		}
		st, err := waitEvery(ctx, watcher, res.JobID, 20*time.Minute, 100*time.Millisecond)
		if err != nil {
			return err
		}
		if st.State != "SUCCEEDED" {
			return fmt.Errorf("skewed word count %s: %s: %s", name, st.State, st.Error)
		}
		took[i] = time.Since(start)
		if st.Ended != nil {
			took[i] = st.Ended.Sub(start)
		}
		tasks[i] = st.Stages[len(st.Stages)-1].Total
	}
	ratio := took[1].Seconds() / took[0].Seconds()
	verdict := fmt.Sprintf("within the %.1fx target", skewTarget)
	if ratio > skewTarget {
		verdict = fmt.Sprintf("FAIL, over the %.1fx target", skewTarget)
	}
	fmt.Printf("skewed word count: %d MB of text, map tasks of %d MiB emitting every word, %d reducers (skew: combinable), %d slots: even words %.1fs (%d reduce tasks), one word half of them %.1fs (%d reduce tasks: its partition split): %.2fx, %s\n",
		mb, split>>20, reducers, slots, took[0].Seconds(), tasks[0], took[1].Seconds(), tasks[1], ratio, verdict)
	if *skewOff {
		fmt.Printf("  the skewed text without skew: %.1fs (%.2fx the even run)\n", took[2].Seconds(), took[2].Seconds()/took[0].Seconds())
	}
	return nil
}
