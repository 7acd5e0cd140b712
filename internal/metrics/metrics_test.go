package metrics

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/spec"
)

var clock = time.UnixMilli(1_700_000_000_123)

func newTest() (*Recorder, *bytes.Buffer) {
	var buf bytes.Buffer
	r := New(&buf, "prod")
	r.SetClock(func() time.Time { return clock })
	return r, &buf
}

func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var docs []map[string]any
	sc := bufio.NewScanner(buf)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var d map[string]any
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("line %q is not a JSON object: %v", sc.Text(), err)
		}
		docs = append(docs, d)
	}
	return docs
}

var units = map[string]bool{"Count": true, "Milliseconds": true}

// validEMF checks a document against the EMF specification: _aws with an
// integer Timestamp (ms) and CloudWatchMetrics directives, each with a
// Namespace, DimensionSets whose keys are string members of the root, and
// MetricDefinitions whose Names are numeric members (or arrays of at most
// 100 numbers) of the root.
func validEMF(t *testing.T, d map[string]any) {
	t.Helper()
	aws, ok := d["_aws"].(map[string]any)
	if !ok {
		t.Fatalf("no _aws object: %v", d)
	}
	if ts, ok := aws["Timestamp"].(float64); !ok || ts != float64(clock.UnixMilli()) {
		t.Errorf("_aws.Timestamp = %v, want %d", aws["Timestamp"], clock.UnixMilli())
	}
	dirs, ok := aws["CloudWatchMetrics"].([]any)
	if !ok || len(dirs) == 0 {
		t.Fatalf("_aws.CloudWatchMetrics = %v", aws["CloudWatchMetrics"])
	}
	for _, x := range dirs {
		dir := x.(map[string]any)
		if dir["Namespace"] != Namespace {
			t.Errorf("Namespace %v, want %s", dir["Namespace"], Namespace)
		}
		sets, ok := dir["Dimensions"].([]any)
		if !ok || len(sets) == 0 {
			t.Fatalf("Dimensions = %v", dir["Dimensions"])
		}
		for _, s := range sets {
			keys := s.([]any)
			if len(keys) > 9 {
				t.Errorf("dimension set %v has over 9 keys", keys)
			}
			for _, k := range keys {
				if _, ok := d[k.(string)].(string); !ok {
					t.Errorf("dimension %v is not a string member of the root", k)
				}
			}
		}
		defs, ok := dir["Metrics"].([]any)
		if !ok || len(defs) == 0 || len(defs) > 100 {
			t.Fatalf("Metrics = %v", dir["Metrics"])
		}
		for _, x := range defs {
			def := x.(map[string]any)
			name, _ := def["Name"].(string)
			if !units[def["Unit"].(string)] {
				t.Errorf("metric %s: unit %v", name, def["Unit"])
			}
			switch v := d[name].(type) {
			case float64:
			case []any:
				if len(v) == 0 || len(v) > 100 {
					t.Errorf("metric %s: %d values", name, len(v))
				}
				for _, n := range v {
					if _, ok := n.(float64); !ok {
						t.Errorf("metric %s: value %v is not a number", name, n)
					}
				}
			default:
				t.Errorf("metric %s: root member %v is neither a number nor an array of numbers", name, d[name])
			}
		}
	}
}

func TestDocumentsAreEMF(t *testing.T) {
	r, buf := newTest()
	r.TaskClaimed(spec.PriorityHigh)
	r.TaskClaimed(spec.PriorityHigh)
	r.TaskCommitted(spec.PriorityHigh, 1500*time.Millisecond, 20*time.Millisecond)
	r.ReadyToClaimed(spec.PriorityHigh, 250*time.Millisecond)
	r.TaskRetried(spec.PriorityLow)
	r.JobFailed()
	r.Repaired(control.RepairExpiredLease, 2)
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	docs := lines(t, buf)
	if len(docs) != 4 { // stack; high; low; kind
		t.Fatalf("%d lines, want 4 (one per dimension value):\n%s", len(docs), buf)
	}
	for _, d := range docs {
		validEMF(t, d)
	}
	got := map[string]map[string]any{}
	for _, d := range docs {
		key := "stack"
		for _, k := range []string{DimPriority, DimKind} {
			if v, ok := d[k].(string); ok {
				key = k + "=" + v
			}
		}
		delete(d, "_aws")
		got[key] = d
	}
	want := map[string]map[string]any{
		"stack":             {"Stack": "prod", JobsFailed: 1.0},
		"Priority=high":     {"Stack": "prod", "Priority": "high", TasksClaimed: 2.0, TasksCommitted: 1.0, TaskDuration: []any{1500.0}, CommitLatency: []any{20.0}, ReadyToClaimed: []any{250.0}},
		"Priority=low":      {"Stack": "prod", "Priority": "low", TasksRetried: 1.0},
		"Kind=ExpiredLease": {"Stack": "prod", "Kind": "ExpiredLease", SweepRepairs: 2.0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("documents (-want +got):\n%s", diff)
	}
}

// The directive of a priority document publishes the metric both per
// stack and per stack and priority; the job document per stack only.
func TestDimensionSets(t *testing.T) {
	r, buf := newTest()
	r.TaskClaimed(spec.PriorityNormal)
	r.JobFailed()
	_ = r.Flush()
	for _, d := range lines(t, buf) {
		dir := d["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
		want := []any{[]any{"Stack"}}
		if _, ok := d[DimPriority]; ok {
			want = append(want, []any{"Stack", "Priority"})
		}
		if diff := cmp.Diff(want, dir["Dimensions"]); diff != "" {
			t.Errorf("dimensions (-want +got):\n%s", diff)
		}
	}
}

// Thousands of tasks make one line per dimension value and flush: counts
// are summed, durations kept in arrays of at most 100 values per line.
func TestAggregation(t *testing.T) {
	r, buf := newTest()
	for i := range 1000 {
		r.TaskClaimed(spec.PriorityNormal)
		if i < 250 {
			r.TaskCommitted(spec.PriorityNormal, time.Duration(i+1)*time.Millisecond, time.Millisecond)
		}
	}
	_ = r.Flush()
	docs := lines(t, buf)
	if len(docs) != 3 {
		t.Fatalf("%d lines, want 3 (250 durations in chunks of 100)", len(docs))
	}
	var claimed, committed float64
	var durations, commits int
	for _, d := range docs {
		validEMF(t, d)
		claimed += num(d[TasksClaimed])
		committed += num(d[TasksCommitted])
		durations += count(d[TaskDuration])
		commits += count(d[CommitLatency])
	}
	if claimed != 1000 || committed != 250 || durations != 250 || commits != 250 {
		t.Errorf("claimed %v committed %v durations %d commit latencies %d; want 1000, 250, 250, 250", claimed, committed, durations, commits)
	}
	// Flushed: nothing is written twice.
	buf.Reset()
	_ = r.Flush()
	if buf.Len() != 0 {
		t.Errorf("a second flush wrote %q", buf)
	}
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

func count(v any) int {
	a, _ := v.([]any)
	return len(a)
}

// Dimensions stay bounded: whatever the callers pass, a Priority is one
// of three classes and a Kind one of control.Repairs, so no job id (or any
// other unbounded value) can become a dimension, which would make a
// custom metric per job.
func TestDimensionsAreBounded(t *testing.T) {
	r, buf := newTest()
	const job = "j018f3a2b4c5d6e7f8a9b"
	r.TaskClaimed(spec.Priority(job))
	r.TaskFailed(spec.Priority(job + "/0/3"))
	r.Repaired(control.Repair(job), 1)
	for _, k := range control.Repairs {
		r.Repaired(k, 1)
	}
	for _, p := range []spec.Priority{spec.PriorityHigh, spec.PriorityNormal, spec.PriorityLow, ""} {
		r.TaskClaimed(p)
	}
	_ = r.Flush()
	if strings.Contains(buf.String(), job) {
		t.Fatalf("a job id reached the metrics:\n%s", buf)
	}
	allowed := map[string]map[string]bool{
		DimStack:    {"prod": true},
		DimPriority: {"high": true, "normal": true, "low": true},
		DimKind:     {"Other": true},
	}
	for _, k := range control.Repairs {
		allowed[DimKind][string(k)] = true
	}
	for _, d := range lines(t, buf) {
		validEMF(t, d)
		for _, s := range d["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)["Dimensions"].([]any) {
			for _, k := range s.([]any) {
				vals, ok := allowed[k.(string)]
				if !ok {
					t.Errorf("dimension %v is not Stack, Priority or Kind", k)
				}
				if v := d[k.(string)].(string); !vals[v] {
					t.Errorf("dimension %v=%q is outside its fixed set", k, v)
				}
			}
		}
	}
}

// A nil recorder (metrics off) records and writes nothing.
func TestNilRecorder(t *testing.T) {
	var r *Recorder
	r.TaskClaimed(spec.PriorityHigh)
	r.TaskCommitted(spec.PriorityHigh, time.Second, time.Second)
	r.Repaired(control.RepairDeadLetter, 1)
	r.JobFailed()
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	if FromEnv(func(string) string { return "" }) != nil {
		t.Error("FromEnv without a stack returned a recorder")
	}
	if FromEnv(func(k string) string { return map[string]string{EnvStack: "s"}[k] }) == nil {
		t.Error("FromEnv with a stack returned none")
	}
}

// Run flushes on its interval and once more when stopped.
func TestRunFlushes(t *testing.T) {
	r, buf := newTest()
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() { defer close(exited); r.Run(done, time.Hour) }()
	r.TaskClaimed(spec.PriorityNormal)
	close(done)
	<-exited
	if docs := lines(t, buf); len(docs) != 1 || docs[0][TasksClaimed] != 1.0 {
		t.Fatalf("after stop: %v", docs)
	}
}
