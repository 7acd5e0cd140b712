package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/internal/metrics"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Batchwork's own metrics (internal/metrics) on the emulator: a job runs
// through a control plane whose Metrics is a Recorder writing to a buffer;
// the flushed EMF lines are parsed, checked for structure and bounded
// dimensions (no job id anywhere), and their values summed against what
// the task records say happened.
func TestMetricsOnTheEmulator(t *testing.T) {
	t.Parallel()
	// taskTime is how long every task function "runs": it moves the
	// control plane's clock, so TaskDuration (claim to commit) is exact.
	const taskTime = 250 * time.Millisecond
	const stack = "bw-metrics-test"

	cases := []struct {
		name  string
		spec  string
		retry bool // attempt 1 fails with attempts left: sweep and work again
		state sm.JobState
		// want are the summed values of each count metric (absent: 0).
		want map[string]float64
		// commits is how many values TaskDuration and CommitLatency carry.
		commits int
	}{
		{
			name:    "succeeds",
			spec:    oneStage("ok", "work", 3),
			state:   sm.JobSucceeded,
			want:    map[string]float64{metrics.TasksClaimed: 3, metrics.TasksCommitted: 3},
			commits: 3,
		},
		{
			name: "retried once",
			spec: `{"name":"retried","stages":[{"name":"s","task":"flaky","partitions":{"count":2},
			  "retry":{"maxAttempts":2,"backoff":"40m"}}]}`,
			retry: true,
			state: sm.JobSucceeded,
			// Partition 0 fails its first attempt; partition 1 does not.
			want: map[string]float64{metrics.TasksClaimed: 3, metrics.TasksCommitted: 2, metrics.TasksRetried: 1,
				metrics.SweepRepairs: 1},
			commits: 2,
		},
		{
			name: "fails for good",
			spec: `{"name":"broken","stages":[{"name":"s","task":"broken","partitions":{"count":1},
			  "retry":{"maxAttempts":1}}]}`,
			state: sm.JobFailed,
			want:  map[string]float64{metrics.TasksClaimed: 1, metrics.TasksFailed: 1, metrics.JobsFailed: 1},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := newTestClock()
			reg := batchwork.NewRegistry()
			reg.Register("work", func(ctx context.Context, tk *batchwork.Task) error {
				clk.Advance(taskTime)
				_, err := fmt.Fprintf(tk.Out, "%d\n", tk.Partition)
				return err
			})
			reg.Register("flaky", func(ctx context.Context, tk *batchwork.Task) error {
				clk.Advance(taskTime)
				if tk.Partition == 0 && tk.Attempt == 1 {
					return errors.New("flaky: first attempt fails")
				}
				_, err := fmt.Fprintf(tk.Out, "%d\n", tk.Partition)
				return err
			})
			reg.Register("broken", func(ctx context.Context, tk *batchwork.Task) error {
				clk.Advance(taskTime)
				return errors.New("broken: always fails")
			})
			e := newEnv(t, reg, envOptions{noRun: true})
			logs := newLogCounter()
			svc := newService(e, testTimings, e.r.Store, e.r.Queue, clk, logs.logger())
			var buf bytes.Buffer
			rec := metrics.New(&buf, stack)
			// The control plane that claims, commits, fails and sweeps.
			svc.Metrics = rec
			exec := &executor.Runner{CP: svc, Blob: e.r.Blob, Registry: executor.PublicRegistry(reg), Log: logs.logger()}

			id := submitTo(t, svc, "metrics", tc.spec)
			work(t, e, exec)
			if tc.retry {
				// The failed attempt's message is hidden for the 40-minute
				// backoff; past it, the sweep sends the retry's message.
				clk.Advance(40*time.Minute + testTimings.StuckAfter + time.Second)
				if c := mustSweep(t, svc); c.Requeued != 1 {
					t.Fatalf("sweep after the backoff requeued %d, want 1: %+v", c.Requeued, c)
				}
				work(t, e, exec)
			}
			if st := jobState(t, svc, id); st.State != string(tc.state) {
				t.Fatalf("job %s (%s), want %s", st.State, st.Error, tc.state)
			}
			// What the records say happened: one claim per attempt.
			attempts, committed := 0, 0
			for _, tk := range stageTasks(t, e, id, 0) {
				attempts += tk.Attempt
				if tk.State == sm.TaskSucceeded {
					committed++
				}
			}
			if float64(attempts) != tc.want[metrics.TasksClaimed] || committed != tc.commits {
				t.Fatalf("records: %d attempts, %d committed; the case expects %v claims, %d commits",
					attempts, committed, tc.want[metrics.TasksClaimed], tc.commits)
			}

			if err := rec.Flush(); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			if strings.Contains(out, id) {
				t.Errorf("the metrics name job %s:\n%s", id, out)
			}
			counts, values := parseEMF(t, out, stack)
			for _, name := range []string{metrics.TasksClaimed, metrics.TasksCommitted, metrics.TasksRetried,
				metrics.TasksFailed, metrics.JobsFailed, metrics.SweepRepairs} {
				if counts[name] != tc.want[name] {
					t.Errorf("%s = %v, want %v", name, counts[name], tc.want[name])
				}
			}
			if d := values[metrics.TaskDuration]; len(d) != tc.commits || slices.ContainsFunc(d, func(v float64) bool {
				return v != float64(taskTime.Milliseconds())
			}) {
				t.Errorf("TaskDuration %v, want %d values of %d ms", d, tc.commits, taskTime.Milliseconds())
			}
			if l := values[metrics.CommitLatency]; len(l) != tc.commits || slices.ContainsFunc(l, func(v float64) bool { return v <= 0 }) {
				t.Errorf("CommitLatency %v, want %d positive values", l, tc.commits)
			}
			if tc.retry && counts[metrics.SweepRepairs+"/"+string(control.RepairLostMessage)] != 1 {
				t.Errorf("SweepRepairs by kind %v, want one %s (the retry's message, sent when due)", counts, control.RepairLostMessage)
			}

			// Everything was written: a second flush writes nothing.
			n := buf.Len()
			if err := rec.Flush(); err != nil || buf.Len() != n {
				t.Errorf("a second flush wrote %q (%v)", buf.String()[n:], err)
			}
		})
	}
}

// parseEMF parses EMF lines, checks each one's structure and dimensions,
// and returns the count metrics summed by name (and by name/Kind for the
// sweep's repairs) and the value metrics' values by name.
func parseEMF(t *testing.T, out, stack string) (map[string]float64, map[string][]float64) {
	t.Helper()
	counts, values := map[string]float64{}, map[string][]float64{}
	dimValues := map[string][]string{
		metrics.DimPriority: {"high", "normal", "low"},
	}
	for _, k := range control.Repairs {
		dimValues[metrics.DimKind] = append(dimValues[metrics.DimKind], string(k))
	}
	allowedDims := [][][]string{
		{{metrics.DimStack}},
		{{metrics.DimStack}, {metrics.DimStack, metrics.DimPriority}},
		{{metrics.DimStack}, {metrics.DimStack, metrics.DimKind}},
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	lines := 0
	for sc.Scan() {
		lines++
		line := sc.Text()
		var doc struct {
			AWS struct {
				Timestamp         *int64 `json:"Timestamp"`
				CloudWatchMetrics []struct {
					Namespace  string     `json:"Namespace"`
					Dimensions [][]string `json:"Dimensions"`
					Metrics    []struct{ Name, Unit string }
				} `json:"CloudWatchMetrics"`
			} `json:"_aws"`
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatalf("EMF line %q: %v", line, err)
		}
		if err := json.Unmarshal([]byte(line), &fields); err != nil {
			t.Fatalf("EMF line %q: %v", line, err)
		}
		a := doc.AWS
		if a.Timestamp == nil || *a.Timestamp <= 0 || len(a.CloudWatchMetrics) != 1 {
			t.Fatalf("EMF line without a timestamp or one metric directive: %s", line)
		}
		if time.Since(time.UnixMilli(*a.Timestamp)).Abs() > time.Hour {
			t.Errorf("EMF timestamp %d is not now: %s", *a.Timestamp, line)
		}
		cw := a.CloudWatchMetrics[0]
		if cw.Namespace != metrics.Namespace {
			t.Errorf("namespace %q, want %q: %s", cw.Namespace, metrics.Namespace, line)
		}
		if !slices.ContainsFunc(allowedDims, func(d [][]string) bool {
			return slices.EqualFunc(d, cw.Dimensions, slices.Equal[[]string])
		}) {
			t.Errorf("dimensions %v are not a bounded set: %s", cw.Dimensions, line)
		}
		// Every dimension has its value, from its bounded set.
		var kind string
		for _, set := range cw.Dimensions {
			for _, dim := range set {
				var v string
				if err := json.Unmarshal(fields[dim], &v); err != nil {
					t.Fatalf("dimension %s has no string value: %s", dim, line)
				}
				switch {
				case dim == metrics.DimStack && v != stack:
					t.Errorf("Stack %q, want %q", v, stack)
				case dim != metrics.DimStack && !slices.Contains(dimValues[dim], v):
					t.Errorf("%s %q is not in its bounded set %v", dim, v, dimValues[dim])
				}
				if dim == metrics.DimKind {
					kind = v
				}
			}
		}
		// The line holds the directive, the dimensions and the metrics
		// it declares: nothing else (no id can hide in an extra field).
		declared := map[string]bool{"_aws": true}
		for _, set := range cw.Dimensions {
			for _, dim := range set {
				declared[dim] = true
			}
		}
		for _, m := range cw.Metrics {
			declared[m.Name] = true
			raw, ok := fields[m.Name]
			if !ok {
				t.Fatalf("metric %s declared without a value: %s", m.Name, line)
			}
			switch m.Unit {
			case "Count":
				var n float64
				if err := json.Unmarshal(raw, &n); err != nil {
					t.Fatalf("count %s: %v: %s", m.Name, err, line)
				}
				counts[m.Name] += n
				if kind != "" {
					counts[m.Name+"/"+kind] += n
				}
			case "Milliseconds":
				var vs []float64
				if err := json.Unmarshal(raw, &vs); err != nil {
					t.Fatalf("values %s: %v: %s", m.Name, err, line)
				}
				values[m.Name] = append(values[m.Name], vs...)
			default:
				t.Errorf("metric %s has unit %q: %s", m.Name, m.Unit, line)
			}
		}
		for k := range fields {
			if !declared[k] {
				t.Errorf("EMF line has an undeclared field %q: %s", k, line)
			}
		}
	}
	if lines == 0 {
		t.Fatal("no EMF lines: is the recorder wired into the control plane?")
	}
	return counts, values
}
