package rangeshuffle

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/shared/blob"
)

// header is the header of a run of the given records (keys only).
func header(t *testing.T, samples int, keys ...string) blob.RunHeader {
	t.Helper()
	buf := []byte(strings.Join(keys, "\n") + "\n")
	if len(keys) == 0 {
		buf = nil
	}
	head, _, err := blob.SortRun(buf, samples)
	if err != nil {
		t.Fatal(err)
	}
	h, err := blob.DecodeRunHeader(head)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func repeat(k string, n int) []string { return slices.Repeat([]string{k}, n) }

func seq(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%04d", i))
	}
	return out
}

func TestBoundaries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		runs    [][]string
		samples int
		n       int
		want    []string
	}{
		{"one partition", [][]string{seq(0, 10)}, 4, 1, nil},
		{"no records", [][]string{{}, {}}, 4, 3, nil},
		{"every record sampled", [][]string{seq(0, 8)}, 8, 4, []string{"0002", "0004", "0006"}},
		{"two runs, weighted", [][]string{seq(0, 100), seq(100, 200)}, 10, 4, []string{"0050", "0100", "0150"}},
		// A run of few samples that stand for many records weighs as
		// much as a run sampled in full.
		{"uneven sampling", [][]string{seq(0, 100), seq(100, 104)}, 4, 2, []string{"0050"}},
		{"skew: one key is most records", [][]string{append(repeat("m", 90), seq(0, 10)...)}, 100, 4,
			[]string{"m", "m", "m"}},
		{"duplicates around a boundary", [][]string{{"a", "b", "b", "b", "b", "c", "d", "e"}}, 8, 2, []string{"b"}},
		{"more partitions than samples", [][]string{seq(0, 2)}, 2, 5, []string{"0001", "0001", "0001", "0001"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var heads []blob.RunHeader
			for _, r := range tt.runs {
				heads = append(heads, header(t, tt.samples, r...))
			}
			var got []string
			for _, b := range Boundaries(heads, tt.n) {
				got = append(got, string(b))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Boundaries = %q, want %q", got, tt.want)
			}
			if got != nil && len(got) != tt.n-1 {
				t.Errorf("%d boundaries for %d partitions", len(got), tt.n)
			}
		})
	}
}

func TestPartition(t *testing.T) {
	t.Parallel()
	bounds := [][]byte{[]byte("b"), []byte("d"), []byte("d"), []byte("f")}
	for key, want := range map[string]int{"": 0, "a": 0, "b": 1, "c": 1, "d": 3, "e": 3, "f": 4, "z": 4} {
		if got := Partition(bounds, []byte(key)); got != want {
			t.Errorf("Partition(%q) = %d, want %d", key, got, want)
		}
	}
	if got := Partition(nil, []byte("x")); got != 0 {
		t.Errorf("Partition with no boundaries = %d", got)
	}
}

// Every reducer draws the same boundaries from the same runs, whatever
// order it read their headers in; and they balance the partitions.
func TestBoundariesDeterministicAndBalanced(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	var heads []blob.RunHeader
	var all []string
	for range 8 {
		keys := make([]string, 2000+r.IntN(2000))
		for i := range keys {
			keys[i] = fmt.Sprintf("%010d", r.IntN(1e9))
		}
		all = append(all, keys...)
		heads = append(heads, header(t, blob.DefaultRunSamples, keys...))
	}
	const n = 16
	want := Boundaries(heads, n)
	for range 20 {
		r.Shuffle(len(heads), func(i, j int) { heads[i], heads[j] = heads[j], heads[i] })
		got := Boundaries(heads, n)
		if !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("boundaries differ with the headers in another order:\n%q\n%q", got, want)
		}
	}
	counts := make([]int, n)
	for _, k := range all {
		counts[Partition(want, []byte(k))]++
	}
	share := len(all) / n
	for p, c := range counts {
		if c < share*8/10 || c > share*12/10 {
			t.Errorf("partition %d holds %d records, want within 20%% of %d: %v", p, c, share, counts)
		}
	}
}

// byteRange never leaves out a record of the range, cut sample keys
// included.
func TestByteRangeHoldsTheRange(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", blob.RunSampleKeyMax)
	keys := []string{"a", long + "a", long + "b", long + "b", long + "c", long + "d", "y", "z"}
	buf := []byte(strings.Join(keys, "\n") + "\n")
	head, spans, err := blob.SortRun(buf, 8)
	if err != nil {
		t.Fatal(err)
	}
	body, size := blob.RunBody(head, buf, spans)
	raw := make([]byte, size)
	if _, err := body.ReadAt(raw, 0); err != nil {
		t.Fatal(err)
	}
	h, err := blob.DecodeRunHeader(raw)
	if err != nil {
		t.Fatal(err)
	}
	ranges := [][2]string{{"", long + "b"}, {long + "b", long + "c"}, {long + "ba", "y"}, {long, ""}, {"y", ""}}
	for _, rg := range ranges {
		var lo, hi []byte
		if rg[0] != "" {
			lo = []byte(rg[0])
		}
		if rg[1] != "" {
			hi = []byte(rg[1])
		}
		start, end := byteRange(&h, lo, hi)
		in := string(raw[start:end])
		for _, k := range keys {
			if (lo == nil || k >= string(lo)) && (hi == nil || k < string(hi)) && !strings.Contains(in, k+"\n") {
				t.Errorf("range [%.3q, %.3q): bytes %d-%d leave out %.300q", rg[0], rg[1], start, end, k)
			}
		}
	}
}
