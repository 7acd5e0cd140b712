// Package rangeshuffle is the reducer's side of a range shuffle
// (spec.ShuffleByRange): from the sorted runs the map tasks wrote
// (shared/blob/rangerun.go), it draws the partitions' boundaries, finds
// each run's records of the reducer's key range and merges them, so the
// reducer reads its records in key order. The map side is
// internal/executor/output (Output.Range).
//
// Every reducer, and every attempt of one, draws the same boundaries: they
// are a function of the samples of the runs the stage's manifest lists,
// and the manifest is written once, when the map stage completed. So each
// key goes to exactly one reducer, and partition r's keys all sort before
// partition r+1's: the stage's outputs in partition order are totally
// ordered, as long as each reducer writes in the order it reads.
package rangeshuffle

import (
	"bytes"
	"cmp"
	"math/bits"
	"slices"
	"sort"

	"github.com/batchwork/batchwork/shared/blob"
)

// weighted is a sample standing for weight records.
type weighted struct {
	key    []byte
	weight int64
}

// Boundaries are the n-1 keys that split the records the runs' headers
// sample into n partitions of about equal counts (nil when the runs hold
// no record): partition r holds the keys k with bounds[r-1] <= k <
// bounds[r] (Partition). A boundary is a sample's key; equal keys are in
// one partition, so a key carrying more than a partition's share leaves
// partitions empty rather than split it. The result depends only on the
// multiset of samples, not on the headers' order.
func Boundaries(heads []blob.RunHeader, n int) [][]byte {
	var all []weighted
	var total int64
	for i := range heads {
		h := &heads[i]
		for j, s := range h.Samples {
			all = append(all, weighted{key: s.Key, weight: h.Weight(j)})
			total += h.Weight(j)
		}
	}
	if n <= 1 || total == 0 {
		return nil
	}
	slices.SortFunc(all, func(a, b weighted) int {
		if c := bytes.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.weight, b.weight)
	})
	// Boundary i is the sample whose records start nearest the i-th
	// n-th of the records: j with before(j) <= target < before(j+1), or
	// j+1 if that starts nearer.
	bounds := make([][]byte, 0, n-1)
	var before int64 // the weight of the samples before all[j]
	j := 0
	for i := 1; i < n; i++ {
		target := share(total, i, n)
		for j < len(all)-1 && before+all[j].weight <= target {
			before += all[j].weight
			j++
		}
		pick := j
		if j < len(all)-1 && before+all[j].weight-target < target-before {
			pick = j + 1
		}
		bounds = append(bounds, all[pick].key)
	}
	return bounds
}

// share is ceil(total × i / n), without overflow.
func share(total int64, i, n int) int64 {
	hi, lo := bits.Mul64(uint64(total), uint64(i))
	q, r := bits.Div64(hi, lo, uint64(n))
	if r != 0 {
		q++
	}
	return int64(q)
}

// Partition is the partition of key among len(bounds)+1: how many
// boundaries are at most key.
func Partition(bounds [][]byte, key []byte) int {
	return sort.Search(len(bounds), func(i int) bool { return bytes.Compare(bounds[i], key) > 0 })
}

// keyRange is partition r's keys: [lo, hi), lo nil for the first, hi nil
// for the last.
func keyRange(bounds [][]byte, r int) (lo, hi []byte) {
	if r > 0 {
		lo = bounds[r-1]
	}
	if r < len(bounds) {
		hi = bounds[r]
	}
	return lo, hi
}

// byteRange is where in the run h heads the records of keys [lo, hi) are:
// from the last sample surely before lo to the first sample at or past
// hi, so a reader filters the records at either end. Sample keys may be
// cut at blob.RunSampleKeyMax; a cut key below lo cut the same way
// belongs to a record below lo, and a cut key at or past hi to a record
// at or past it.
func byteRange(h *blob.RunHeader, lo, hi []byte) (start, end int64) {
	start, end = h.Head, h.Size
	if lo != nil {
		lc := lo[:min(len(lo), blob.RunSampleKeyMax)]
		for _, s := range h.Samples {
			if bytes.Compare(s.Key, lc) >= 0 {
				break
			}
			start = s.Offset
		}
	}
	if hi != nil {
		for _, s := range h.Samples {
			if bytes.Compare(s.Key, hi) >= 0 {
				end = s.Offset
				break
			}
		}
	}
	return start, max(start, end)
}
