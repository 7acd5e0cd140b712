// Package runner hosts all of Batchwork in one process against an AWS
// endpoint: it creates the resources, serves the API on loopback, runs
// executor slots and the sweep on a ticker. The handlers are the same Go
// functions the Lambda mains wrap.
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/internal/iamrec"
	"github.com/batchwork/batchwork/shared/api"
	"github.com/batchwork/batchwork/shared/awsconf"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/ddbwire"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/events"
	"github.com/batchwork/batchwork/shared/gcfloor"
	"github.com/batchwork/batchwork/shared/lazylog"
	"github.com/batchwork/batchwork/shared/lineage"
	"github.com/batchwork/batchwork/shared/localauth"
	"github.com/batchwork/batchwork/shared/logs"
	"github.com/batchwork/batchwork/shared/provision"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/sqswire"
	"github.com/batchwork/batchwork/shared/tuning"
)

// OwnerHeader carries the caller's identity to the local runner, which
// trusts it only from a request that carries the run's token
// (localauth.Require) and comes from loopback (LoopbackOwner).
const OwnerHeader = "X-Batchwork-Owner"

// Options configure a local runner.
type Options struct {
	AWS    aws.Config
	Prefix string // resource name prefix
	Listen string // API address, default 127.0.0.1:0
	// Slots is the number of executor slots (0: 4). With ControlOnly set,
	// the runner runs no executor at all, so separate executor processes
	// can serve its queues.
	Slots       int
	ControlOnly bool
	SweepEvery  time.Duration
	Control     control.Config
	Registry    *batchwork.Registry
	Log         *slog.Logger
	// PollWait is the executors' long-poll wait (default tuning.ReceiveWait;
	// the timer consumer waits 20 s by default).
	PollWait time.Duration
	// Resources, when set, are used as they are (a deployed stack's, see
	// provision.FromStack) instead of deploying the data plane as Prefix.
	Resources *provision.Resources
	// TokenFile, when set, is where New writes the run's API token, and
	// TokenDir, when TokenFile is not set, the directory of the per-port
	// file (localauth.File) the batchwork CLI looks for. Neither: the
	// token stays in memory (Runner.Token), for callers in this process.
	TokenFile, TokenDir string
	// ExecDir is the directory of programs the executor's exec stages may
	// run (executor.Runner.ExecDir; execstage.ExecDirFromEnv reads
	// BATCHWORK_EXEC_DIR); empty: none.
	ExecDir string
	// LogFile is the JSON-lines file this run's logs go to (Log's, and any
	// executor process's that writes there): GET /jobs/{id}/logs reads a
	// job's lines from it (shared/logs.File), unless Control.Logs is set.
	// Empty: the route answers 501.
	LogFile string
	// Lineage is where OpenLineage run events go (shared/lineage); nil:
	// as the environment says (OPENLINEAGE_URL, ...), as in the deployed
	// functions.
	Lineage *lineage.Config
}

// Runner is a running local installation.
type Runner struct {
	Resources provision.Resources
	Service   *control.Service
	Blob      *blob.Store
	Store     *dynamo.Store
	Queue     *queue.Queue
	Executor  *executor.Runner
	URL       string // API base URL
	// Token is the run's API token, and TokenFile where New wrote it
	// ("" if nowhere).
	Token, TokenFile string
	// OnTimer, when set, is called for each timer message RunTimers
	// handled, with the time its batch was received and its error (nil:
	// done with). The bench measures firing with it.
	OnTimer func(body string, received time.Time, err error)

	opts Options
	srv  *http.Server
	ln   net.Listener
}

// New creates the resources and wires the components; Run starts them.
func New(ctx context.Context, o Options) (*Runner, error) {
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	if o.Slots == 0 {
		o.Slots = 4
	}
	if o.SweepEvery == 0 {
		o.SweepEvery = 10 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	// Per-task loggers format their attributes only if they log.
	o.Log = slog.New(lazylog.Wrap(o.Log.Handler()))
	awsconf.Harden(&o.AWS)
	gcfloor.Set() // the control plane's and executors' live heap is small
	if o.Control.Meter == nil {
		// Each job's AWS requests, counted as they are made (shared/cost).
		o.Control.Meter = control.NewMeter()
		o.Control.Meter.Install(&o.AWS)
	}
	s3opt := awsconf.S3Options(o.AWS)
	var res provision.Resources
	var err error
	if o.Resources != nil {
		res = *o.Resources
	} else if res, err = provision.Create(ctx, o.AWS, s3opt, o.Prefix, provision.Settings{
		// The sizes it was told to run get ready queues of their own.
		ExecutorSizes: o.Control.ExecutorSizes,
	}); err != nil {
		return nil, fmt.Errorf("create resources: %w", err)
	}
	o.Control.Queues = res.Queues
	if o.Control.Logs == nil && o.LogFile != "" {
		o.Control.Logs = logs.File{Path: o.LogFile}
	}
	if o.Control.InputsEndpoint == "" && o.AWS.BaseEndpoint != nil {
		// On an emulator, callers upload their inputs through it
		// (GET /whoami tells them; `batchwork upload` does).
		o.Control.InputsEndpoint = *o.AWS.BaseEndpoint
	}
	if len(o.Control.ExecutorSizes) == 0 {
		// Its executor has no size (executor.Runner.Memory): it runs tasks
		// of every size, so a spec may ask for any.
		o.Control.ExecutorSizes = spec.ExecutorSizes
	}
	r := &Runner{Resources: res, opts: o}
	// The lean client (shared/ddbwire) unless BATCHWORK_DYNAMO_CLIENT=sdk.
	db, err := ddbwire.ForStore(o.AWS, os.Getenv(ddbwire.EnvClient))
	if err != nil {
		return nil, err
	}
	r.Store = dynamo.New(db, res.Table)
	r.Blob = blob.New(s3.NewFromConfig(o.AWS, s3opt), res.Bucket)
	// The lean client (shared/sqswire) unless BATCHWORK_SQS_CLIENT=sdk.
	sq, err := sqswire.ForQueues(o.AWS, os.Getenv(sqswire.EnvClient))
	if err != nil {
		return nil, err
	}
	r.Queue = queue.New(sq)
	r.Service = control.New(o.Control, r.Store, r.Queue, r.Blob, o.Log)
	if err := r.wireEvents(o, res); err != nil {
		return nil, err
	}
	r.Executor = &executor.Runner{CP: r.Service, Blob: r.Blob, Registry: executor.PublicRegistry(o.Registry), Log: o.Log, ExecDir: o.ExecDir}
	r.publishTaskNames(ctx)
	if r.Token, err = localauth.NewToken(); err != nil {
		return nil, err
	}
	if r.ln, err = net.Listen("tcp", o.Listen); err != nil {
		return nil, fmt.Errorf("listen %s: %w", o.Listen, err)
	}
	r.URL = "http://" + r.ln.Addr().String()
	// Loopback is no boundary (DNS rebinding, SSH port-forwards), so every
	// request must carry the run's token before the owner header counts.
	h := localauth.Require(r.Token, api.New(r.Service, LoopbackOwner, o.Log))
	r.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		// Every request is the api function's work (see iamrec).
		BaseContext: func(net.Listener) context.Context { return iamrec.WithFunction(context.Background(), iamrec.FnAPI) },
	}
	if err := r.writeToken(); err != nil {
		r.ln.Close()
		return nil, err
	}
	return r, nil
}

// writeToken leaves the token where Options say, for clients in other
// processes. The port is only known once listening (Listen may say :0),
// hence here.
// wireEvents publishes events to the bus the data plane deployed
// (shared/events), and their run events to the OpenLineage endpoint when
// one is set (shared/lineage).
func (r *Runner) wireEvents(o Options, res provision.Resources) error {
	lc := o.Lineage
	if lc == nil {
		c, err := lineage.ConfigFromEnv(os.Getenv)
		if err != nil {
			return err
		}
		lc = &c
	}
	var sinks []events.Sink
	if lc.Enabled() {
		sinks = append(sinks, lineage.NewSink(*lc, res.Table, r.Store, r.Blob, o.Log))
	}
	var bus events.Bus
	if res.EventBus != "" {
		bus = eventbridge.NewFromConfig(o.AWS)
	}
	if bus != nil || len(sinks) > 0 {
		r.Service.Events = events.NewPublisher(bus, res.EventBus, r.Store, sinks...)
	}
	return nil
}

func (r *Runner) writeToken() error {
	path := r.opts.TokenFile
	if path == "" && r.opts.TokenDir != "" {
		_, port, err := net.SplitHostPort(r.ln.Addr().String())
		if err != nil {
			return fmt.Errorf("token file: %w", err)
		}
		if path, err = localauth.File(r.opts.TokenDir, port); err != nil {
			return err
		}
	}
	if path == "" {
		return nil
	}
	if err := localauth.WriteFile(path, r.Token); err != nil {
		return err
	}
	r.TokenFile = path
	return nil
}

// ServeAPI serves the API until ctx ends.
func (r *Runner) ServeAPI(ctx context.Context) {
	go func() {
		<-ctx.Done()
		// While the port is still held, so no runner started after this
		// one on the same port can have written its own file yet.
		if r.TokenFile != "" {
			if err := localauth.RemoveIfOwn(r.TokenFile, r.Token); err != nil {
				r.opts.Log.Warn("token file", "err", err)
			}
		}
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.srv.Shutdown(shutdown)
	}()
	if err := r.srv.Serve(r.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		r.opts.Log.Error("api server", "err", err)
	}
}

// Run serves the API, runs the executor slots and the sweep until ctx ends,
// then drains the executors.
func (r *Runner) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		r.ServeAPI(ctx)
	}()
	go func() {
		defer wg.Done()
		r.RunTimers(ctx)
	}()
	go func() {
		defer wg.Done()
		ctx := iamrec.WithFunction(ctx, iamrec.FnSweep)
		tick := time.NewTicker(r.opts.SweepEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if _, err := r.Service.Sweep(ctx); err != nil && ctx.Err() == nil {
					r.opts.Log.Warn("sweep", "err", err)
				}
			}
		}
	}()
	var err error
	if r.opts.ControlOnly {
		<-ctx.Done()
	} else {
		err = r.Poller().Run(iamrec.WithFunction(ctx, iamrec.FnExecutor))
	}
	wg.Wait()
	return err
}

// Poller returns an executor host over the runner's queues.
func (r *Runner) Poller() *feed.Poller {
	q := r.Resources.Queues
	// Its executor has no size: it polls every size's queue too, each
	// weighted as the normal priority (control.Queues.Polled).
	queues, weights := q.Polled(0), []int{6, 3, 1}
	for len(weights) < len(queues) {
		weights = append(weights, 3)
	}
	return &feed.Poller{
		Handler: r.Executor, CP: r.Executor.CP, Queue: executorQueue{r.Queue}, Queues: queues, Weights: weights,
		Slots: r.opts.Slots, Wait: r.opts.PollWait, Log: r.opts.Log,
		// The same receive visibility the deployed executors use.
		Visibility: tuning.ReceiveVisibility,
	}
}

// RunTimers consumes the schedule timer queue until ctx ends, as the
// sweep function's event source mapping does on AWS: it long-polls, fires
// each batch (control.FireTimers) and deletes the messages handled. A
// failed message comes back after its visibility timeout.
//
// Batches are handled concurrently, up to timerBatches at once, the way
// concurrent Lambda invocations would: a batch waits up to a few seconds
// for its scheduled time (messages arrive early on purpose), and the next
// batch, due at the same instant, must not wait behind it. Several
// receivers poll at once, as Lambda's pollers do: a burst of a thousand
// firings is a hundred receives, and one receiver, at a receive every
// half second on a busy emulator, would take most of a minute.
func (r *Runner) RunTimers(ctx context.Context) {
	url := r.Resources.Queues.Timer
	if url == "" {
		return
	}
	// On AWS the sweep function's event source mapping receives and
	// deletes with the sweep's role, and the sweep fires the batch.
	ctx = iamrec.WithFunction(ctx, iamrec.FnSweep)
	wait := r.opts.PollWait
	if wait == 0 {
		wait = 20 * time.Second
	}
	t := &timerReceivers{r: r, url: url, wait: wait, sem: make(chan struct{}, timerBatches)}
	defer t.wg.Wait()
	t.active.Add(1)
	t.start(ctx, true)
}

// timerReceivers are the receives a runner keeps in flight on the timer
// queue: one always, and up to maxTimerReceivers while the queue is
// busy, as Lambda's pollers scale with a queue's backlog. An idle queue
// costs one long poll per wait, not eight: the local runner and every
// test environment run one, and eight idle polls on the emulator's SQS
// took a tenth of a core per environment.
type timerReceivers struct {
	r      *Runner
	url    string
	wait   time.Duration
	sem    chan struct{}
	wg     sync.WaitGroup
	active atomic.Int32
}

// start runs a receiver already counted in active; an extra one (not
// permanent) stops at its first empty receive.
func (t *timerReceivers) start(ctx context.Context, permanent bool) {
	t.wg.Add(1)
	go func() {
		defer func() { t.active.Add(-1); t.wg.Done() }()
		t.receive(ctx, permanent)
	}()
}

// grow adds a receiver, after a receive that found messages (more are
// likely waiting), unless maxTimerReceivers are in flight.
func (t *timerReceivers) grow(ctx context.Context) {
	if t.active.Add(1) > maxTimerReceivers {
		t.active.Add(-1)
		return
	}
	t.start(ctx, false)
}

func (t *timerReceivers) receive(ctx context.Context, permanent bool) {
	r, wg, sem := t.r, &t.wg, t.sem
	for ctx.Err() == nil {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		msgs, err := r.Queue.Receive(ctx, t.url, timerReceiveMax, t.wait, tuning.SweepTimeout)
		if err != nil || len(msgs) == 0 {
			<-sem
			if err != nil && ctx.Err() == nil {
				r.opts.Log.Warn("receive timers", "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
			if !permanent && err == nil {
				return
			}
			continue
		}
		t.grow(ctx)
		received := time.Now()
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			r.fireTimers(ctx, t.url, msgs, received)
		}()
	}
}

// maxTimerReceivers is how many receives a runner keeps in flight on a
// busy timer queue.
const maxTimerReceivers = 8

// timerReceiveMax is a timer receive's batch: SQS's most.
const timerReceiveMax = 10

// timerBatches bounds the timer batches one runner handles at once. A
// batch holds its slot until its firings are done, which under a burst
// (a thousand schedules at one instant) is long after their jobs were
// created, so the bound is generous: a goroutine per batch is cheap.
const timerBatches = 500

func (r *Runner) fireTimers(ctx context.Context, url string, msgs []queue.Message, received time.Time) {
	bodies := make([]string, len(msgs))
	for i, m := range msgs {
		bodies[i] = m.Body
	}
	var done []string
	for i, err := range r.Service.FireTimers(ctx, bodies) {
		if r.OnTimer != nil {
			r.OnTimer(bodies[i], received, err)
		}
		if err == nil || errors.Is(err, control.ErrNotTimer) {
			done = append(done, msgs[i].Receipt)
			continue
		}
		r.opts.Log.Warn("timer", "message_id", msgs[i].ID, "err", err)
	}
	if len(done) > 0 {
		if err := r.Queue.DeleteBatch(ctx, url, done); err != nil && ctx.Err() == nil {
			r.opts.Log.Warn("delete timers", "err", err)
		}
	}
}

// executorQueue is the poller's queue, attributed to the executor function
// (see iamrec) when the caller's context names no function: the poller
// deletes finished messages on a context of its own, and tests run pollers
// on plain contexts. On AWS the Lambda executor's event source mapping
// receives and deletes with the executor's role, and a Fargate executor
// does so itself. Embedding keeps any method the poller may come to need
// (unattributed until it is listed here).
type executorQueue struct{ *queue.Queue }

func executorCtx(ctx context.Context) context.Context {
	if iamrec.FunctionOf(ctx) == "" {
		return iamrec.WithFunction(ctx, iamrec.FnExecutor)
	}
	return ctx
}

func (e executorQueue) Receive(ctx context.Context, url string, maxN int, wait, visibility time.Duration) ([]queue.Message, error) {
	return e.Queue.Receive(executorCtx(ctx), url, maxN, wait, visibility)
}

func (e executorQueue) ChangeVisibility(ctx context.Context, url, receipt string, d time.Duration) error {
	return e.Queue.ChangeVisibility(executorCtx(ctx), url, receipt, d)
}

func (e executorQueue) ChangeVisibilityBatch(ctx context.Context, url string, receipts []string, d time.Duration) ([]string, error) {
	return e.Queue.ChangeVisibilityBatch(executorCtx(ctx), url, receipts, d)
}

func (e executorQueue) DeleteBatch(ctx context.Context, url string, receipts []string) error {
	return e.Queue.DeleteBatch(executorCtx(ctx), url, receipts)
}
