package logs

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
)

// FilterAPI is the CloudWatch Logs call CloudWatch makes.
type FilterAPI interface {
	FilterLogEvents(context.Context, *cloudwatchlogs.FilterLogEventsInput, ...func(*cloudwatchlogs.Options)) (*cloudwatchlogs.FilterLogEventsOutput, error)
}

// CloudWatch reads a job's lines from the stack's log groups (the
// functions' and the Fargate executor's) with FilterLogEvents and a JSON
// filter pattern on job_id (and task), so only matching lines leave
// CloudWatch; each is checked again here.
//
// A cursor is the time of the last line returned and the ids of the
// lines returned at that time, so a poll returns what arrived since
// without repeats. A line ingested late with an older time than the
// cursor's is missed by a poll that has moved past it.
type CloudWatch struct {
	Client FilterAPI
	Groups []string
	// MaxPages bounds the FilterLogEvents calls per group per query
	// (default 5): a page may hold few or no matches.
	MaxPages int
}

type cwCursor struct {
	T   int64    `json:"t"`
	IDs []string `json:"ids,omitempty"`
}

// FilterPattern is the CloudWatch Logs filter pattern of q's lines. A
// function whose log format is JSON may wrap a line as "message"; both
// forms match.
func FilterPattern(q Query) string {
	one := func(root string) string {
		p := fmt.Sprintf(`%s.job_id = %q`, root, q.Job)
		if q.Task != "" {
			p += fmt.Sprintf(` && %s.task = %q`, root, q.Task)
		}
		return "(" + p + ")"
	}
	return "{ " + one("$") + " || " + one("$.message") + " }"
}

type cwEvent struct {
	t    int64
	id   string
	line Line
}

// Query returns up to q.Limit of q's lines after the cursor, oldest
// first, merged across the groups.
func (c CloudWatch) Query(ctx context.Context, q Query) (Page, error) {
	limit, err := q.Validate()
	if err != nil {
		return Page{}, err
	}
	cur, err := parseCWCursor(q.Cursor)
	if err != nil {
		return Page{}, err
	}
	if q.Cursor == "" && !q.Since.IsZero() {
		cur.T = q.Since.UnixMilli()
	}
	seen := map[string]bool{}
	for _, id := range cur.IDs {
		seen[id] = true
	}
	need := int32(min(limit+len(cur.IDs), MaxLimit))
	pattern := FilterPattern(q)
	maxPages := cmp.Or(c.MaxPages, 5)
	// The groups are read at once: a request's time is its slowest
	// group's, not their sum.
	type result struct {
		evs      []cwEvent
		last     int64
		complete bool
		err      error
	}
	results := make([]result, len(c.Groups))
	var wg sync.WaitGroup
	for i, g := range c.Groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &results[i]
			r.evs, r.last, r.complete, r.err = c.readGroup(ctx, g, q, pattern, cur.T, need, maxPages)
		}()
	}
	wg.Wait()
	var evs []cwEvent
	// horizon: the groups whose reading stopped early were read up to it;
	// later events of theirs are unseen, so none later is returned.
	horizon := int64(-1)
	for i, r := range results {
		if r.err != nil {
			return Page{}, fmt.Errorf("read logs of %s: %w", c.Groups[i], r.err)
		}
		evs = append(evs, r.evs...)
		if !r.complete && (horizon < 0 || r.last < horizon) {
			horizon = r.last
		}
	}
	slices.SortStableFunc(evs, func(a, b cwEvent) int { return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.id, b.id)) })
	pg := Page{Lines: []Line{}}
	next := cwCursor{T: cur.T, IDs: cur.IDs}
	for _, e := range evs {
		if len(pg.Lines) >= limit || (horizon >= 0 && e.t > horizon) {
			break
		}
		if e.t < cur.T || (e.t == cur.T && seen[e.id]) {
			continue
		}
		seen[e.id] = true
		pg.Lines = append(pg.Lines, e.line)
		if e.t != next.T {
			next = cwCursor{T: e.t}
		}
		next.IDs = append(next.IDs, e.id)
	}
	pg.Next = encodeCWCursor(next)
	return pg, nil
}

// readGroup reads one group's matching events from start on, until it
// has need of them, the group has no more, or maxPages pages were read;
// last is the latest time it saw and complete whether it saw everything.
func (c CloudWatch) readGroup(ctx context.Context, group string, q Query, pattern string, start int64, need int32, maxPages int) (evs []cwEvent, last int64, complete bool, err error) {
	in := &cloudwatchlogs.FilterLogEventsInput{
		LogGroupName: aws.String(group), FilterPattern: aws.String(pattern),
		StartTime: aws.Int64(start), Limit: aws.Int32(need),
	}
	last = start
	got := int32(0)
	for page := 0; page < maxPages; page++ {
		out, err := c.Client.FilterLogEvents(ctx, in)
		if err != nil {
			return nil, 0, false, err
		}
		for _, e := range out.Events {
			t := aws.ToInt64(e.Timestamp)
			last = max(last, t)
			l, ok := Match([]byte(aws.ToString(e.Message)), q)
			if !ok {
				l, ok = matchWrapped([]byte(aws.ToString(e.Message)), q)
			}
			if !ok {
				continue
			}
			got++
			l.Time = time.UnixMilli(t).UTC()
			evs = append(evs, cwEvent{t: t, id: aws.ToString(e.EventId), line: l})
		}
		if out.NextToken == nil {
			return evs, last, true, nil
		}
		if got >= need {
			break
		}
		in.NextToken = out.NextToken
	}
	return evs, last, false, nil
}

// matchWrapped matches a line a JSON log format wrapped as "message".
func matchWrapped(raw []byte, q Query) (Line, bool) {
	var w struct {
		Message json.RawMessage `json:"message"`
	}
	if err := json.Unmarshal(raw, &w); err != nil || len(w.Message) == 0 {
		return Line{}, false
	}
	if w.Message[0] == '"' {
		var s string
		if json.Unmarshal(w.Message, &s) != nil {
			return Line{}, false
		}
		return Match([]byte(s), q)
	}
	return Match(w.Message, q)
}

const cwCursorPrefix = "c"

func parseCWCursor(s string) (cwCursor, error) {
	var c cwCursor
	if s == "" {
		return c, nil
	}
	if len(s) < 2 || s[:1] != cwCursorPrefix {
		return c, ErrBadCursor
	}
	b, err := base64.RawURLEncoding.DecodeString(s[1:])
	if err != nil || json.Unmarshal(b, &c) != nil || c.T < 0 {
		return cwCursor{}, ErrBadCursor
	}
	return c, nil
}

func encodeCWCursor(c cwCursor) string {
	b, _ := json.Marshal(c)
	return cwCursorPrefix + base64.RawURLEncoding.EncodeToString(b)
}
