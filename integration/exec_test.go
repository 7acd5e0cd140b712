package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/examples/wordcount"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	sm "github.com/batchwork/batchwork/statemachine"
)

// TestExecWordCountPython runs the Python word count
// (examples/wordcount/wordcount.py) as exec stages, and the Go one on the
// same corpus in the same installation: every reduce partition's output
// must be the same, byte for byte. The Python program writes
// word<TAB>count lines and the executor routes them, so the same words
// reach the same reducer, and both reducers sort their words.
func TestExecWordCountPython(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed for the exec word count: %v", err)
	}
	t.Logf("python: %s", python)
	// The programs directory holds the script alone, as an operator's
	// would; a copy, so the test does not depend on the checkout's modes.
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("..", "examples", "wordcount", "wordcount.py"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "wordcount.py"), src, 0o755); err != nil {
		t.Fatal(err)
	}

	reg := batchwork.NewRegistry()
	wordcount.Register(reg)
	e := newEnv(t, reg, envOptions{execDir: dir})
	corpus := wordcount.Corpus(11, 60_000)
	// Three files cut mid-line, so splits cross file and line boundaries,
	// and one of letters whose lowercasing or class is easy to get wrong:
	// İ lowercases to one rune in Go, to two in Python's str.lower(); a
	// final Σ is σ in Go; ǅ is a title-case letter; digits and invalid
	// UTF-8 separate words.
	tricky := []byte("İstanbul ISTANBUL ΣΊΣΥΦΟΣ σίσυφος Straße STRASSE ǅemal 日本語 x1y z\xff\xfez café CAFÉ\n")
	cuts := []int{0, 20_001, 41_003, len(corpus)}
	for i := range 3 {
		e.putInput("tester", fmt.Sprintf("corpus/part-%d.txt", i), corpus[cuts[i]:cuts[i+1]])
	}
	e.putInput("tester", "corpus/tricky.txt", tricky)
	prefix := e.inputsURI("tester") + "corpus/"
	const reducers = 3

	pySpec := fmt.Appendf(nil, `
name: wc-python
stages:
  - name: map
    exec: [wordcount.py, map]
    partitions: {input: {prefix: %q, splitSize: 8000}}
    shuffle: {partitions: %d}
  - name: reduce
    exec: [wordcount.py, reduce]
    after: [map]
retry: {maxAttempts: 2, backoff: 1s}
`, prefix, reducers)
	goID := e.submit("wc-go", wordcount.Spec("wc-go", prefix, 8000, reducers))
	pyID := e.submit("wc-py", pySpec)

	outputs := func(id string) map[int]string {
		t.Helper()
		st := e.waitJob(id, 2*time.Minute)
		if st.State != string(sm.JobSucceeded) {
			t.Fatalf("job %s %s: %+v", id, st.State, st)
		}
		m := readManifest(t, e, st.Manifest)
		out := map[int]string{}
		for _, o := range m.Outputs {
			raw, err := e.r.Blob.Get(context.Background(), o.Key)
			if err != nil {
				t.Fatal(err)
			}
			out[o.Partition] += string(raw)
		}
		return out
	}
	goOut, pyOut := outputs(goID), outputs(pyID)
	if len(goOut) != reducers || len(pyOut) != reducers {
		t.Fatalf("reduce outputs: Go %d, Python %d, want %d each", len(goOut), len(pyOut), reducers)
	}
	words := map[string]int{}
	for r := range reducers {
		if goOut[r] != pyOut[r] {
			t.Errorf("reduce partition %d differs:\nGo:\n%.500s\nPython:\n%.500s", r, goOut[r], pyOut[r])
		}
		addCounts(t, words, pyOut[r])
	}
	// And both are right: the tricky line's words, counted as Go's
	// wordcount.Words does.
	for w, n := range map[string]int{"istanbul": 2, "σίσυφοσ": 1, "σίσυφος": 1, "straße": 1, "strasse": 1, "ǆemal": 1, "日本語": 1, "x": 1, "y": 1, "café": 2} {
		if words[w] < n {
			t.Errorf("count of %q = %d, want at least %d", w, words[w], n)
		}
	}
	for _, w := range wordcount.Words(string(tricky)) {
		if words[w] == 0 {
			t.Errorf("word %q of the tricky line is not counted", w)
		}
	}
}

func addCounts(t *testing.T, into map[string]int, out string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		w, count, ok := strings.Cut(line, "\t")
		n, err := strconv.Atoi(count)
		if !ok || err != nil {
			t.Fatalf("output line %q is not word<TAB>count", line)
		}
		into[w] += n
	}
}

// TestLambdaStageFunctionsAreTheOperators: through the API, a lambda stage
// may name only a function the operator allows (control.Config.TaskFunctions,
// the construct's TaskFunctions); any other is a 400 naming the stage's
// lambda field, so no owner can have the executors invoke a function the
// operator did not list. (Invoking functions needs Lambda itself, which
// the emulator cannot run without a container engine: the invocation is
// proven by internal/executor's unit tests with a fake Lambda.)
func TestLambdaStageFunctionsAreTheOperators(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true, control: &control.Config{
		StartGrace: time.Second, CheckEvery: time.Second, StuckAfter: 5 * time.Second,
		TaskFunctions: []string{"resize"},
	}})
	stage := func(fn string) []byte {
		return fmt.Appendf(nil, `{"name": "l", "stages": [{"name": "s", "lambda": %q, "partitions": {"count": 1}}]}`, fn)
	}
	if r := e.call("alice", http.MethodPost, "/jobs", stage("resize:live"), "Idempotency-Key", "ok"); r.Status != http.StatusCreated {
		t.Errorf("allowed function: status %d: %s", r.Status, r.Body)
	}
	for _, fn := range []string{"delete-everything", "arn:aws:lambda:eu-west-1:123456789012:function:resize"} {
		r := e.call("alice", http.MethodPost, "/jobs", stage(fn), "Idempotency-Key", fn)
		if r.Status != http.StatusBadRequest {
			t.Fatalf("%s: status %d, want 400: %s", fn, r.Status, r.Body)
		}
		if ae := r.apiErr(t); ae.Field != "stages[0].lambda" || !strings.Contains(ae.Message, "name one of: resize") {
			t.Errorf("%s: error %+v, want one on stages[0].lambda listing the allowed functions", fn, ae)
		}
	}
	// A schedule's spec is checked when it is created, not only at its
	// firings.
	body := fmt.Appendf(nil, `{"name": "hourly", "expression": "0 * * * *", "spec": %s}`, stage("other"))
	r := e.call("alice", http.MethodPost, "/schedules", body, "Idempotency-Key", "sched")
	if r.Status != http.StatusBadRequest {
		t.Fatalf("schedule: status %d, want 400: %s", r.Status, r.Body)
	}
	if ae := r.apiErr(t); ae.Field != "spec.stages[0].lambda" {
		t.Errorf("schedule: error %+v, want one on spec.stages[0].lambda", ae)
	}
}
