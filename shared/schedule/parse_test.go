package schedule

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/spec"
	"github.com/google/go-cmp/cmp"
)

const validSpec = `{"name":"etl","stages":[{"name":"load","task":"etl.load","partitions":{"count":2}}]}`

// request builds a create request from a valid one, with fields replaced
// (a nil value deletes the field).
func request(tb testing.TB, changes map[string]any) []byte {
	tb.Helper()
	m := map[string]any{
		"name":       "nightly-etl",
		"spec":       json.RawMessage(validSpec),
		"expression": "30 2 * * *",
		"timeZone":   "America/New_York",
		"start":      "2024-03-01T00:00:00-05:00",
	}
	for k, v := range changes {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		tb.Fatalf("marshal request: %v", err)
	}
	return b
}

func TestParseAccepts(t *testing.T) {
	t.Parallel()
	canonical, err := spec.Parse([]byte(validSpec))
	if err != nil {
		t.Fatal(err)
	}
	canonicalSpec, err := canonical.Encode()
	if err != nil {
		t.Fatal(err)
	}
	base := Schedule{
		Name:       "nightly-etl",
		Spec:       canonicalSpec,
		Expression: "30 2 * * *",
		TimeZone:   "America/New_York",
		Start:      time.Date(2024, 3, 1, 5, 0, 0, 0, time.UTC),
		Overlap:    OverlapSkip,
		CatchUp:    CatchUpFireOnce,
	}
	tests := []struct {
		name    string
		changes map[string]any
		want    func(s *Schedule)
	}{
		{"defaults filled, start in UTC", nil, func(*Schedule) {}},
		{"everything given", map[string]any{"end": "2025-01-01T00:00:00Z", "overlap": "cancelPrevious", "catchUp": "skipMissed", "paused": true},
			func(s *Schedule) {
				s.End = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
				s.Overlap, s.CatchUp, s.Paused = OverlapCancelPrevious, CatchUpSkipMissed, true
			}},
		{"no time zone means UTC", map[string]any{"timeZone": nil}, func(s *Schedule) { s.TimeZone = "UTC" }},
		{"rate without a zone", map[string]any{"expression": "rate(1 hour)", "timeZone": nil}, func(s *Schedule) { s.Expression, s.TimeZone = "rate(1 hour)", "" }},
		{"nulls are absent", map[string]any{"end": json.RawMessage("null"), "overlap": json.RawMessage("null")}, func(*Schedule) {}},
		{"spec is stored canonically", map[string]any{"spec": json.RawMessage(`{ "stages": [ {"task":"etl.load","name":"load","partitions":{"count":2}} ], "name": "etl" }`)}, func(*Schedule) {}},
		{"descriptor", map[string]any{"expression": "@daily"}, func(s *Schedule) { s.Expression = "@daily" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse(request(t, tt.changes))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			want := base
			tt.want(&want)
			if diff := cmp.Diff(&want, got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	tests := []struct {
		name    string
		data    []byte // when nil, request(changes)
		changes map[string]any
		want    []spec.FieldError
	}{
		// The list.
		{name: "invalid cron", changes: map[string]any{"expression": "61 * * * *"},
			want: []spec.FieldError{{Field: "expression", Message: "is not a valid five-field cron expression (minute hour day-of-month month day-of-week): end of range (61) above maximum (59): 61"}}},
		{name: "cron with six fields", changes: map[string]any{"expression": "0 0 12 * * ?"},
			want: []spec.FieldError{{Field: "expression", Message: "is not a valid five-field cron expression (minute hour day-of-month month day-of-week): expected exactly 5 fields, found 6: [0 0 12 * * ?]"}}},
		{name: "unknown time zone", changes: map[string]any{"timeZone": "Mars/Olympus_Mons"},
			want: []spec.FieldError{{Field: "timeZone", Message: `unknown time zone "Mars/Olympus_Mons"; use an IANA name such as "America/New_York"`}}},
		{name: "end before start", changes: map[string]any{"end": "2024-02-01T00:00:00Z"},
			want: []spec.FieldError{{Field: "end", Message: "must be after start (2024-03-01T05:00:00Z)"}}},
		{name: "end equal to start", changes: map[string]any{"end": "2024-03-01T05:00:00Z"},
			want: []spec.FieldError{{Field: "end", Message: "must be after start (2024-03-01T05:00:00Z)"}}},
		{name: "rate of zero", changes: map[string]any{"expression": "rate(0 minutes)", "timeZone": nil},
			want: []spec.FieldError{{Field: "expression", Message: "rate must be at least 1 minute"}}},
		{name: "rate too fine", changes: map[string]any{"expression": "rate(30 seconds)", "timeZone": nil},
			want: []spec.FieldError{{Field: "expression", Message: "rate is too fine: the smallest rate is 1 minute; use minute(s), hour(s) or day(s)"}}},
		{name: "unknown overlap policy", changes: map[string]any{"overlap": "queue"},
			want: []spec.FieldError{{Field: "overlap", Message: `must be one of "skip", "allow" or "cancelPrevious"`}}},
		{name: "unknown catch-up policy", changes: map[string]any{"catchUp": "fireAll"},
			want: []spec.FieldError{{Field: "catchUp", Message: `must be "fireOnce" or "skipMissed"`}}},
		{name: "missing spec", changes: map[string]any{"spec": nil},
			want: []spec.FieldError{{Field: "spec", Message: "is required"}}},

		// Expressions.
		{name: "missing expression", changes: map[string]any{"expression": nil},
			want: []spec.FieldError{{Field: "expression", Message: "is required"}}},
		{name: "never fires", changes: map[string]any{"expression": "0 0 30 2 *"},
			want: []spec.FieldError{{Field: "expression", Message: "never fires (no date matches its day-of-month and month, e.g. February 30)"}}},
		{name: "zone inside the expression", changes: map[string]any{"expression": "TZ=UTC"},
			want: []spec.FieldError{{Field: "expression", Message: "must not carry a time zone; set timeZone instead"}}},
		{name: "@every", changes: map[string]any{"expression": "@every 5m"},
			want: []spec.FieldError{{Field: "expression", Message: `fixed intervals are written as a rate, e.g. "rate(5 minutes)"`}}},
		{name: "EventBridge cron form", changes: map[string]any{"expression": "cron(0 12 * * ? *)"},
			want: []spec.FieldError{{Field: "expression", Message: `write the five cron fields without cron(...), e.g. "30 2 * * *"`}}},
		{name: "expression too long", changes: map[string]any{"expression": strings.Repeat("*", MaxExpressionLen+1)},
			want: []spec.FieldError{{Field: "expression", Message: "is longer than 256 bytes"}}},
		{name: "time zone with a rate", changes: map[string]any{"expression": "rate(5 minutes)"},
			want: []spec.FieldError{{Field: "timeZone", Message: "applies only to cron expressions; a rate is elapsed time"}}},
		{name: "Local time zone", changes: map[string]any{"timeZone": "Local"},
			want: []spec.FieldError{{Field: "timeZone", Message: `must be an IANA time zone name such as "Europe/London", not "Local"`}}},
		{name: "bad zone and bad cron both reported", changes: map[string]any{"timeZone": "Nowhere", "expression": "* *"},
			want: []spec.FieldError{
				{Field: "timeZone", Message: `unknown time zone "Nowhere"; use an IANA name such as "America/New_York"`},
				{Field: "expression", Message: "is not a valid five-field cron expression (minute hour day-of-month month day-of-week): expected exactly 5 fields, found 2: [* *]"},
			}},

		// Fields and types.
		{name: "unknown field", changes: map[string]any{"cron": "* * * * *"},
			want: []spec.FieldError{{Field: "cron", Message: "is not a schedule field"}}},
		{name: "server fields", changes: map[string]any{"id": "x", "owner": "o", "createdAt": "2024-01-01T00:00:00Z"},
			want: []spec.FieldError{
				{Field: "createdAt", Message: "is assigned by the server and must not be given"},
				{Field: "id", Message: "is assigned by the server and must not be given"},
				{Field: "owner", Message: "is assigned by the server and must not be given"},
			}},
		{name: "wrong types", changes: map[string]any{"name": 5, "paused": "yes", "start": 1709269200, "spec": "etl.yaml"},
			want: []spec.FieldError{
				{Field: "name", Message: "must be a string"},
				{Field: "paused", Message: "must be true or false"},
				{Field: "spec", Message: "must be an object (a job spec)"},
				{Field: "start", Message: `must be an RFC 3339 time string such as "2024-03-10T09:00:00Z"`},
			}},
		{name: "time without a zone", changes: map[string]any{"end": "2025-01-01T00:00:00"},
			want: []spec.FieldError{{Field: "end", Message: `must be an RFC 3339 time such as "2024-03-10T09:00:00Z"`}}},
		{name: "duplicate field", data: []byte(`{"name":"a","name":"b"}`),
			want: []spec.FieldError{{Field: "name", Message: "is given more than once"}}},
		{name: "bad name", changes: map[string]any{"name": "nightly etl"},
			want: []spec.FieldError{{Field: "name", Message: `"nightly etl" must start with a letter or digit and contain only letters, digits, '_' and '-'`}}},
		{name: "spec errors are named under spec", changes: map[string]any{"spec": raw(`{"name":"etl","stages":[{"name":"load","partitions":{"count":2}}]}`)},
			want: []spec.FieldError{{Field: "spec.stages[0].task", Message: "is required"}}},
		{name: "spec with an unknown field", changes: map[string]any{"spec": raw(`{"name":"etl","stages":[],"colour":"red"}`)},
			want: []spec.FieldError{{Field: "spec.colour", Message: "unknown field"}}},

		{name: "a long unknown key is shortened", changes: map[string]any{strings.Repeat("é", 40): 1},
			want: []spec.FieldError{{Field: strings.Repeat("é", 32) + "…", Message: "is not a schedule field"}}},
		{name: "errors are capped", data: manyUnknownFields(maxErrors + 5), want: func() []spec.FieldError {
			var want []spec.FieldError
			for i := range maxErrors {
				want = append(want, spec.FieldError{Field: fmt.Sprintf("f%03d", i), Message: "is not a schedule field"})
			}
			return append(want, spec.FieldError{Message: "and 5 more errors"})
		}()},

		// Whole documents.
		{name: "not an object", data: []byte(`["a"]`), want: []spec.FieldError{{Message: "schedule must be a JSON object"}}},
		{name: "syntax error", data: []byte(`{"name":`), want: []spec.FieldError{{Message: "syntax error: unexpected end of JSON input"}}},
		{name: "empty", data: []byte(``), want: []spec.FieldError{{Message: "syntax error: unexpected end of JSON input"}}},
		{name: "not UTF-8", data: []byte("{\"name\":\"\xff\"}"), want: []spec.FieldError{{Message: "schedule is not valid UTF-8"}}},
		{name: "too large", data: []byte(`{"name":"` + strings.Repeat("a", MaxScheduleBytes) + `"}`),
			want: []spec.FieldError{{Message: fmt.Sprintf("schedule is %d bytes; at most %d are allowed", MaxScheduleBytes+11, MaxScheduleBytes)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data := tt.data
			if data == nil {
				data = request(t, tt.changes)
			}
			s, err := Parse(data)
			var ve *spec.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Parse = %+v, %v; want a *spec.ValidationError", s, err)
			}
			if diff := cmp.Diff(tt.want, ve.Errors); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func manyUnknownFields(n int) []byte {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"f%03d":1`, i)
	}
	b.WriteString("}")
	return []byte(b.String())
}

func TestValidate(t *testing.T) {
	t.Parallel()
	valid := func() *Schedule {
		return &Schedule{
			ID: "s01", Owner: "team-a", Name: "n", Spec: []byte(validSpec),
			Expression: "rate(1 hour)", CreatedAt: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC),
		}
	}
	tests := []struct {
		name   string
		change func(s *Schedule)
		want   []spec.FieldError
	}{
		{"valid", func(*Schedule) {}, nil},
		{"id with a separator", func(s *Schedule) { s.ID = "s#1" },
			[]spec.FieldError{{Field: "id", Message: `"s#1" must start with a letter or digit and contain only letters, digits, '_' and '-'`}}},
		{"id too long", func(s *Schedule) { s.ID = strings.Repeat("s", MaxIDLen+1) },
			[]spec.FieldError{{Field: "id", Message: "must be at most 64 characters"}}},
		{"owner with a separator", func(s *Schedule) { s.Owner = "a#b" },
			[]spec.FieldError{{Field: "owner", Message: "must not contain '#' or NUL"}}},
		{"end before creation", func(s *Schedule) { s.End = s.CreatedAt.Add(-time.Hour) },
			[]spec.FieldError{{Field: "end", Message: "must be after the schedule's creation (2024-01-01T00:00:00Z)"}}},
		{"rate singular and plural", func(s *Schedule) { s.Expression = "rate(1 hours)" },
			[]spec.FieldError{{Field: "expression", Message: "a rate of 1 takes the singular unit: rate(1 hour)"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := valid()
			tt.change(s)
			err := s.Validate()
			var got []spec.FieldError
			if err != nil {
				var ve *spec.ValidationError
				if !errors.As(err, &ve) {
					t.Fatalf("Validate = %v, want a *spec.ValidationError", err)
				}
				got = ve.Errors
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseRate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr    string
		want    time.Duration
		wantErr string
	}{
		{"rate(1 minute)", time.Minute, ""},
		{"rate(5 minutes)", 5 * time.Minute, ""},
		{"rate(1 hour)", time.Hour, ""},
		{"rate(2 hours)", 2 * time.Hour, ""},
		{"rate(1 day)", 24 * time.Hour, ""},
		{"rate(2 days)", 48 * time.Hour, ""},
		{"rate(366 days)", MaxRate, ""},
		{"rate(527040 minutes)", MaxRate, ""},
		{"rate(1 minutes)", 0, "a rate of 1 takes the singular unit: rate(1 minute)"},
		{"rate(5 minute)", 0, "a rate of 5 takes the plural unit: rate(5 minutes)"},
		{"rate(2 day)", 0, "a rate of 2 takes the plural unit: rate(2 days)"},
		{"rate(0 minutes)", 0, "rate must be at least 1 minute"},
		{"rate(0 minute)", 0, "rate must be at least 1 minute"},
		{"rate(1 second)", 0, "rate is too fine: the smallest rate is 1 minute; use minute(s), hour(s) or day(s)"},
		{"rate(367 days)", 0, "rate is too long; at most 366 days (use a cron expression for longer periods)"},
		{"rate(99999999999999999999 days)", 0, "rate 99999999999999999999 is too large; at most 8784h0m0s"},
		{"rate(-5 minutes)", 0, rateUsage},
		{"rate(+5 minutes)", 0, rateUsage},
		{"rate(1.5 hours)", 0, rateUsage},
		{"rate(5 weeks)", 0, rateUsage},
		{"rate(5  minutes)", 0, rateUsage},
		{"rate(5 minutes", 0, rateUsage},
		{"rate(5)", 0, rateUsage},
		{"rate 5 minutes", 0, rateUsage},
		{"RATE(5 minutes)", 0, rateUsage},
		{"rate()", 0, rateUsage},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			t.Parallel()
			e, err := ParseExpression(tt.expr, "")
			if tt.wantErr != "" {
				want := []spec.FieldError{{Field: "expression", Message: tt.wantErr}}
				var ve *spec.ValidationError
				if !errors.As(err, &ve) {
					t.Fatalf("ParseExpression = %v, %v; want error %q", e, err, tt.wantErr)
				}
				if diff := cmp.Diff(want, ve.Errors); diff != "" {
					t.Errorf("errors (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseExpression: %v", err)
			}
			if e.Kind() != KindRate || e.Period() != tt.want {
				t.Errorf("got %s with period %s, want a rate of %s", e.Kind(), e.Period(), tt.want)
			}
		})
	}
}

func TestOverlapDecide(t *testing.T) {
	t.Parallel()
	tests := []struct {
		policy  OverlapPolicy
		running bool
		want    OverlapAction
	}{
		{OverlapSkip, false, ActionStart},
		{OverlapSkip, true, ActionSkip},
		{"", true, ActionSkip},
		{OverlapAllow, false, ActionStart},
		{OverlapAllow, true, ActionStart},
		{OverlapCancelPrevious, false, ActionStart},
		{OverlapCancelPrevious, true, ActionCancelPreviousAndStart},
	}
	for _, tt := range tests {
		if got := tt.policy.Decide(tt.running); got != tt.want {
			t.Errorf("%q.Decide(running=%v) = %q, want %q", tt.policy, tt.running, got, tt.want)
		}
	}
}
