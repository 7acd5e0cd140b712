package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/batchwork/batchwork/cmd/chaos/chaostasks"
	"github.com/batchwork/batchwork/cmd/chaos/check"
	"github.com/batchwork/batchwork/internal/emulator"
	"github.com/batchwork/batchwork/internal/emulator/localstack"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/localauth"
)

// Options configure a chaos run.
type Options struct {
	Jobs      int
	Executors int
	Slots     int           // per executor process
	KillEvery time.Duration // 0: no kills
	Faults    string        // BATCHWORK_FAULTS of every process ("" or "off": none)
	Lease     time.Duration // in every spec
	// MaxAttempts, when positive, is every spec's retry budget (the
	// examples' own is 3).
	MaxAttempts int
	Timeout     time.Duration // for the jobs of one run to end
	Seed        int64
	// CancelFraction of the jobs are cancelled through the API shortly
	// after their submission.
	CancelFraction float64
	// Sweep is the control plane's sweep interval.
	Sweep time.Duration
	// CheckEvery is how often the control plane's sweep looks at a
	// running stage, which is when it launches speculative copies.
	CheckEvery time.Duration
	// SplitAfter is how long an input task of a dynamicSplit stage runs
	// before its executor offers to split it (BATCHWORK_SPLIT_AFTER); 0:
	// the executors' default.
	SplitAfter time.Duration
	// LogDir receives every process's log lines (chaos.log).
	LogDir string
	// Progress receives a line per step; nil: none.
	Progress io.Writer
}

// harness runs the fault-free run and the chaos run on one emulator.
type harness struct {
	o                 Options
	emu               *emulator.Emulator
	cfg               aws.Config
	db                *dynamodb.Client
	s3                *s3.Client
	localBin, execBin string
	logw              *syncWriter
	rng               *rand.Rand
}

// run does the whole thing: both runs, the checker, the report.
func run(ctx context.Context, o Options) (*Report, error) {
	if err := os.MkdirAll(o.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("log dir: %w", err)
	}
	lf, err := os.Create(filepath.Join(o.LogDir, "chaos.log"))
	if err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	defer lf.Close()
	h := &harness{o: o, logw: &syncWriter{w: lf}, rng: rand.New(rand.NewPCG(uint64(o.Seed), 0x6368616f73))}
	h.progress("building batchwork-local and the chaos executor")
	if h.localBin, h.execBin, err = buildBinaries(ctx, filepath.Join(o.LogDir, "bin")); err != nil {
		return nil, err
	}
	h.progress("starting the emulator")
	if h.emu, err = emulator.StartWith(ctx, emulator.Options{Localstack: localstack.Start}); err != nil {
		return nil, fmt.Errorf("start the emulator: %w", err)
	}
	defer h.emu.Stop()
	h.cfg = h.emu.AWSConfig()
	h.db = dynamodb.NewFromConfig(h.cfg)
	h.s3 = s3.NewFromConfig(h.cfg, func(o *s3.Options) { o.UsePathStyle = true })
	h.progress("emulator: %s at %s, DynamoDB: %s at %s", h.emu.Kind, h.emu.URL, h.emu.Dynamo, h.emu.DynamoURL)

	stamp := strconv.FormatInt(time.Now().Unix(), 36)
	ref := &phase{name: "fault-free", prefix: "chaosref" + stamp}
	if err := h.start(ctx, ref); err != nil {
		return nil, err
	}
	if err := uploadCorpus(ctx, h.s3, ref.dep.Bucket); err != nil {
		ref.stopAll()
		return nil, err
	}
	works, err := workloads(o.Jobs, ref.dep.Bucket, settings{Lease: o.Lease, MaxAttempts: o.MaxAttempts})
	if err != nil {
		ref.stopAll()
		return nil, err
	}
	if err := h.execute(ctx, ref, works); err != nil {
		return nil, err
	}
	chaos := &phase{name: "chaos", prefix: "chaos" + stamp, chaos: true}
	if err := h.start(ctx, chaos); err != nil {
		return nil, err
	}
	// The same corpus into the chaos deployment's own inputs area: a spec
	// reads inputs from its installation's bucket (or an allowed one) only.
	if err := uploadCorpus(ctx, h.s3, chaos.dep.Bucket); err != nil {
		chaos.stopAll()
		return nil, err
	}
	if err := h.execute(ctx, chaos, works); err != nil {
		return nil, err
	}
	h.progress("checking")
	res, err := check.Run(ctx, h.checkInput(ref, chaos))
	if err != nil {
		return nil, fmt.Errorf("checker: %w", err)
	}
	rep := h.report(ref, chaos, res)
	rep.Recovery, err = h.recovery(ctx, chaos)
	if err != nil {
		return nil, err
	}
	return rep, nil
}

func (h *harness) progress(format string, args ...any) {
	if h.o.Progress != nil {
		fmt.Fprintf(h.o.Progress, "chaos: "+format+"\n", args...)
	}
}

// deployment is one installation of Batchwork on the emulator.
type deployment struct {
	check.Deployment
	API                           string
	High, Normal, Low, DLQ, Timer string
}

// phase is one run: a deployment, its processes and what they reported.
type phase struct {
	name   string
	prefix string
	chaos  bool // faults, kills and cancels
	dep    deployment
	api    *apiClient
	local  *proc

	mu     sync.Mutex
	execs  []*proc
	gen    int
	starts []check.Start
	// commits are the commits the executors logged, as they happened.
	commits []check.Commit
	// copies are the speculative copies' claims, as they were granted.
	copies []check.Copy
	// copyBy is the process that claimed each copy's attempt.
	copyBy map[check.Attempt]string
	// takeovers are the claims that took a dead executor's task over (the
	// new attempt), from the control plane's log line: a claim even when
	// its executor was killed before it started the task.
	takeovers []check.Start
	claims    map[string][]check.Start // by process
	// executors maps liveness ids (a task's holder) to processes.
	executors map[string]string
	// takenFrom is the holder (liveness id) of each attempt another
	// executor took over, and takenBy the process whose takeover created
	// an attempt.
	takenFrom map[check.Attempt]string
	takenBy   map[check.Attempt]string
	faults    map[string]map[string]int // by process: its last report
	crashes   []string                  // processes that died unasked
	ready     chan map[string]any
	// running gets an executor's name when it logs that it runs: it has
	// published its task names by then, so submits naming them pass.
	running chan string

	jobs []*jobRun
	// reruns are the reruns of the chaos run's succeeded rerun jobs.
	reruns []*jobRun
	kills  []kill
	// spared counts the kills skipped because every executor ran a
	// task's last attempts (victim.go).
	spared int
	wall   time.Duration
}

// jobRun is one job of a run.
type jobRun struct {
	w      workload
	id     string
	state  string
	cancel time.Duration // > 0: cancel this long after submission
	// cancelled: the cancel was accepted at cancelAt.
	cancelled bool
	cancelAt  time.Time
	// deleted: the job was deleted once it ended.
	deleted bool
	// redriven: the job failed and was redriven.
	redriven bool
	// rerun is the job's rerun (the rerun workload, once it succeeded).
	rerun *jobRun
}

// kill is one SIGKILL of an executor and the tasks it held then.
type kill struct {
	at   time.Time
	proc string
	held []check.TaskState
}

// onLine takes in what the processes report.
func (p *phase) onLine(l line) {
	switch l.fields["msg"] {
	case "task claimed":
		s, ok := parseStart(l.fields)
		if !ok {
			return
		}
		s.Proc = l.proc
		p.mu.Lock()
		p.starts = append(p.starts, s)
		p.claims[l.proc] = append(p.claims[l.proc], s)
		p.mu.Unlock()
	case "task committed":
		// Every commit as it happens: a second commit of a task would
		// overwrite the first's attempt in the task record.
		cm, ok := parseCommit(l.fields)
		if !ok {
			return
		}
		cm.Proc = l.proc
		p.mu.Lock()
		p.commits = append(p.commits, cm)
		p.mu.Unlock()
	case "speculative copy claimed":
		cm, ok := parseCommit(l.fields)
		hold, ok2 := l.fields["holder_attempt"].(float64)
		if !ok || !ok2 {
			return
		}
		cp := check.Copy{Job: cm.Job, Stage: cm.Stage, Partition: cm.Partition, Attempt: cm.Attempt, HolderAttempt: int(hold), At: cm.At, Proc: l.proc}
		p.mu.Lock()
		p.copies = append(p.copies, cp)
		p.copyBy[check.Attempt{Job: cp.Job, Stage: cp.Stage, Partition: cp.Partition, Attempt: cp.Attempt}] = l.proc
		p.mu.Unlock()
	case "faults injected":
		c, _ := l.fields["counts"].(map[string]any)
		counts := make(map[string]int, len(c))
		for k, v := range c {
			n, _ := v.(float64)
			counts[k] = int(n)
		}
		p.mu.Lock()
		p.faults[l.proc] = counts
		p.mu.Unlock()
	case "took over the task of a dead executor":
		// The dead holder's attempt and executor: evidence of who held an
		// attempt that never logged its start.
		task, _ := l.fields["task"].(string)
		ex, _ := l.fields["executor"].(string)
		att, _ := l.fields["attempt"].(float64)
		var a check.Attempt
		if _, err := fmt.Sscanf(strings.ReplaceAll(task, "/", " "), "%s %d %d", &a.Job, &a.Stage, &a.Partition); err == nil {
			a.Attempt = int(att)
			next := a
			next.Attempt++
			at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(l.fields["time"]))
			p.mu.Lock()
			p.takenFrom[a] = ex
			p.takenBy[next] = l.proc
			if !at.IsZero() {
				p.takeovers = append(p.takeovers, check.Start{Job: a.Job, Stage: a.Stage, Partition: a.Partition, Attempt: next.Attempt, At: at, Proc: l.proc})
			}
			p.mu.Unlock()
		}
	case "executor liveness on":
		if id, ok := l.fields["executor"].(string); ok {
			p.mu.Lock()
			p.executors[id] = l.proc
			p.mu.Unlock()
		}
	case "batchwork running":
		select {
		case p.ready <- l.fields:
		default:
		}
	case "executor running":
		select {
		case p.running <- l.proc:
		default: // a restarted executor's: nobody waits for it
		}
	}
}

func parseStart(f map[string]any) (check.Start, bool) {
	job, ok := f["job_id"].(string)
	num := func(k string) int { n, _ := f[k].(float64); return int(n) }
	at, ok2 := f["claimed_at"].(float64)
	if !ok || !ok2 {
		return check.Start{}, false
	}
	return check.Start{Job: job, Stage: num("stage"), Partition: num("partition"), Attempt: num("attempt"), At: time.UnixMilli(int64(at))}, true
}

func parseCommit(f map[string]any) (check.Commit, bool) {
	job, ok := f["job_id"].(string)
	num := func(k string) int { n, _ := f[k].(float64); return int(n) }
	at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(f["time"]))
	if _, hasAttempt := f["attempt"].(float64); !ok || !hasAttempt || err != nil {
		return check.Commit{}, false
	}
	return check.Commit{Job: job, Stage: num("stage"), Partition: num("partition"), Attempt: num("attempt"), At: at}, true
}

// awsEnv points a child at the emulator, with test credentials.
func (h *harness) awsEnv() []string {
	return append(baseEnv(),
		"AWS_ENDPOINT_URL="+h.emu.URL, "AWS_ENDPOINT_URL_DYNAMODB="+h.emu.DynamoURL,
		"AWS_REGION="+h.emu.Region, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test")
}

// faultEnv is a process's fault injection: the run's rules and a seed of
// its own, so two processes never inject the same sequence.
func (h *harness) faultEnv(p *phase, n int) []string {
	if !p.chaos || h.o.Faults == "" || h.o.Faults == "off" {
		return nil
	}
	return []string{"BATCHWORK_FAULTS=" + h.o.Faults, "BATCHWORK_FAULTS_SEED=" + strconv.FormatInt(h.o.Seed*1000+int64(n), 10)}
}

// start starts the control plane (batchwork-local -slots 0) and the
// executors of a run.
func (h *harness) start(ctx context.Context, p *phase) error {
	p.claims, p.faults, p.executors = map[string][]check.Start{}, map[string]map[string]int{}, map[string]string{}
	p.copyBy = map[check.Attempt]string{}
	p.running = make(chan string, h.o.Executors)
	p.ready, p.takenFrom, p.takenBy = make(chan map[string]any, 1), map[check.Attempt]string{}, map[check.Attempt]string{}
	h.progress("%s run: starting the control plane (%s)", p.name, p.prefix)
	// The API takes only requests with the run's token, which the runner
	// writes here (mode 0600) before its ready line.
	tokenFile := filepath.Join(h.o.LogDir, p.prefix+".token")
	args := []string{"-prefix", p.prefix, "-listen", "127.0.0.1:0", "-slots", "0", "-sweep", h.o.Sweep.String(), "-token-file", tokenFile}
	if h.o.CheckEvery > 0 {
		args = append(args, "-check-every", h.o.CheckEvery.String())
	}
	local, err := startProc(p.name+"/local", h.localBin, args, append(h.awsEnv(), h.faultEnv(p, 0)...), h.logw, p.onLine)
	if err != nil {
		return err
	}
	p.local = local
	var f map[string]any
	select {
	case f = <-p.ready:
	case <-local.done:
		return fmt.Errorf("%s: batchwork-local exited (%v) before it was ready:\n%s", p.name, local.waitErr, local.tail)
	case <-time.After(3 * time.Minute):
		local.kill()
		return fmt.Errorf("%s: batchwork-local not ready after 3 minutes:\n%s", p.name, local.tail)
	case <-ctx.Done():
		local.kill()
		return ctx.Err()
	}
	s := func(k string) string { v, _ := f[k].(string); return v }
	p.dep = deployment{Deployment: check.Deployment{Table: s("table"), Bucket: s("bucket")}, API: s("api"),
		High: s("queue_high"), Normal: s("queue_normal"), Low: s("queue_low"), DLQ: s("dlq"), Timer: s("queue_timer")}
	if p.dep.Table == "" || p.dep.API == "" || p.dep.High == "" {
		local.kill()
		return fmt.Errorf("%s: batchwork-local's ready line lacks the resources: %v", p.name, f)
	}
	token, err := localauth.ReadFile(tokenFile)
	if err != nil {
		local.kill()
		return fmt.Errorf("%s: batchwork-local's API token: %w", p.name, err)
	}
	p.api = newAPIClient(p.dep.API, token)
	p.execs = make([]*proc, h.o.Executors)
	for i := range p.execs {
		if p.execs[i], err = h.startExecutor(p); err != nil {
			p.stopAll()
			return err
		}
	}
	// Submit checks task names, which the executors publish as they
	// start: jobs submitted before would be refused.
	for range p.execs {
		select {
		case <-p.running:
		case <-time.After(time.Minute):
			p.stopAll()
			return fmt.Errorf("%s: the executors did not all start within a minute", p.name)
		case <-ctx.Done():
			p.stopAll()
			return ctx.Err()
		}
	}
	return nil
}

// startExecutor starts one executor process (cmd/chaos/executor) for the run.
func (h *harness) startExecutor(p *phase) (*proc, error) {
	p.mu.Lock()
	p.gen++
	n := p.gen
	p.mu.Unlock()
	d := p.dep
	env := append(h.awsEnv(),
		"BATCHWORK_TABLE="+d.Table, "BATCHWORK_BUCKET="+d.Bucket,
		"BATCHWORK_QUEUE_HIGH="+d.High, "BATCHWORK_QUEUE_NORMAL="+d.Normal, "BATCHWORK_QUEUE_LOW="+d.Low,
		"BATCHWORK_DLQ="+d.DLQ, "BATCHWORK_QUEUE_TIMER="+d.Timer, "BATCHWORK_SLOTS="+strconv.Itoa(h.o.Slots))
	if h.o.SplitAfter > 0 {
		env = append(env, "BATCHWORK_SPLIT_AFTER="+h.o.SplitAfter.String())
	}
	env = append(env, h.faultEnv(p, n)...)
	return startProc(fmt.Sprintf("%s/exec-%d", p.name, n), h.execBin, nil, env, h.logw, p.onLine)
}

// stopAll stops the run's processes: executors first, so they drain.
func (p *phase) stopAll() {
	var wg sync.WaitGroup
	for _, e := range p.execs {
		if e == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.stop(30 * time.Second)
		}()
	}
	wg.Wait()
	if p.local != nil {
		p.local.stop(10 * time.Second)
	}
}

// execute submits the jobs, cancels and kills as the run says, waits for
// every job to end, and stops the run's processes.
func (h *harness) execute(ctx context.Context, p *phase, works []workload) error {
	defer p.stopAll()
	p.jobs = make([]*jobRun, len(works))
	for i, w := range works {
		p.jobs[i] = &jobRun{w: w}
	}
	if p.chaos {
		h.planCancels(p)
	}
	h.progress("%s run: submitting %d jobs to %d executors x %d slots", p.name, len(works), h.o.Executors, h.o.Slots)
	start := time.Now()
	var cancels sync.WaitGroup
	if err := h.submitAll(ctx, p, &cancels); err != nil {
		return err
	}
	stopKills := make(chan struct{})
	killsDone := make(chan error, 1)
	go func() { killsDone <- h.killLoop(ctx, p, stopKills) }()
	err := h.waitJobs(ctx, p, start)
	if err == nil {
		err = h.deleteJobs(ctx, p)
	}
	close(stopKills)
	cancels.Wait()
	if kerr := <-killsDone; err == nil {
		err = kerr
	}
	return err
}

// deleteJobs deletes the ended jobs of the deletion workload, a few at
// once, through the API of a control plane that injects faults into its
// own requests, while executors are still being killed.
func (h *harness) deleteJobs(ctx context.Context, p *phase) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(p.jobs))
	sem := make(chan struct{}, 4)
	for _, j := range p.jobs {
		if j.w.Kind != chaostasks.KindDelete || j.state == "" || j.state == check.Running {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := p.api.deleteJob(ctx, j.id); err != nil {
				errs <- fmt.Errorf("%s run: %w", p.name, err)
				return
			}
			p.mu.Lock()
			j.deleted = true
			p.mu.Unlock()
			h.note("deleted", "job_id", j.id)
		}()
	}
	wg.Wait()
	close(errs)
	return errors.Join(<-errs)
}

// planCancels picks the jobs to cancel and when, up front, so the run's
// random choices come from its seed alone.
func (h *harness) planCancels(p *phase) {
	n := int(float64(len(p.jobs))*h.o.CancelFraction + 0.999)
	for _, i := range h.rng.Perm(len(p.jobs))[:min(n, len(p.jobs))] {
		p.jobs[i].cancel = 500*time.Millisecond + time.Duration(h.rng.Int64N(int64(2500*time.Millisecond)))
	}
}

// submitAll submits every job, a few at a time, and starts the planned
// cancels.
func (h *harness) submitAll(ctx context.Context, p *phase, cancels *sync.WaitGroup) error {
	idx := make(chan int)
	errs := make(chan error, len(p.jobs))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				j := p.jobs[i]
				id, err := p.api.submit(ctx, fmt.Sprintf("%s-%d", p.prefix, i), j.w.Spec)
				if err != nil {
					errs <- fmt.Errorf("%s run: %w", p.name, err)
					continue
				}
				j.id = id
				if j.cancel > 0 {
					cancels.Add(1)
					go func() {
						defer cancels.Done()
						h.cancelLater(ctx, p, j)
					}()
				}
			}
		}()
	}
	for i := range p.jobs {
		idx <- i
	}
	close(idx)
	wg.Wait()
	close(errs)
	return errors.Join(<-errs) // the first is enough to stop the run
}

func (h *harness) cancelLater(ctx context.Context, p *phase, j *jobRun) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(j.cancel):
	}
	ok, at, err := p.api.cancel(ctx, j.id)
	if err != nil {
		p.mu.Lock()
		p.crashes = append(p.crashes, fmt.Sprintf("cancel of job %s failed: %v", j.id, err))
		p.mu.Unlock()
		return
	}
	p.mu.Lock()
	j.cancelled, j.cancelAt = ok, at
	p.mu.Unlock()
	h.note("cancel returned", "job_id", j.id, "accepted", ok, "at", at.Format(time.RFC3339Nano))
}

// killLoop kills a random executor every KillEvery (chaos run only) and
// starts a new one in its place; it also restarts executors that died on
// their own, and records them.
func (h *harness) killLoop(ctx context.Context, p *phase, stop <-chan struct{}) error {
	every := h.o.KillEvery
	if every <= 0 {
		every = time.Second
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if err := h.restartCrashed(p); err != nil {
			return err
		}
		if p.chaos && h.o.KillEvery > 0 {
			if err := h.killOne(ctx, p); err != nil {
				return err
			}
		}
	}
}

func (h *harness) restartCrashed(p *phase) error {
	for i, e := range p.execs {
		if !e.exited() {
			continue
		}
		p.mu.Lock()
		p.crashes = append(p.crashes, fmt.Sprintf("%s exited on its own (%v); last lines:\n%s", e.name, e.waitErr, e.tail))
		p.mu.Unlock()
		ne, err := h.startExecutor(p)
		if err != nil {
			return err
		}
		p.execs[i] = ne
	}
	if p.local.exited() {
		return fmt.Errorf("%s run: batchwork-local exited (%v):\n%s", p.name, p.local.waitErr, p.local.tail)
	}
	return nil
}

// killOne SIGKILLs a random executor, starts its replacement, and reads
// which of the dead executor's claims the table still shows as held: the
// tasks that must now be recovered by others.
func (h *harness) killOne(ctx context.Context, p *phase) error {
	cands := h.victims(p)
	if len(cands) == 0 {
		p.mu.Lock()
		p.spared++
		p.mu.Unlock()
		h.note("kill skipped: every executor runs a task's last attempts")
		return nil
	}
	i := cands[h.rng.IntN(len(cands))]
	victim := p.execs[i]
	at := time.Now()
	victim.kill() // returns once its output is fully read
	ne, err := h.startExecutor(p)
	if err != nil {
		return err
	}
	p.execs[i] = ne
	p.mu.Lock()
	claims := append([]check.Start(nil), p.claims[victim.name]...)
	p.mu.Unlock()
	held, err := h.held(ctx, p.dep.Table, claims)
	if err != nil {
		return fmt.Errorf("read the killed executor's tasks: %w", err)
	}
	p.mu.Lock()
	p.kills = append(p.kills, kill{at: at, proc: victim.name, held: held})
	p.mu.Unlock()
	h.note("killed", "proc", victim.name, "at", at.Format(time.RFC3339Nano), "replacement", ne.name, "held", held)
	return nil
}

// victims returns the indexes of the executors a kill may take (victim.go).
func (h *harness) victims(p *phase) []int {
	budget := h.o.MaxAttempts
	if budget <= 0 {
		budget = 3 // the examples' own
	}
	names := make([]string, len(p.execs))
	for i, e := range p.execs {
		names[i] = e.name
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	claims := make(map[string][]check.Start, len(p.claims))
	for proc, cs := range p.claims {
		claims[proc] = slices.Clip(cs)
	}
	// A takeover's claim is logged by the control plane before its
	// executor logs the start.
	for _, c := range p.takeovers {
		claims[c.Proc] = append(claims[c.Proc], c)
	}
	latest := map[check.Attempt]int{}
	for _, cs := range claims {
		for _, c := range cs {
			task := check.Attempt{Job: c.Job, Stage: c.Stage, Partition: c.Partition}
			latest[task] = max(latest[task], c.Attempt)
		}
	}
	committed := map[check.Attempt]bool{}
	for _, c := range p.commits {
		committed[check.Attempt{Job: c.Job, Stage: c.Stage, Partition: c.Partition}] = true
	}
	return victims(names, claims, latest, committed, budget, time.Now())
}

// note writes a harness event into the processes' log, so the log tells
// the whole story (kills, cancels) in order.
func (h *harness) note(msg string, kv ...any) {
	f := map[string]any{"time": time.Now().Format(time.RFC3339Nano), "msg": msg}
	for i := 0; i+1 < len(kv); i += 2 {
		f[fmt.Sprint(kv[i])] = kv[i+1]
	}
	b, _ := json.Marshal(f)
	fmt.Fprintf(h.logw, "harness %s\n", b)
}

// held returns the claims whose task is still CLAIMED by that attempt.
func (h *harness) held(ctx context.Context, table string, claims []check.Start) ([]check.TaskState, error) {
	latest := map[[3]any]check.Start{}
	for _, c := range claims {
		k := [3]any{c.Job, c.Stage, c.Partition}
		if c.Attempt > latest[k].Attempt {
			latest[k] = c
		}
	}
	var keys []map[string]types.AttributeValue
	for _, c := range latest {
		keys = append(keys, check.TaskKey(c.Job, c.Stage, c.Partition))
	}
	items, err := batchGet(ctx, h.db, table, keys)
	if err != nil {
		return nil, err
	}
	var held []check.TaskState
	for _, it := range items {
		t, err := check.DecodeTaskState(it)
		if err != nil {
			return nil, err
		}
		if c := latest[[3]any{t.Job, t.Stage, t.Partition}]; t.State == check.Claimed && t.Attempt == c.Attempt {
			held = append(held, t)
		}
	}
	return held, nil
}

// batchGet reads items consistently, 100 keys a request.
func batchGet(ctx context.Context, db *dynamodb.Client, table string, keys []map[string]types.AttributeValue) ([]map[string]types.AttributeValue, error) {
	var out []map[string]types.AttributeValue
	for len(keys) > 0 {
		n := min(len(keys), 100)
		pending := keys[:n]
		keys = keys[n:]
		for len(pending) > 0 {
			res, err := db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
				RequestItems: map[string]types.KeysAndAttributes{table: {Keys: pending, ConsistentRead: aws.Bool(true)}},
			})
			if err != nil {
				return nil, fmt.Errorf("batch get from %s: %w", table, err)
			}
			out = append(out, res.Responses[table]...)
			pending = res.UnprocessedKeys[table].Keys
		}
	}
	return out, nil
}

// waitJobs polls the jobs' states in the table until every job ended or
// the timeout passed, and records the run's wall time.
func (h *harness) waitJobs(ctx context.Context, p *phase, start time.Time) error {
	deadline := start.Add(h.o.Timeout)
	last := time.Now()
	for {
		running, err := h.refreshStates(ctx, p)
		if err != nil {
			return err
		}
		redriven, err := h.redriveFailed(ctx, p)
		if err != nil {
			return err
		}
		reran, err := h.rerunSucceeded(ctx, p)
		if err != nil {
			return err
		}
		running += redriven + reran
		if running == 0 {
			p.wall = time.Since(start)
			h.progress("%s run: every job ended after %s", p.name, p.wall.Round(time.Millisecond))
			return nil
		}
		if time.Now().After(deadline) {
			p.wall = time.Since(start)
			h.progress("%s run: %d jobs still running after %s", p.name, running, h.o.Timeout)
			return nil // the checker reports them as stuck
		}
		if time.Since(last) > 10*time.Second {
			last = time.Now()
			h.progress("%s run: %d of %d jobs running, %d kills", p.name, running, len(p.jobs), len(p.kills))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// redriveFailed redrives the jobs of the redrive workload that failed and
// were not redriven yet, and returns how many it redrove: running again.
// A job cancelled before it failed is left alone.
func (h *harness) redriveFailed(ctx context.Context, p *phase) (int, error) {
	n := 0
	for _, j := range p.jobs {
		if j.w.Kind != chaostasks.KindRedrive || j.state != check.Failed || j.redriven {
			continue
		}
		if err := p.api.redrive(ctx, j.id); err != nil {
			return n, fmt.Errorf("%s run: %w", p.name, err)
		}
		j.redriven, j.state = true, ""
		h.note("redriven", "job_id", j.id)
		n++
	}
	return n, nil
}

// rerunSucceeded reruns, from chaostasks.RerunFrom, the chaos run's jobs
// of the rerun workload that succeeded, and returns how many it reran:
// new jobs, running. The fault-free run reruns nothing: a rerun's outputs
// are compared with its source's twin there.
func (h *harness) rerunSucceeded(ctx context.Context, p *phase) (int, error) {
	if !p.chaos {
		return 0, nil
	}
	n := 0
	for i, j := range p.jobs {
		if j.w.Kind != chaostasks.KindRerun || j.state != check.Succeeded || j.rerun != nil {
			continue
		}
		// The key makes a retried request (its answer lost to a fault)
		// answer with the rerun it made.
		id, err := p.api.rerun(ctx, j.id, chaostasks.RerunFrom, fmt.Sprintf("%s-%d-rerun", p.prefix, i))
		if err != nil {
			return n, fmt.Errorf("%s run: %w", p.name, err)
		}
		j.rerun = &jobRun{w: j.w, id: id}
		p.reruns = append(p.reruns, j.rerun)
		h.note("rerun", "job_id", id, "rerun_of", j.id, "from", chaostasks.RerunFrom)
		n++
	}
	return n, nil
}

// refreshStates reads the state of every job not known to have ended.
func (h *harness) refreshStates(ctx context.Context, p *phase) (running int, err error) {
	byID := map[string]*jobRun{}
	var keys []map[string]types.AttributeValue
	all := append(slices.Clone(p.jobs), p.reruns...)
	for _, j := range all {
		if j.state == "" || j.state == check.Running {
			byID[j.id] = j
			keys = append(keys, check.JobKey(j.id))
		}
	}
	items, err := batchGet(ctx, h.db, p.dep.Table, keys)
	if err != nil {
		return 0, err
	}
	for _, it := range items {
		id, st := check.DecodeJobState(it)
		if j, ok := byID[id]; ok {
			j.state = st
		}
	}
	for _, j := range all {
		if j.state == "" || j.state == check.Running {
			running++
		}
	}
	return running, nil
}

// checkInput pairs each chaos job with its fault-free twin.
func (h *harness) checkInput(ref, chaos *phase) check.Input {
	in := check.Input{AWS: h.cfg, Chaos: chaos.dep.Deployment, Reference: ref.dep.Deployment, Starts: chaos.starts, Commits: chaos.commits, Copies: chaos.copies, Executors: chaos.executors,
		// The executors trust a job state they read for this long.
		StartGrace: control.DefaultJobStateTTL}
	for i, j := range chaos.jobs {
		in.Jobs = append(in.Jobs, check.Job{
			ID: j.id, Reference: ref.jobs[i].id, Kind: j.w.Kind,
			Cancelled: j.cancelled, CancelAccepted: j.cancelAt, Normalize: normalizer(j.w.Kind), Verify: verifier(j.w.Kind), WantError: wantError(j.w.Kind), Deleted: j.deleted,
			SplitInput: splitInput(j.w.Kind),
		})
		if r := j.rerun; r != nil {
			// Compared with the fault-free run through its source's twin.
			in.Jobs = append(in.Jobs, check.Job{
				ID: r.id, Reference: ref.jobs[i].id, Kind: j.w.Kind + " (the rerun)",
				Normalize: normalizer(j.w.Kind), Verify: verifier(j.w.Kind),
				RerunOf: j.id, RerunFrom: chaostasks.RerunFrom,
			})
		}
	}
	return in
}
