// Command demo runs the word-count example end to end on a local AWS
// emulator: it starts the emulator (moto, and DynamoDB Local for DynamoDB;
// or uses AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_DYNAMODB), hosts the
// control plane, API and executors in this process, submits the job over
// HTTP, shows progress and prints the top words, the timeline and where
// the manifest is.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/batchwork/batchwork/examples/wordcount"
	"github.com/batchwork/batchwork/internal/emulator"
	"github.com/batchwork/batchwork/internal/emulator/localstack"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/localauth"
	"github.com/batchwork/batchwork/shared/principal"
	"github.com/batchwork/batchwork/shared/provision"
	"github.com/batchwork/batchwork/shared/runner"
	"github.com/batchwork/batchwork/shared/tuning"
)

func main() {
	input := flag.String("input", "", "directory of text files to count (default: a generated corpus)")
	size := flag.Int("size", 4<<20, "bytes of generated corpus")
	slots := flag.Int("slots", 8, "executor slots")
	reducers := flag.Int("reducers", 4, "reduce partitions")
	splitSize := flag.Int64("split", 256<<10, "target split size in bytes")
	logFile := flag.String("log", filepath.Join(os.TempDir(), "batchwork-demo.log"), "structured log file")
	flag.BoolVar(&serve, "serve", false, "after the job, keep the runner and its API up on "+serveAddr+" for the batchwork CLI (until ^C)")
	flag.StringVar(&stackName, "stack", "", "use the resources of this deployed stack (make deploy-local) instead of creating them")
	flag.StringVar(&serveListen, "listen", serveAddr, "with -serve, the API's address (127.0.0.1:0: a free port)")
	flag.Parse()
	// Ctrl-C (SIGINT) is how a served demo is meant to end, and SIGTERM
	// how a supervisor ends it: either stops it cleanly, exit status 0,
	// once the runner and the emulator have shut down (run's defers).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, *input, *size, *slots, *reducers, *splitSize, *logFile)
	if ctx.Err() != nil {
		fmt.Println("==> stopped")
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// stackName names a deployed stack whose resources the demo uses.
var stackName string

// inputPath is where the input goes in the demo owner's inputs area (the
// only place of the data bucket a spec may read inputs from), and what the
// spec names as inputs:<path>; a deployed stack's bucket outlives a run,
// so each run there gets its own path (objects never change).
var inputPath = "wordcount/"

// demoOwner is the identity the demo submits as (submit, the CLI's --owner).
const demoOwner = "demo"

// inputPrefix is inputPath's key prefix in the data bucket.
func inputPrefix() string { return blob.InputsPrefix(principal.Key(demoOwner)) + inputPath }

func run(ctx context.Context, input string, size, slots, reducers int, splitSize int64, logFile string) error {
	lf, err := os.Create(logFile)
	if err != nil {
		return err
	}
	defer lf.Close()
	log := slog.New(slog.NewJSONHandler(lf, nil))

	fmt.Println("==> starting the AWS emulator")
	emu, err := emulator.StartWith(ctx, emulator.Options{Localstack: localstack.Start})
	if err != nil {
		return err
	}
	defer emu.Stop()
	fmt.Printf("    %s at %s\n", emu.Kind, emu.URL)
	if emu.DynamoURL != emu.URL {
		fmt.Printf("    DynamoDB: %s at %s\n", emu.Dynamo, emu.DynamoURL)
	}
	cfg := emu.AWSConfig()

	reg := batchwork.NewRegistry()
	wordcount.Register(reg)
	reg.Register("demo.sleep", sleepTask)
	var deployed *provision.Resources
	if stackName != "" {
		fmt.Printf("==> reading the resources of stack %s\n", stackName)
		// A stack deployed through CloudFormation (make deploy-local) has
		// its table in the DynamoDB of CloudFormation's endpoint, so the
		// config routes no service elsewhere (drops DynamoDB Local's
		// endpoint; see emulator.AWSConfig).
		cfg.ConfigSources = nil
		res, err := provision.FromStack(ctx, cfg, stackName)
		if err != nil {
			return err
		}
		deployed = &res
		inputPath = fmt.Sprintf("wordcount-%d/", time.Now().UnixNano())
		// The executors run here, not in the emulator's Lambda.
		n, err := provision.PauseEventSources(ctx, cfg, stackName)
		if err != nil {
			return err
		}
		fmt.Printf("    paused %d Lambda event source mapping(s): the executors run in this process\n", n)
	}
	fmt.Println("==> creating resources and starting the control plane, API and executors")
	tokenDir, err := tokenDir()
	if err != nil {
		return err
	}
	r, err := runner.New(ctx, runner.Options{
		AWS: cfg, Prefix: fmt.Sprintf("demo-%d", time.Now().Unix()), Slots: slots,
		Registry: reg, Log: log, SweepEvery: 5 * time.Second, Resources: deployed, Listen: listenAddr(),
		TokenDir: tokenDir,
		// batchwork logs reads a job's lines from it (the logs route).
		LogFile: logFile,
		// Specs naming a task the executors lack are refused at submit,
		// as on the deployed stack (the runner publishes its names).
		Control: control.Config{CheckTaskNames: true, CountLinger: tuning.CountLinger},
	})
	if err != nil {
		return err
	}
	runCtx, cancelRun := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	defer func() { cancelRun(); <-done }()
	fmt.Printf("    table %s, bucket %s, API %s, %d executor slots, logs in %s\n", r.Resources.Table, r.Resources.Bucket, r.URL, slots, logFile)

	n, bytesIn, err := upload(ctx, r, input, size)
	if err != nil {
		return err
	}
	fmt.Printf("==> uploaded %d input file(s), %d bytes, to s3://%s/%s (the owner's inputs area: inputs:%s in a spec)\n",
		n, bytesIn, r.Resources.Bucket, inputPrefix(), inputPath)

	spec := wordcount.Spec("wordcount", "inputs:"+inputPath, splitSize, reducers)
	id, err := submit(r.URL, r.Token, spec)
	if err != nil {
		return err
	}
	fmt.Printf("==> submitted job %s\n", id)
	start := time.Now()
	var st control.JobStatus
	last := ""
	for {
		if st, err = status(r.URL, r.Token, id); err != nil {
			return err
		}
		line := progressLine(st)
		if line != last {
			fmt.Printf("    %6.1fs  %s\n", time.Since(start).Seconds(), line)
			last = line
		}
		if st.State != "RUNNING" && st.State != "PUBLISHING" {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	fmt.Printf("==> job %s %s in %.1fs\n", id, st.State, time.Since(start).Seconds())
	if st.State != "SUCCEEDED" {
		return fmt.Errorf("job ended %s: %s", st.State, st.Error)
	}
	if err := printResult(ctx, r, st); err != nil {
		return err
	}
	if serve {
		return serveCLI(ctx, r, spec)
	}
	fmt.Println("\n==> make demo SERVE=1 keeps the runner up for the batchwork CLI and serves the web console (batchwork ui) at http://" + consoleAddr + "/<token>/")
	return nil
}

func upload(ctx context.Context, r *runner.Runner, dir string, size int) (files int, total int, err error) {
	if dir == "" {
		corpus := wordcount.Corpus(42, size)
		// Several files, so splits come from more than one object.
		const parts = 4
		for i := 0; i < parts; i++ {
			lo, hi := len(corpus)*i/parts, len(corpus)*(i+1)/parts
			if err := r.Blob.PutIfAbsent(ctx, fmt.Sprintf("%scorpus-%d.txt", inputPrefix(), i), corpus[lo:hi]); err != nil {
				return 0, 0, err
			}
		}
		return parts, len(corpus), nil
	}
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		files++
		total += len(b)
		return r.Blob.PutIfAbsent(ctx, inputPrefix()+filepath.ToSlash(rel), b)
	})
	if err == nil && files == 0 {
		err = fmt.Errorf("no files under %s", dir)
	}
	return files, total, err
}

func submit(base, token string, spec []byte) (string, error) {
	req, _ := http.NewRequest(http.MethodPost, base+"/jobs", bytes.NewReader(spec))
	req.Header.Set("Idempotency-Key", fmt.Sprintf("demo-%d", time.Now().UnixNano()))
	req.Header.Set(runner.OwnerHeader, demoOwner)
	localauth.SetHeader(req, token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("submit: %s: %s", resp.Status, body)
	}
	var res control.SubmitResult
	if err := json.Unmarshal(body, &res); err != nil {
		return "", err
	}
	return res.JobID, nil
}

func status(base, token, id string) (control.JobStatus, error) {
	req, _ := http.NewRequest(http.MethodGet, base+"/jobs/"+id, nil)
	req.Header.Set(runner.OwnerHeader, demoOwner)
	localauth.SetHeader(req, token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return control.JobStatus{}, err
	}
	defer resp.Body.Close()
	var st control.JobStatus
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return st, fmt.Errorf("status: %s: %s", resp.Status, b)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

func progressLine(st control.JobStatus) string {
	var parts []string
	for _, s := range st.Stages {
		parts = append(parts, fmt.Sprintf("%s %s %d/%d", s.Name, s.State, s.Committed, s.Total))
	}
	return st.State + "  " + strings.Join(parts, "  |  ")
}

func printResult(ctx context.Context, r *runner.Runner, st control.JobStatus) error {
	raw, err := r.Blob.Get(ctx, st.Manifest)
	if err != nil {
		return err
	}
	var m domain.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	counts := map[string]int{}
	for _, o := range m.Outputs {
		b, err := r.Blob.Get(ctx, o.Key)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if w, n, ok := strings.Cut(line, "\t"); ok {
				c, _ := strconv.Atoi(n)
				counts[w] = c
			}
		}
	}
	words := make([]string, 0, len(counts))
	for w := range counts {
		words = append(words, w)
	}
	sort.Slice(words, func(i, j int) bool {
		if counts[words[i]] != counts[words[j]] {
			return counts[words[i]] > counts[words[j]]
		}
		return words[i] < words[j]
	})
	fmt.Printf("\n==> top words (%d distinct)\n", len(words))
	for i, w := range words[:min(15, len(words))] {
		fmt.Printf("    %2d. %-14s %8d\n", i+1, w, counts[w])
	}
	fmt.Println("\n==> timeline")
	for i, s := range st.Stages {
		attempts, retried := 0, 0
		tasks, err := r.Store.TaskListStage(ctx, st.ID, i, s.Total)
		if err != nil {
			return err
		}
		for _, t := range tasks {
			attempts += t.Attempt
			if t.Attempt > 1 {
				retried++
			}
		}
		fmt.Printf("    stage %-7s started %s  completed %s  (%5.2fs)  tasks %d  attempts %d  retried %d\n",
			s.Name, s.Started.Format("15:04:05.000"), s.Ended.Format("15:04:05.000"), s.Ended.Sub(*s.Started).Seconds(), s.Total, attempts, retried)
	}
	fmt.Printf("    job ended %s\n", st.Ended.Format("15:04:05.000"))
	fmt.Printf("\n==> manifest: s3://%s/%s (%d outputs)\n", m.Bucket, st.Manifest, len(m.Outputs))
	return nil
}
