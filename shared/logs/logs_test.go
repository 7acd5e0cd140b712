package logs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"
)

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

// line is a JSON log line as slog writes it.
func line(sec int, msg, job, task string) string {
	m := map[string]any{"time": t0.Add(time.Duration(sec) * time.Second).Format(time.RFC3339Nano), "level": "INFO", "msg": msg}
	if job != "" {
		m["job_id"] = job
	}
	if task != "" {
		m["task"] = task
		m["attempt"] = 1
		m["executor_id"] = "e1"
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func msgs(pg Page) []string {
	out := []string{}
	for _, l := range pg.Lines {
		var f struct{ Msg string }
		_ = json.Unmarshal(l.Fields, &f)
		out = append(out, f.Msg)
	}
	return out
}

func TestMatch(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, raw string
		q         Query
		want      bool
	}{
		{"the job's line", line(0, "a", "j1", ""), Query{Job: "j1"}, true},
		{"a task's line, by job", line(0, "a", "j1", "j1/0/2"), Query{Job: "j1"}, true},
		{"a task's line, by task", line(0, "a", "j1", "j1/0/2"), Query{Job: "j1", Task: "j1/0/2"}, true},
		{"another task's line", line(0, "a", "j1", "j1/0/3"), Query{Job: "j1", Task: "j1/0/2"}, false},
		{"a job-level line is no task's", line(0, "a", "j1", ""), Query{Job: "j1", Task: "j1/0/2"}, false},
		{"another job's line", line(0, "a", "j2", "j2/0/2"), Query{Job: "j1"}, false},
		{"a prefix of the id is another job", line(0, "a", "j10", ""), Query{Job: "j1"}, false},
		{"a line without a job", line(0, "a", "", ""), Query{Job: "j1"}, false},
		{"not JSON", "j1 plain text", Query{Job: "j1"}, false},
		{"broken JSON", `{"job_id":"j1"`, Query{Job: "j1"}, false},
		{"the id in another field only", `{"msg":"j1","owner":"j1"}`, Query{Job: "j1"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, got := Match([]byte(tc.raw), tc.q); got != tc.want {
				t.Fatalf("Match = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		q     Query
		limit int
		ok    bool
	}{
		{Query{Job: "j0123"}, DefaultLimit, true},
		{Query{Job: "j0123", Limit: 7}, 7, true},
		{Query{Job: "j0123", Limit: MaxLimit + 1}, MaxLimit, true},
		{Query{Job: "j0123", Task: "j0123/1/2"}, DefaultLimit, true},
		{Query{Job: ""}, 0, false},
		{Query{Job: `j" || $.x = "`}, 0, false},
		{Query{Job: "j0123/1/2"}, 0, false},
		{Query{Job: "j0123", Task: `j0123/1/2" }`}, 0, false},
	} {
		limit, err := tc.q.Validate()
		if (err == nil) != tc.ok || (tc.ok && limit != tc.limit) {
			t.Errorf("Validate(%+v) = %d, %v; want ok=%v limit %d", tc.q, limit, err, tc.ok, tc.limit)
		}
	}
}

func TestFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "run.log")
	write := func(lines ...string) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, l := range lines {
			fmt.Fprint(f, l)
		}
	}
	src := File{Path: path}
	ctx := context.Background()
	// No file yet: nothing, and a cursor to poll with.
	pg, err := src.Query(ctx, Query{Job: "j1"})
	if err != nil || len(pg.Lines) != 0 || pg.Next == "" {
		t.Fatalf("missing file: %+v, %v", pg, err)
	}
	write(line(0, "submitted", "j1", "")+"\n", "not json\n", line(1, "other", "j2", "j2/0/0")+"\n",
		line(2, "claimed", "j1", "j1/0/0")+"\n", line(3, "claimed", "j1", "j1/0/1")+"\n", `{"partial":`)
	cases := []struct {
		name string
		q    Query
		want []string
	}{
		{"the job", Query{Job: "j1"}, []string{"submitted", "claimed", "claimed"}},
		{"a task", Query{Job: "j1", Task: "j1/0/1"}, []string{"claimed"}},
		{"since", Query{Job: "j1", Since: t0.Add(2 * time.Second)}, []string{"claimed", "claimed"}},
		{"a limit", Query{Job: "j1", Limit: 1}, []string{"submitted"}},
		{"another job", Query{Job: "j2"}, []string{"other"}},
		{"no lines", Query{Job: "j3"}, []string{}},
	}
	for _, tc := range cases {
		pg, err := src.Query(ctx, tc.q)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := msgs(pg); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	// Following: a page of one, then the rest, then what is appended
	// (the partial line once complete), never a line twice.
	q := Query{Job: "j1", Limit: 1}
	var got []string
	for i := 0; i < 5; i++ {
		pg, err := src.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, msgs(pg)...)
		q.Cursor = pg.Next
	}
	write(`"x","job_id":"j1","msg":"late"}` + "\n")
	pg, err = src.Query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, msgs(pg)...)
	if want := []string{"submitted", "claimed", "claimed", "late"}; !slices.Equal(got, want) {
		t.Fatalf("followed %q, want %q", got, want)
	}
	if _, err := src.Query(ctx, Query{Job: "j1", Cursor: "c123"}); !errors.Is(err, ErrBadCursor) {
		t.Fatalf("a foreign cursor: %v, want ErrBadCursor", err)
	}
}

// fakeCW serves FilterLogEvents from stored events per group, ignoring
// the pattern (as moto does) and paging by pageSize.
type fakeCW struct {
	mu       sync.Mutex
	groups   map[string][]types.FilteredLogEvent
	pageSize int
	calls    []cloudwatchlogs.FilterLogEventsInput
}

func (f *fakeCW) FilterLogEvents(_ context.Context, in *cloudwatchlogs.FilterLogEventsInput, _ ...func(*cloudwatchlogs.Options)) (*cloudwatchlogs.FilterLogEventsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, *in)
	var evs []types.FilteredLogEvent
	for _, e := range f.groups[aws.ToString(in.LogGroupName)] {
		if aws.ToInt64(e.Timestamp) >= aws.ToInt64(in.StartTime) {
			evs = append(evs, e)
		}
	}
	start := 0
	if in.NextToken != nil {
		fmt.Sscan(*in.NextToken, &start)
	}
	end := min(start+f.pageSize, len(evs), start+int(aws.ToInt32(in.Limit)))
	out := &cloudwatchlogs.FilterLogEventsOutput{Events: evs[start:end]}
	if end < len(evs) {
		out.NextToken = aws.String(fmt.Sprint(end))
	}
	return out, nil
}

func cwEv(group string, n int, sec int, msg, job, task string) types.FilteredLogEvent {
	return types.FilteredLogEvent{EventId: aws.String(fmt.Sprintf("%s-%03d", group, n)), Timestamp: aws.Int64(t0.Add(time.Duration(sec) * time.Second).UnixMilli()),
		Message: aws.String(line(sec, msg, job, task))}
}

func TestCloudWatch(t *testing.T) {
	t.Parallel()
	wrapped, _ := json.Marshal(map[string]any{"timestamp": "x", "level": "INFO", "message": json.RawMessage(line(4, "wrapped", "j1", "j1/0/0"))})
	fake := &fakeCW{pageSize: 2, groups: map[string][]types.FilteredLogEvent{
		"/aws/lambda/api": {cwEv("api", 1, 0, "submitted", "j1", ""), cwEv("api", 2, 1, "other job", "j2", ""), cwEv("api", 3, 5, "cancelled", "j1", "")},
		"/aws/lambda/executor": {cwEv("ex", 1, 2, "claimed", "j1", "j1/0/0"), cwEv("ex", 2, 2, "claimed", "j1", "j1/0/1"),
			{EventId: aws.String("ex-003"), Timestamp: aws.Int64(t0.Add(4 * time.Second).UnixMilli()), Message: aws.String(string(wrapped))},
			{EventId: aws.String("ex-004"), Timestamp: aws.Int64(t0.Add(4 * time.Second).UnixMilli()), Message: aws.String("REPORT RequestId: x")}},
	}}
	src := CloudWatch{Client: fake, Groups: []string{"/aws/lambda/api", "/aws/lambda/executor"}, MaxPages: 10}
	ctx := context.Background()
	cases := []struct {
		name string
		q    Query
		want []string
	}{
		{"the job, merged by time", Query{Job: "j1"}, []string{"submitted", "claimed", "claimed", "wrapped", "cancelled"}},
		{"a task", Query{Job: "j1", Task: "j1/0/0"}, []string{"claimed", "wrapped"}},
		{"since", Query{Job: "j1", Since: t0.Add(4 * time.Second)}, []string{"wrapped", "cancelled"}},
		{"a limit", Query{Job: "j1", Limit: 2}, []string{"submitted", "claimed"}},
	}
	for _, tc := range cases {
		pg, err := src.Query(ctx, tc.q)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := msgs(pg); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	for _, c := range fake.calls {
		if p := aws.ToString(c.FilterPattern); !strings.Contains(p, `$.job_id = "j1"`) {
			t.Fatalf("filter pattern %q does not select the job", p)
		}
	}
	// Following with pages of one: every line once, in order, then new ones.
	q := Query{Job: "j1", Limit: 1}
	var got []string
	for i := 0; i < 8; i++ {
		pg, err := src.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, msgs(pg)...)
		q.Cursor = pg.Next
	}
	fake.groups["/aws/lambda/executor"] = append(fake.groups["/aws/lambda/executor"], cwEv("ex", 5, 5, "committed", "j1", "j1/0/0"))
	pg, err := src.Query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, msgs(pg)...)
	if want := []string{"submitted", "claimed", "claimed", "wrapped", "cancelled", "committed"}; !slices.Equal(got, want) {
		t.Fatalf("followed %q, want %q", got, want)
	}
	if _, err := src.Query(ctx, Query{Job: "j1", Cursor: "f12"}); !errors.Is(err, ErrBadCursor) {
		t.Fatalf("a foreign cursor: %v, want ErrBadCursor", err)
	}
}

func TestFilterPattern(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		q    Query
		want string
	}{
		{Query{Job: "j1"}, `{ ($.job_id = "j1") || ($.message.job_id = "j1") }`},
		{Query{Job: "j1", Task: "j1/0/2"}, `{ ($.job_id = "j1" && $.task = "j1/0/2") || ($.message.job_id = "j1" && $.message.task = "j1/0/2") }`},
	} {
		if got := FilterPattern(tc.q); got != tc.want {
			t.Errorf("FilterPattern(%+v) = %s, want %s", tc.q, got, tc.want)
		}
	}
}
