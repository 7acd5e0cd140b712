package split

import "testing"

// Count is what the control plane checks against its task limit before it
// plans, so it must be exact for plans far too large to build, and must
// not allocate: a spec asking for ten million splits costs the planner a
// loop over the listing, not 320 MiB of splits.
//
// Not parallel: testing.AllocsPerRun refuses to run beside other tests.
func TestCountOfPlansTooLargeToBuild(t *testing.T) {
	const tib = int64(1) << 40
	many := make([]Object, 100_000)
	for i := range many {
		many[i] = Object{Key: "k", Size: 5 * tib} // S3's largest object
	}
	tests := []struct {
		name   string
		objs   []Object
		target int64
		want   int64
	}{
		{"10 MiB in one-byte splits", []Object{{Key: "a", Size: 10 << 20}}, 1, 10 << 20},
		{"10 MiB in 4 KiB splits", []Object{{Key: "a", Size: 10 << 20}}, 4 << 10, 2560},
		{"a remainder makes one more split", []Object{{Key: "a", Size: 10<<20 + 1}}, 4 << 10, 2561},
		{"empty objects make none", []Object{{Key: "a"}, {Key: "b", Size: 3}, {Key: "c"}}, 1, 3},
		{"no target: one per non-empty object", []Object{{Key: "a"}, {Key: "b", Size: 3}, {Key: "c", Size: 1 << 40}}, 0, 2},
		{"the largest object in bytes", []Object{{Key: "a", Size: 5 * tib}}, 1, 5 * tib},
		{"a listing's worth of the largest objects does not overflow", many, 1, 100_000 * 5 * tib},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got int64
			allocs := testing.AllocsPerRun(3, func() { got = Count(tt.objs, tt.target) })
			if got != tt.want {
				t.Errorf("Count = %d, want %d", got, tt.want)
			}
			if allocs != 0 {
				t.Errorf("Count allocated %v times, want none", allocs)
			}
		})
	}
}
