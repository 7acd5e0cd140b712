package spec

import (
	"regexp"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestGraph(t *testing.T) {
	t.Parallel()
	// The diamond declared bottom-up: d after b and c, b and c after a.
	upsideDown := &Job{Name: "j", Stages: []Stage{
		{Name: "d", Task: "t", After: []string{"c", "b"}, Partitions: &Partitions{Count: 1}},
		{Name: "b", Task: "t", After: []string{"a"}, Partitions: &Partitions{Count: 1}},
		{Name: "c", Task: "t", After: []string{"a"}, Partitions: &Partitions{Count: 1}},
		{Name: "a", Task: "t", Partitions: &Partitions{Count: 1}},
	}}
	// Two independent chains and a lone stage.
	forest := &Job{Name: "j", Stages: []Stage{
		{Name: "x2", Task: "t", After: []string{"x1"}, Partitions: &Partitions{Count: 1}},
		{Name: "y1", Task: "t", Partitions: &Partitions{Count: 1}},
		{Name: "x1", Task: "t", Partitions: &Partitions{Count: 1}},
		{Name: "y2", Task: "t", After: []string{"y1"}, Partitions: &Partitions{Count: 1}},
		{Name: "z", Task: "t", Partitions: &Partitions{Count: 1}},
	}}
	type want struct {
		Roots, Sinks, TopoOrder []int
		Downstream              [][]int
	}
	tests := []struct {
		name string
		job  *Job
		want want
	}{
		{"word count", wordCountJob(), want{
			Roots: []int{0}, Sinks: []int{1}, TopoOrder: []int{0, 1},
			Downstream: [][]int{{1}, nil},
		}},
		{"diamond", diamondJob(), want{
			Roots: []int{0}, Sinks: []int{3}, TopoOrder: []int{0, 1, 2, 3},
			Downstream: [][]int{{1, 2}, {3}, {3}, nil},
		}},
		{"diamond declared upside down", upsideDown, want{
			Roots: []int{3}, Sinks: []int{0}, TopoOrder: []int{3, 1, 2, 0},
			Downstream: [][]int{nil, {0}, {0}, {1, 2}},
		}},
		{"forest", forest, want{
			Roots: []int{1, 2, 4}, Sinks: []int{0, 3, 4}, TopoOrder: []int{1, 2, 0, 3, 4},
			Downstream: [][]int{nil, {3}, {0}, nil, nil},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := tt.job.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			got := want{Roots: tt.job.Roots(), Sinks: tt.job.Sinks(), TopoOrder: tt.job.TopoOrder()}
			for i := range tt.job.Stages {
				got.Downstream = append(got.Downstream, tt.job.Downstream(i))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("graph mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTopoOrderCycle(t *testing.T) {
	t.Parallel()
	j := diamondJob()
	j.Stages[1].After = []string{"a", "d"} // b <-> d
	if got, want := j.TopoOrder(), []int{0, 2}; !cmp.Equal(got, want) {
		t.Errorf("TopoOrder = %v, want %v (stages on the cycle left out)", got, want)
	}
}

func TestStageSettings(t *testing.T) {
	t.Parallel()
	const s = time.Second
	type settings struct {
		Retry    Retry
		Lease    time.Duration
		Priority Priority
	}
	tests := []struct {
		name       string
		job, stage Stage // job-level settings are taken from job's fields
		want       settings
	}{
		{
			name: "defaults",
			want: settings{Retry{DefaultMaxAttempts, DefaultBackoff}, time.Duration(DefaultLease), DefaultPriority},
		},
		{
			name: "job settings",
			job:  Stage{Retry: &Retry{MaxAttempts: 7, Backoff: Duration(2 * s)}, Lease: Duration(90 * s), Priority: PriorityLow},
			want: settings{Retry{7, Duration(2 * s)}, 90 * s, PriorityLow},
		},
		{
			name:  "stage overrides job",
			job:   Stage{Retry: &Retry{MaxAttempts: 7, Backoff: Duration(2 * s)}, Lease: Duration(90 * s), Priority: PriorityLow},
			stage: Stage{Retry: &Retry{MaxAttempts: 1, Backoff: Duration(5 * s)}, Lease: Duration(10 * s), Priority: PriorityHigh},
			want:  settings{Retry{1, Duration(5 * s)}, 10 * s, PriorityHigh},
		},
		{
			name:  "retry fields resolve separately",
			job:   Stage{Retry: &Retry{Backoff: Duration(2 * s)}},
			stage: Stage{Retry: &Retry{MaxAttempts: 9}},
			want:  settings{Retry{9, Duration(2 * s)}, time.Duration(DefaultLease), DefaultPriority},
		},
		{
			name:  "empty stage retry inherits",
			job:   Stage{Retry: &Retry{MaxAttempts: 4}},
			stage: Stage{Retry: &Retry{}},
			want:  settings{Retry{4, DefaultBackoff}, time.Duration(DefaultLease), DefaultPriority},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := tt.stage
			st.Name, st.Task, st.Partitions = "s", "t", &Partitions{Count: 1}
			j := &Job{Name: "j", Retry: tt.job.Retry, Lease: tt.job.Lease, Priority: tt.job.Priority, Stages: []Stage{st}}
			if err := j.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			got := settings{j.StageRetry(0), j.StageLease(0), j.StagePriority(0)}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("settings mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLookups(t *testing.T) {
	t.Parallel()
	wc := wordCountJob()
	if i, ok := wc.StageIndex("reduce"); i != 1 || !ok {
		t.Errorf(`StageIndex("reduce") = %d, %t; want 1, true`, i, ok)
	}
	if i, ok := wc.StageIndex("nope"); i != -1 || ok {
		t.Errorf(`StageIndex("nope") = %d, %t; want -1, false`, i, ok)
	}
	if i, ok := wc.ShuffleSource(1); i != 0 || !ok {
		t.Errorf("ShuffleSource(1) = %d, %t; want 0, true", i, ok)
	}
	if i, ok := wc.ShuffleSource(0); i != -1 || ok {
		t.Errorf("ShuffleSource(0) = %d, %t; want -1, false", i, ok)
	}
	if got := wc.Stages[0].Partitions.Input.SplitSizeOrDefault(); got != 1<<20 {
		t.Errorf("SplitSizeOrDefault = %d, want %d", got, 1<<20)
	}
	if got := (&Input{}).SplitSizeOrDefault(); got != DefaultSplitSize {
		t.Errorf("SplitSizeOrDefault of unset = %d, want %d", got, DefaultSplitSize)
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string
	}{
		{
			name: "word count",
			in:   wordCountYAML,
			want: `{"name":"wordcount","stages":[{"name":"map","task":"wordcount-map","partitions":{"input":{"prefix":"s3://bucket/in/","splitSize":1048576}},"shuffle":{"partitions":4}},{"name":"reduce","task":"wordcount-reduce","after":["map"],"priority":"high"}],"retry":{"maxAttempts":5,"backoff":"10s"},"lease":"5m0s"}`,
		},
		{
			name: "diamond",
			in:   diamondYAML,
			want: `{"name":"diamond","stages":[{"name":"a","task":"split","partitions":{"count":2,"params":[{"shard":"0"},{"shard":"1"}]}},{"name":"b","task":"left","after":["a"],"partitions":{"count":3},"lease":"2m0s"},{"name":"c","task":"right","after":["a"],"partitions":{"count":3},"retry":{"maxAttempts":1}},{"name":"d","task":"join","after":["b","c"],"partitions":{"count":1}}],"priority":"low"}`,
		},
		{
			name: "no HTML escaping",
			in:   `{"name": "j", "stages": [{"name": "s", "task": "t", "partitions": {"count": 1, "params": [{"q": "a<b && c>d"}]}}]}`,
			want: `{"name":"j","stages":[{"name":"s","task":"t","partitions":{"count":1,"params":[{"q":"a<b && c>d"}]}}]}`,
		},
	}
	hashes := make(map[string]string)
	for _, tt := range tests {
		j, err := Parse([]byte(tt.in))
		if err != nil {
			t.Fatalf("%s: Parse: %v", tt.name, err)
		}
		hashes[tt.name] = j.Hash()
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := j.Encode()
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if string(b) != tt.want {
				t.Errorf("Encode =\n%s\nwant\n%s", b, tt.want)
			}
			again, err := Parse(b)
			if err != nil {
				t.Fatalf("Parse(Encode): %v", err)
			}
			if diff := cmp.Diff(j, again); diff != "" {
				t.Errorf("round trip mismatch (-first +second):\n%s", diff)
			}
			if h := again.Hash(); h != j.Hash() {
				t.Errorf("Hash changed over the round trip: %s, then %s", j.Hash(), h)
			}
			if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(j.Hash()) {
				t.Errorf("Hash = %q, want 32 hex digits", j.Hash())
			}
		})
	}
	seen := make(map[string]string)
	for name, h := range hashes {
		if other, dup := seen[h]; dup {
			t.Errorf("%s and %s have the same hash %s", name, other, h)
		}
		seen[h] = name
	}
}
