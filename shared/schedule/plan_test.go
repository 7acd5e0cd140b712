package schedule

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// hourly is a valid hourly schedule created at the start of 2024.
func hourly(policy CatchUpPolicy) *Schedule {
	return &Schedule{
		ID:         "s1",
		Name:       "hourly",
		Spec:       []byte(validSpec),
		Expression: "0 * * * *",
		TimeZone:   "UTC",
		CatchUp:    policy,
		CreatedAt:  time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC),
	}
}

// at is a time of day on the plan tests' day.
func at(h, m, s int) time.Time { return time.Date(2024, 6, 1, h, m, s, 0, time.UTC) }

func TestPlan(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		schedule func() *Schedule
		params   PlanParams
		want     Plan
	}{
		{
			// The scenario: down from 09:30 to 12:30.
			name:     "3 hours down, fireOnce fires one run for the three missed",
			schedule: func() *Schedule { return hourly(CatchUpFireOnce) },
			params:   PlanParams{LastFired: at(9, 0, 0), Now: at(12, 30, 0)},
			want: Plan{
				Fire:   []Firing{{Scheduled: at(10, 0, 0), CatchUp: true, Through: at(12, 0, 0)}},
				Missed: Missed{First: at(10, 0, 0), Last: at(12, 0, 0), Count: 3, CountExact: true, Times: []time.Time{at(10, 0, 0), at(11, 0, 0), at(12, 0, 0)}},
				Cursor: at(12, 0, 0),
				Next:   at(13, 0, 0),
			},
		},
		{
			name:     "3 hours down, skipMissed fires nothing",
			schedule: func() *Schedule { return hourly(CatchUpSkipMissed) },
			params:   PlanParams{LastFired: at(9, 0, 0), Now: at(12, 30, 0)},
			want: Plan{
				Missed: Missed{First: at(10, 0, 0), Last: at(12, 0, 0), Count: 3, CountExact: true, Times: []time.Time{at(10, 0, 0), at(11, 0, 0), at(12, 0, 0)}},
				Cursor: at(12, 0, 0),
				Next:   at(13, 0, 0),
			},
		},
		{
			name:     "empty policy means fireOnce",
			schedule: func() *Schedule { return hourly("") },
			params:   PlanParams{LastFired: at(9, 0, 0), Now: at(10, 30, 0)},
			want: Plan{
				Fire:   []Firing{{Scheduled: at(10, 0, 0), CatchUp: true, Through: at(10, 0, 0)}},
				Missed: Missed{First: at(10, 0, 0), Last: at(10, 0, 0), Count: 1, CountExact: true, Times: []time.Time{at(10, 0, 0)}},
				Cursor: at(10, 0, 0),
				Next:   at(11, 0, 0),
			},
		},
		{
			name:     "on time",
			schedule: func() *Schedule { return hourly(CatchUpSkipMissed) },
			params:   PlanParams{LastFired: at(11, 0, 0), Now: at(12, 0, 0)},
			want:     Plan{Fire: []Firing{{Scheduled: at(12, 0, 0)}}, Missed: Missed{CountExact: true}, Cursor: at(12, 0, 0), Next: at(13, 0, 0)},
		},
		{
			name:     "late by exactly the grace is on time",
			schedule: func() *Schedule { return hourly(CatchUpSkipMissed) },
			params:   PlanParams{LastFired: at(11, 0, 0), Now: at(12, 5, 0)},
			want:     Plan{Fire: []Firing{{Scheduled: at(12, 0, 0)}}, Missed: Missed{CountExact: true}, Cursor: at(12, 0, 0), Next: at(13, 0, 0)},
		},
		{
			name:     "late by more than the grace is missed",
			schedule: func() *Schedule { return hourly(CatchUpSkipMissed) },
			params:   PlanParams{LastFired: at(11, 0, 0), Now: at(12, 5, 1)},
			want: Plan{
				Missed: Missed{First: at(12, 0, 0), Last: at(12, 0, 0), Count: 1, CountExact: true, Times: []time.Time{at(12, 0, 0)}},
				Cursor: at(12, 0, 0),
				Next:   at(13, 0, 0),
			},
		},
		{
			name:     "custom grace",
			schedule: func() *Schedule { return hourly(CatchUpSkipMissed) },
			params:   PlanParams{LastFired: at(11, 0, 0), Now: at(12, 30, 0), Grace: time.Hour},
			want:     Plan{Fire: []Firing{{Scheduled: at(12, 0, 0)}}, Missed: Missed{CountExact: true}, Cursor: at(12, 0, 0), Next: at(13, 0, 0)},
		},
		{
			name:     "missed times and an on-time one: a catch-up run plus the on-time run",
			schedule: func() *Schedule { return hourly(CatchUpFireOnce) },
			params:   PlanParams{LastFired: at(9, 0, 0), Now: at(13, 2, 0)},
			want: Plan{
				Fire:   []Firing{{Scheduled: at(10, 0, 0), CatchUp: true, Through: at(12, 0, 0)}, {Scheduled: at(13, 0, 0)}},
				Missed: Missed{First: at(10, 0, 0), Last: at(12, 0, 0), Count: 3, CountExact: true, Times: []time.Time{at(10, 0, 0), at(11, 0, 0), at(12, 0, 0)}},
				Cursor: at(13, 0, 0),
				Next:   at(14, 0, 0),
			},
		},
		{
			name:     "nothing due",
			schedule: func() *Schedule { return hourly(CatchUpFireOnce) },
			params:   PlanParams{LastFired: at(12, 0, 0), Now: at(12, 30, 0)},
			want:     Plan{Missed: Missed{CountExact: true}, Cursor: at(12, 0, 0), Next: at(13, 0, 0)},
		},
		{
			name:     "a clock behind the cursor plans nothing and never points back",
			schedule: func() *Schedule { return hourly(CatchUpFireOnce) },
			params:   PlanParams{LastFired: at(12, 0, 0), Now: at(11, 59, 0)},
			want:     Plan{Missed: Missed{CountExact: true}, Cursor: at(12, 0, 0), Next: at(13, 0, 0)},
		},
		{
			name: "never fired: starts at creation, not before",
			schedule: func() *Schedule {
				s := hourly(CatchUpFireOnce)
				s.CreatedAt = at(9, 30, 0)
				return s
			},
			params: PlanParams{Now: at(10, 0, 10)},
			want:   Plan{Fire: []Firing{{Scheduled: at(10, 0, 0)}}, Missed: Missed{CountExact: true}, Cursor: at(10, 0, 0), Next: at(11, 0, 0)},
		},
		{
			name: "never fired: start is inclusive",
			schedule: func() *Schedule {
				s := hourly(CatchUpSkipMissed)
				s.Start = at(10, 0, 0)
				return s
			},
			params: PlanParams{Now: at(12, 0, 0)},
			want: Plan{
				Fire:   []Firing{{Scheduled: at(12, 0, 0)}},
				Missed: Missed{First: at(10, 0, 0), Last: at(11, 0, 0), Count: 2, CountExact: true, Times: []time.Time{at(10, 0, 0), at(11, 0, 0)}},
				Cursor: at(12, 0, 0),
				Next:   at(13, 0, 0),
			},
		},
		{
			name: "an end stops the firings and the next one",
			schedule: func() *Schedule {
				s := hourly(CatchUpSkipMissed)
				s.End = at(11, 30, 0)
				return s
			},
			params: PlanParams{LastFired: at(9, 0, 0), Now: at(12, 30, 0)},
			want: Plan{
				Missed: Missed{First: at(10, 0, 0), Last: at(11, 0, 0), Count: 2, CountExact: true, Times: []time.Time{at(10, 0, 0), at(11, 0, 0)}},
				Cursor: at(11, 0, 0),
			},
		},
		{
			name: "rate catch-up",
			schedule: func() *Schedule {
				s := hourly(CatchUpFireOnce)
				s.Expression, s.TimeZone, s.Start = "rate(20 minutes)", "", at(9, 10, 0)
				return s
			},
			params: PlanParams{LastFired: at(9, 50, 0), Now: at(11, 15, 0)},
			want: Plan{
				Fire:   []Firing{{Scheduled: at(10, 10, 0), CatchUp: true, Through: at(10, 50, 0)}, {Scheduled: at(11, 10, 0)}},
				Missed: Missed{First: at(10, 10, 0), Last: at(10, 50, 0), Count: 3, CountExact: true, Times: []time.Time{at(10, 10, 0), at(10, 30, 0), at(10, 50, 0)}},
				Cursor: at(11, 10, 0),
				Next:   at(11, 30, 0),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.schedule().Plan(tt.params)
			if err != nil {
				t.Fatalf("Plan: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanDowntimeSimulation replays the test with a sweep that
// plans every minute on a controlled clock, stops for three hours and
// comes back, persisting the cursor as the sweep would.
func TestPlanDowntimeSimulation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		policy      CatchUpPolicy
		wantFired   []Firing
		wantMissed  []time.Time
		wantNextRun time.Time
	}{
		{CatchUpFireOnce,
			[]Firing{{Scheduled: at(8, 0, 0)}, {Scheduled: at(9, 0, 0)}, {Scheduled: at(10, 0, 0), CatchUp: true, Through: at(12, 0, 0)}, {Scheduled: at(13, 0, 0)}},
			[]time.Time{at(10, 0, 0), at(11, 0, 0), at(12, 0, 0)}, at(14, 0, 0)},
		{CatchUpSkipMissed,
			[]Firing{{Scheduled: at(8, 0, 0)}, {Scheduled: at(9, 0, 0)}, {Scheduled: at(13, 0, 0)}},
			[]time.Time{at(10, 0, 0), at(11, 0, 0), at(12, 0, 0)}, at(14, 0, 0)},
	}
	for _, tt := range tests {
		t.Run(string(tt.policy), func(t *testing.T) {
			t.Parallel()
			s := hourly(tt.policy)
			var cursor time.Time = at(7, 0, 0)
			var fired []Firing
			var missed []time.Time
			var next time.Time
			for now := at(7, 30, 0); !now.After(at(13, 30, 0)); now = now.Add(time.Minute) {
				if now.After(at(9, 30, 0)) && now.Before(at(12, 30, 0)) {
					continue // down
				}
				p, err := s.Plan(PlanParams{LastFired: cursor, Now: now})
				if err != nil {
					t.Fatal(err)
				}
				fired = append(fired, p.Fire...)
				missed = append(missed, p.Missed.Times...)
				cursor, next = p.Cursor, p.Next
			}
			if diff := cmp.Diff(tt.wantFired, fired); diff != "" {
				t.Errorf("fired (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantMissed, missed); diff != "" {
				t.Errorf("recorded missed (-want +got):\n%s", diff)
			}
			if !next.Equal(tt.wantNextRun) {
				t.Errorf("next = %s, want %s", next, tt.wantNextRun)
			}
		})
	}
}

// TestPlanRacingSweepsAgree: two sweeps that read the same cursor at
// different moments derive the same idempotency key for the catch-up run,
// so only one job is created for it.
func TestPlanRacingSweepsAgree(t *testing.T) {
	t.Parallel()
	s := hourly(CatchUpFireOnce)
	cursor := at(9, 0, 0)
	a, err := s.Plan(PlanParams{LastFired: cursor, Now: at(12, 30, 0)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Plan(PlanParams{LastFired: cursor, Now: at(13, 7, 0)})
	if err != nil {
		t.Fatal(err)
	}
	ka, kb := FiringKey(s.ID, a.Fire[0].Scheduled), FiringKey(s.ID, b.Fire[0].Scheduled)
	if ka != kb {
		t.Errorf("catch-up keys differ: %s at 12:30 vs %s at 13:07", ka, kb)
	}
	// A sweep that sees the first missed time still within the grace fires
	// it on time under the same key.
	c, err := s.Plan(PlanParams{LastFired: cursor, Now: at(10, 3, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if kc := FiringKey(s.ID, c.Fire[0].Scheduled); kc != ka || c.Fire[0].CatchUp {
		t.Errorf("on-time firing = %+v (key %s), want key %s", c.Fire[0], kc, ka)
	}
}

// TestPlanBoundedAfterLongDowntime: a year of downtime on a per-minute
// schedule is summarised, not enumerated.
func TestPlanBoundedAfterLongDowntime(t *testing.T) {
	t.Parallel()
	jan1 := time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)
	nextJan1 := jan1.AddDate(1, 0, 0)
	tests := []struct {
		name       string
		expr       string
		wantCount  int64
		wantExact  bool
		wantOnTime int
	}{
		// Of the year's 525,600 minutes, 00:00 on Jan 1 had fired and
		// 23:55 to 23:59 are within the grace: 00:01 to 23:54 are missed.
		// The on-time ones are 23:55 to 00:00 on the new year.
		{"rate counts exactly", "rate(1 minute)", 365*1440 - 1 - 5, true, 6},
		{"cron counts up to the cap", "* * * * *", MaxMissedCounted, false, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := hourly(CatchUpSkipMissed)
			s.Expression, s.TimeZone, s.Start = tt.expr, "", jan1
			s.SetDefaults()
			p, err := s.Plan(PlanParams{LastFired: jan1, Now: nextJan1})
			if err != nil {
				t.Fatal(err)
			}
			m := p.Missed
			if m.Count != tt.wantCount || m.CountExact != tt.wantExact {
				t.Errorf("missed count = %d (exact %v), want %d (exact %v)", m.Count, m.CountExact, tt.wantCount, tt.wantExact)
			}
			if want := jan1.Add(time.Minute); !m.First.Equal(want) {
				t.Errorf("first missed = %s, want %s", m.First, want)
			}
			if want := nextJan1.Add(-6 * time.Minute); !m.Last.Equal(want) {
				t.Errorf("last missed = %s, want %s", m.Last, want)
			}
			if len(m.Times) != MaxMissedListed || !m.Times[MaxMissedListed-1].Equal(jan1.Add(MaxMissedListed*time.Minute)) {
				t.Errorf("listed %d missed times ending %v, want %d ending %s", len(m.Times), m.Times[len(m.Times)-1], MaxMissedListed, jan1.Add(MaxMissedListed*time.Minute))
			}
			if len(p.Fire) != tt.wantOnTime || !p.Cursor.Equal(nextJan1) {
				t.Errorf("fired %d on time with cursor %s, want %d and %s", len(p.Fire), p.Cursor, tt.wantOnTime, nextJan1)
			}
		})
	}
}

func TestPlanRejects(t *testing.T) {
	t.Parallel()
	paused := hourly(CatchUpFireOnce)
	paused.Paused = true
	if _, err := paused.Plan(PlanParams{Now: at(12, 0, 0)}); !errors.Is(err, ErrPaused) {
		t.Errorf("paused: err = %v, want ErrPaused", err)
	}
	for _, p := range []PlanParams{
		{Now: at(12, 0, 0), Grace: -time.Second},
		{Now: at(12, 0, 0), Grace: MaxGrace + time.Second},
		{},
	} {
		if _, err := hourly(CatchUpFireOnce).Plan(p); err == nil {
			t.Errorf("Plan(%+v) succeeded", p)
		}
	}
	unknown := hourly("fireAll")
	if _, err := unknown.Plan(PlanParams{Now: at(12, 0, 0)}); err == nil {
		t.Error("Plan with an unknown catch-up policy succeeded")
	}
	if _, err := NewTimetable(&Expression{}, at(0, 0, 0), time.Time{}); err == nil {
		t.Error("NewTimetable with an unparsed expression succeeded")
	}
	bad := hourly(CatchUpFireOnce)
	bad.Expression = "not cron"
	if _, err := bad.Plan(PlanParams{Now: at(12, 0, 0)}); err == nil {
		t.Error("Plan with a bad expression succeeded")
	}
}

func BenchmarkPlanAfterYearDown(b *testing.B) {
	jan1 := time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, expr := range []string{"rate(1 minute)", "* * * * *"} {
		b.Run(expr, func(b *testing.B) {
			s := hourly(CatchUpFireOnce)
			s.Expression, s.TimeZone, s.Start = expr, "", jan1
			for b.Loop() {
				if _, err := s.Plan(PlanParams{LastFired: jan1, Now: jan1.AddDate(1, 0, 0)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
