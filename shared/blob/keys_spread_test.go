package blob

import (
	"strings"
	"testing"
)

// TestOutputsSpreadOverPrefixes checks the output layout against S3's
// per-prefix limit at 10,000 tasks a second in one stage: each second's
// outputs (10,000 partitions, which run roughly in order) must spread
// over the characters S3 can split the stage's folder at, so that no
// range takes more than 3,500 PUTs a second. Under p<partition>/ alone
// they all begin "p0" and one range takes all 10,000 (286%).
func TestOutputsSpreadOverPrefixes(t *testing.T) {
	t.Parallel()
	const (
		rate        = 10000 // tasks (one output each) a second
		prefixPUTs  = 3500
		stageFolder = "jobs/j1a209b5892d0e32a60d0b/out/map/"
	)
	for _, first := range []int{0, 50000, 990000} {
		ranges := map[string]int{}
		for p := first; p < first+rate; p++ {
			k := OutputKey("j1a209b5892d0e32a60d0b", "map", p, 1, 0)
			rest, ok := strings.CutPrefix(k, stageFolder)
			if !ok {
				t.Fatalf("output key %q is not under the stage's folder %q", k, stageFolder)
			}
			ranges[rest[:2]]++
		}
		hottest := 0
		for _, n := range ranges {
			hottest = max(hottest, n)
		}
		// A quarter of the limit: room for tasks with several outputs.
		if hottest > prefixPUTs/4 {
			t.Errorf("partitions %d..%d: the busiest of %d two-character ranges under the stage takes %d PUTs a second, over %d",
				first, first+rate-1, len(ranges), hottest, prefixPUTs/4)
		}
	}
}

// TestAttemptPrefixHoldsItsOutputs checks what fencing and listing rely
// on: an attempt's outputs are exactly the keys under its prefix, and no
// other attempt's or partition's prefix is a prefix of it.
func TestAttemptPrefixHoldsItsOutputs(t *testing.T) {
	t.Parallel()
	for p := range 300 {
		for a := 1; a <= 3; a++ {
			pre := AttemptPrefix("j", "s", p, a)
			if k := OutputKey("j", "s", p, a, 7); !strings.HasPrefix(k, pre) {
				t.Fatalf("output %q is not under its attempt's prefix %q", k, pre)
			}
			if !strings.HasPrefix(pre, "jobs/j/out/s/") || !strings.HasPrefix(pre, JobPrefix("j")) {
				t.Fatalf("attempt prefix %q is outside its stage's and job's folders", pre)
			}
			for _, other := range []string{AttemptPrefix("j", "s", p, a+10), AttemptPrefix("j", "s", p+1000, a), AttemptPrefix("j", "s2", p, a)} {
				if strings.HasPrefix(other, pre) || strings.HasPrefix(pre, other) {
					t.Fatalf("attempt prefixes %q and %q overlap", pre, other)
				}
			}
		}
		if Spread(p) != Spread(p) || len(Spread(p)) != 2 {
			t.Fatalf("Spread(%d) = %q: want two stable hex digits", p, Spread(p))
		}
	}
}
