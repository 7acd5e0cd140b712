package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/batchwork/batchwork/internal/emulator"
	"github.com/batchwork/batchwork/internal/loadmodel"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/ddbwire"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/runner"
)

// benchEnv is what each workload runs on: an emulator of its own, a
// runner on it whose AWS requests rec counts, and a watcher that reads
// job status through uncounted clients (the bench's polling is the
// harness, not the cost of running tasks).
type benchEnv struct {
	emu *emulator.Emulator
	// cfg is the emulator's config, uncounted.
	cfg     aws.Config
	rec     *loadmodel.Recorder
	r       *runner.Runner
	watcher *control.Service

	cancel context.CancelFunc
	done   chan error
}

// newBenchEnv starts the emulator and makes a runner of opts on it (its
// AWS config and, when unset, its log are set here), its requests counted
// by rec unless uncounted. The runner is not running yet (start), so a
// workload can hook it first; close stops it and the emulator.
func newBenchEnv(ctx context.Context, opts runner.Options, uncounted bool) (*benchEnv, error) {
	emu, err := startEmulator(ctx)
	if err != nil {
		return nil, err
	}
	e := &benchEnv{emu: emu, cfg: emu.AWSConfig(), rec: &loadmodel.Recorder{}}
	opts.AWS = e.cfg
	if !uncounted {
		opts.AWS = e.cfg.Copy()
		e.rec.Install(&opts.AWS)
	}
	if opts.Log == nil {
		opts.Log = discardLog()
	}
	if e.r, err = runner.New(ctx, opts); err != nil {
		emu.Stop()
		return nil, err
	}
	if !uncounted {
		if err := e.rec.DescribeTable(ctx, dynamodb.NewFromConfig(e.cfg), e.r.Resources.Table); err != nil {
			emu.Stop()
			return nil, err
		}
	}
	db, err := ddbwire.ForStore(e.cfg, os.Getenv(ddbwire.EnvClient))
	if err != nil {
		emu.Stop()
		return nil, err
	}
	e.watcher = control.New(control.Config{Queues: e.r.Resources.Queues}, dynamo.New(db, e.r.Resources.Table), nil, nil, discardLog())
	return e, nil
}

// start runs the runner until close.
func (e *benchEnv) start(ctx context.Context) {
	runCtx, cancel := context.WithCancel(ctx)
	e.cancel, e.done = cancel, make(chan error, 1)
	go func() { e.done <- e.r.Run(runCtx) }()
}

// close stops the runner, then the emulator.
func (e *benchEnv) close() {
	if e.cancel != nil {
		e.cancel()
		<-e.done
	}
	e.emu.Stop()
}

func discardLog() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }

// runJob submits spec as the bench's owner under key and waits for the
// job to end, reading its status every poll, for at most within. took is
// the job's wall time: from its submission to its own end time (to now,
// should it have none).
func runJob(ctx context.Context, r *runner.Runner, watcher *control.Service, key string, spec []byte, within, poll time.Duration) (st control.JobStatus, took time.Duration, err error) {
	start := time.Now()
	res, err := r.Service.Submit(ctx, control.SubmitRequest{Owner: "bench", IdempotencyKey: key, Spec: spec})
	if err != nil {
		return st, 0, err
	}
	if st, err = waitEvery(ctx, watcher, res.JobID, within, poll); err != nil {
		return st, 0, err
	}
	took = time.Since(start)
	if st.Ended != nil {
		took = st.Ended.Sub(start)
	}
	return st, took, nil
}
