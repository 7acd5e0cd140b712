package executor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/tuning"
)

// crashChild, when set, makes the test binary the Lambda invocation of
// TestLambdaCrashSparesOtherOwners instead of running the tests.
const crashChild = "BATCHWORK_TEST_LAMBDA_CRASH"

func TestMain(m *testing.M) {
	if mode := os.Getenv(crashChild); mode != "" {
		runCrashingInvocation(mode)
		fmt.Println("survived")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// lambdaJournal records, in order, what an invocation did to the control
// plane and the queue; out, when set, gets each entry as it happens (a
// process that crashes cannot report afterwards).
type lambdaJournal struct {
	mu      sync.Mutex
	entries []string
	out     *os.File
	// watch is closed at the first entry containing watchFor.
	watchFor string
	watch    chan struct{}
}

func (j *lambdaJournal) add(e string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.entries = append(j.entries, e)
	if j.out != nil {
		fmt.Fprintln(j.out, e)
	}
	if j.watch != nil && j.watchFor != "" && strings.Contains(e, j.watchFor) {
		close(j.watch)
		j.watch = nil
	}
}

func (j *lambdaJournal) snapshot() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.entries)
}

// journalCP is fakeCP with its claims journaled and unknown jobs refused
// as a real control plane refuses them (the message is dropped).
type journalCP struct {
	*fakeCP
	j     *lambdaJournal
	known func(job string) bool
}

func (c *journalCP) Claim(ctx context.Context, ref domain.TaskRef) (control.Claim, error) {
	c.j.add("claim " + ref.String())
	if !c.known(ref.Job) {
		return control.Claim{}, fmt.Errorf("claim %s: %w", ref, domain.ErrAlreadyDone)
	}
	return c.fakeCP.Claim(ctx, ref)
}

// ownersCP also answers who owns a job, as control.Service does.
type ownersCP struct {
	*journalCP
	owners map[string]string // job -> owner
	errs   map[string]error  // job -> lookup error
}

func (c *ownersCP) JobOwner(ctx context.Context, job string) (string, error) {
	c.j.add("owner " + job)
	if err := c.errs[job]; err != nil {
		return "", err
	}
	if o, ok := c.owners[job]; ok {
		return o, nil
	}
	return "", fmt.Errorf("owner of job %s: %w", job, domain.ErrNotFound)
}

// journalQueue journals every visibility change.
type journalQueue struct {
	*testdouble.Queue
	j *lambdaJournal
}

func (q *journalQueue) ChangeVisibility(ctx context.Context, url, receipt string, d time.Duration) error {
	q.j.add(fmt.Sprintf("visibility %s %v", receipt, d))
	return nil
}

func (q *journalQueue) ChangeVisibilityBatch(ctx context.Context, url string, receipts []string, d time.Duration) ([]string, error) {
	for _, r := range receipts {
		q.j.add(fmt.Sprintf("visibility %s %v", r, d))
	}
	return nil, nil
}

// lambdaMsg is one record of a test batch: a task body, the receipt
// "r-<body>", and how often SQS has delivered it.
type lambdaMsg struct {
	body     string
	receives int
}

func lambdaEvent(msgs []lambdaMsg) events.SQSEvent {
	var ev events.SQSEvent
	for _, m := range msgs {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: "m-" + m.body, ReceiptHandle: "r-" + m.body, Body: m.body, EventSource: "aws:sqs",
			EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:ready",
			Attributes: map[string]string{
				"SentTimestamp":           strconv.FormatInt(time.Now().UnixMilli(), 10),
				"ApproximateReceiveCount": strconv.Itoa(m.receives),
			},
		})
	}
	return ev
}

// lambdaOwners are the jobs of the tests' batches and their owners; jgone
// has no record, and jbroken's cannot be read.
var lambdaOwners = map[string]string{"ja": "alice", "ja2": "alice", "jb": "bob", "jc": "carol"}

func newLambdaRig(j *lambdaJournal, sp *spec.Job, reg *Registry, owners bool) *feed.LambdaHandler {
	base := &journalCP{fakeCP: &fakeCP{spec: sp, lease: time.Minute}, j: j, known: func(job string) bool {
		_, ok := lambdaOwners[job]
		return ok
	}}
	var cp ControlPlane = base
	if owners {
		cp = &ownersCP{journalCP: base, owners: lambdaOwners, errs: map[string]error{"jbroken": errors.New("ProvisionedThroughputExceededException")}}
	}
	return &feed.LambdaHandler{
		Handler:   &Runner{CP: cp, Blob: newBlob(), Registry: reg, Log: discard(), HeartbeatEvery: time.Hour},
		CP:        cp,
		Log:       discard(),
		Queue:     &journalQueue{Queue: newQueue(), j: j},
		QueueURLs: map[string]string{"ready": "https://sqs/ready"},
	}
}

// An invocation runs the tasks of one owner only, the owner taken from the
// job record (never from the message). Every other owner's message is
// handed back before any task runs: made visible at once and reported as
// a batch item failure, never claimed, so no attempt of theirs is spent
// and nothing their co-batched tasks do (panic, run out of memory, time
// out) can touch them. The owner that runs is the one whose message SQS
// delivered most often, so a message handed back goes first next time.
func TestLambdaRunsOneOwnerPerInvocation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		msgs      []lambdaMsg
		noOwners  bool     // the control plane cannot name owners
		wantRun   []string // task bodies claimed
		wantBack  []string // bodies handed back at once (visibility 0)
		wantLater []string // bodies handed back after a short wait: owner unknown for now
		wantFail  []string // every body reported as a batch item failure
	}{
		{
			name:     "two owners: the first record's owner runs, the other is handed back",
			msgs:     []lambdaMsg{{"ja/0/0", 1}, {"jb/0/0", 1}, {"ja/0/1", 1}, {"ja2/0/0", 1}},
			wantRun:  []string{"ja/0/0", "ja/0/1", "ja2/0/0"},
			wantBack: []string{"jb/0/0"},
			wantFail: []string{"jb/0/0", "ja/0/0"}, // and the panicked task's retry, hidden for its backoff
		},
		{
			name:     "a message delivered more often goes first",
			msgs:     []lambdaMsg{{"ja/0/0", 1}, {"jc/0/0", 3}, {"jb/0/0", 2}},
			wantRun:  []string{"jc/0/0"},
			wantBack: []string{"ja/0/0", "jb/0/0"},
			wantFail: []string{"ja/0/0", "jb/0/0"},
		},
		{
			name:     "no user code runs for a stray body or a job that is gone, so they stay",
			msgs:     []lambdaMsg{{"not-a-task", 1}, {"jgone/0/0", 1}, {"jb/0/0", 1}},
			wantRun:  []string{"jgone/0/0", "jb/0/0"},
			wantFail: []string{"not-a-task"},
		},
		{
			name:      "an owner that cannot be read now is never run with another's",
			msgs:      []lambdaMsg{{"jbroken/0/0", 1}, {"ja/0/0", 1}},
			wantRun:   []string{"ja/0/0"},
			wantLater: []string{"jbroken/0/0"},
			wantFail:  []string{"jbroken/0/0", "ja/0/0"},
		},
		{
			name:     "one owner: the whole batch runs",
			msgs:     []lambdaMsg{{"ja/0/0", 1}, {"ja2/0/0", 1}, {"ja/0/1", 1}},
			wantRun:  []string{"ja/0/0", "ja2/0/0", "ja/0/1"},
			wantFail: []string{"ja/0/0"},
		},
		{
			name:     "without owners, jobs are kept apart",
			msgs:     []lambdaMsg{{"ja/0/0", 1}, {"ja2/0/0", 1}, {"ja/0/1", 1}},
			noOwners: true,
			wantRun:  []string{"ja/0/0", "ja/0/1"},
			wantBack: []string{"ja2/0/0"},
			wantFail: []string{"ja2/0/0", "ja/0/0"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j := &lambdaJournal{}
			reg := NewRegistry()
			reg.Register("work", func(ctx context.Context, t *Task) error {
				j.add("run " + t.Ref.String())
				if t.Ref.String() == "ja/0/0" {
					panic("alice's first task breaks")
				}
				return nil
			})
			h := newLambdaRig(j, mustSpec(t, oneTask), reg, !tc.noOwners)
			resp, err := h.Handle(context.Background(), lambdaEvent(tc.msgs))
			if err != nil {
				t.Fatalf("top-level error %v, want nil", err)
			}
			entries := j.snapshot()
			var claimed, back, later []string
			firstClaim, lastBack := len(entries), -1
			for i, e := range entries {
				switch f := strings.Fields(e); {
				case f[0] == "claim":
					claimed = append(claimed, f[1])
					firstClaim = min(firstClaim, i)
				case f[0] == "visibility" && f[2] == "0s":
					back = append(back, strings.TrimPrefix(f[1], "r-"))
					lastBack = i
				case f[0] == "visibility" && f[2] == tuning.HeldVisibility.String():
					later = append(later, strings.TrimPrefix(f[1], "r-"))
					lastBack = i
				}
			}
			var failed []string
			for _, f := range resp.BatchItemFailures {
				failed = append(failed, strings.TrimPrefix(f.ItemIdentifier, "m-"))
			}
			sorted := func(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }
			for _, c := range []struct {
				what      string
				want, got []string
			}{
				{"claimed", tc.wantRun, claimed},
				{"handed back at once", tc.wantBack, back},
				{"handed back after a wait", tc.wantLater, later},
				{"batch item failures", tc.wantFail, failed},
			} {
				if diff := cmp.Diff(sorted(c.want), sorted(c.got)); diff != "" {
					t.Errorf("%s (-want +got):\n%s\njournal: %q", c.what, diff, entries)
				}
			}
			if lastBack > firstClaim {
				t.Errorf("a message was handed back after the first claim, when a crash could have kept it: %q", entries)
			}
		})
	}
}

// A real crash (a panic on a goroutine of a task, which nothing can
// recover, or the kill Lambda gives a function over its memory) ends the
// whole invocation. The other owner's message in its batch was handed back
// before anything ran and never claimed, so the crash costs that owner no
// attempt and no wait: its message is visible again at once.
func TestLambdaCrashSparesOtherOwners(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"panic", "kill"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), crashChild+"="+mode)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the invocation ended with %v, want a crash; stdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
			}
			var entries []string
			for sc := bufio.NewScanner(&stdout); sc.Scan(); {
				entries = append(entries, sc.Text())
			}
			if !slices.Contains(entries, "crash ja/0/0") {
				t.Fatalf("alice's task did not crash the invocation: %q; stderr:\n%s", entries, stderr.String())
			}
			if slices.Contains(entries, "claim jb/0/0") {
				t.Errorf("bob's task was claimed in the invocation that crashed, so the crash cost it an attempt: %q", entries)
			}
			if !slices.Contains(entries, "visibility r-jb/0/0 0s") {
				t.Errorf("bob's message was not made visible again before the crash: %q", entries)
			}
		})
	}
}

// runCrashingInvocation handles a batch of alice's and bob's tasks in which
// alice's task crashes the process, once bob's message has been dealt with
// one way or the other (claimed, or handed back), so the outcome does not
// depend on scheduling.
func runCrashingInvocation(mode string) {
	bobDecided := make(chan struct{})
	j := &lambdaJournal{out: os.Stdout, watchFor: "jb/0/0", watch: bobDecided}
	reg := NewRegistry()
	reg.Register("work", func(ctx context.Context, t *Task) error {
		if t.Ref.Job == "jb" {
			j.add("run " + t.Ref.String())
			return nil
		}
		select {
		case <-bobDecided:
		case <-time.After(10 * time.Second):
		}
		j.add("crash " + t.Ref.String())
		if mode == "kill" {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		} else {
			go panic("alice's task: index out of range on a goroutine of its own")
		}
		select {}
	})
	sp, err := spec.Parse([]byte(oneTask))
	if err != nil {
		fmt.Fprintln(os.Stderr, "spec:", err)
		os.Exit(3)
	}
	h := newLambdaRig(j, sp, reg, true)
	_, _ = h.Handle(context.Background(), lambdaEvent([]lambdaMsg{{"ja/0/0", 1}, {"jb/0/0", 1}}))
}
