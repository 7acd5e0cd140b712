package readside

import (
	"math"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
)

func TestNextSample(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	alpha := func(dt float64) float64 { return 1 - math.Exp(-dt/rateTau.Seconds()) }
	cases := []struct {
		name      string
		prev      *domain.RateSample
		committed int
		records   int64
		now       time.Time
		wantStore bool
		wantRate  float64 // tasks/s; <0: unknown
	}{
		{"first read, nothing committed: no rate yet", nil, 0, 0, at(10), true, -1},
		{"first read seeds with the average since the start", nil, 20, 2000, at(10), true, 2},
		{"too soon after a sample: the stored rate, no write", &domain.RateSample{At: at(9), Committed: 18, TaskRate: 1.5, RecordRate: 150}, 20, 2000, at(10), false, 1.5},
		{"too soon and no stored rate: the average", &domain.RateSample{At: at(9), Committed: 0, TaskRate: -1}, 20, 0, at(10), false, 2},
		{"an interval moves the average towards the instant rate", &domain.RateSample{At: at(10), Committed: 20, TaskRate: 2, RecordRate: 0}, 40, 0, at(12), true,
			2 + alpha(2)*(10-2)},
		{"a stall decays the rate, it never goes negative", &domain.RateSample{At: at(10), Committed: 20, TaskRate: 2}, 20, 0, at(30), true,
			2 + alpha(20)*(0-2)},
		{"no stored rate: the first interval starts from the average", &domain.RateSample{At: at(10), Committed: 0, TaskRate: -1}, 30, 0, at(15), true,
			2 + alpha(5)*(6-2)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			smp, store, r, ok := nextSample(tc.prev, t0, tc.committed, tc.records, tc.now)
			if store != tc.wantStore {
				t.Errorf("store %v, want %v", store, tc.wantStore)
			}
			if tc.wantRate < 0 {
				if ok {
					t.Fatalf("rate %v known, want unknown", r)
				}
				return
			}
			if !ok || math.Abs(r.TaskRate-tc.wantRate) > 1e-9 {
				t.Fatalf("rate %v (known %v), want %v", r.TaskRate, ok, tc.wantRate)
			}
			if store && (smp.At != tc.now || smp.Committed != tc.committed || math.Abs(smp.TaskRate-tc.wantRate) > 1e-9) {
				t.Errorf("stored sample %+v does not carry the new rate and counts", smp)
			}
		})
	}
}
