// Package join is a DAG whose last stage reads a shuffle and waits on a
// second upstream: `map` emits (key, value) records into a shuffle,
// `side` writes lines of its own, and `join`, after both, groups the
// shuffle's records by key. Every output is a function of the spec alone
// (sorted, no attempt numbers), so two runs of one spec are byte-identical
// however many attempts their tasks took: the chaos run compares them.
package join

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/batchwork/batchwork/shared/batchwork"
)

// Task names, as a spec refers to them.
const (
	MapTask  = "join.map"
	SideTask = "join.side"
	JoinTask = "join.join"
)

// keys is the key space the map stage draws from: small, so every join
// partition gets records from several map tasks.
const keys = 64

// recordsPerMap is how many records each map task emits.
const recordsPerMap = 40

// Register adds the example's task functions to reg.
func Register(reg *batchwork.Registry) {
	reg.Register(MapTask, Map)
	reg.Register(SideTask, Side)
	reg.Register(JoinTask, Join)
}

// Spec is the join job: n map tasks shuffling into r partitions (so r join
// tasks), and m side tasks.
func Spec(name string, n, m, r int) []byte {
	return fmt.Appendf(nil, `name: %s
stages:
  - {name: map, task: %s, partitions: {count: %d}, shuffle: {partitions: %d}}
  - {name: side, task: %s, partitions: {count: %d}}
  - {name: join, task: %s, after: [map, side]}
`, name, MapTask, n, r, SideTask, m, JoinTask)
}

// Map emits recordsPerMap records, key "k<nn>" and value "p<partition>.<i>",
// in sorted order so that even its shuffle outputs are the same on every
// attempt.
func Map(ctx context.Context, t *batchwork.Task) error {
	p := t.Partition
	type rec struct{ k, v string }
	recs := make([]rec, 0, recordsPerMap)
	for i := range recordsPerMap {
		k := (p*7 + i*13) % keys
		recs = append(recs, rec{fmt.Sprintf("k%02d", k), fmt.Sprintf("p%d.%d", p, i)})
	}
	slices.SortFunc(recs, func(a, b rec) int { return strings.Compare(a.k+"\t"+a.v, b.k+"\t"+b.v) })
	for _, r := range recs {
		if err := t.Out.Emit(r.k, r.v); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// Side writes a few lines naming its partition.
func Side(ctx context.Context, t *batchwork.Task) error {
	for i := range 3 {
		if _, err := fmt.Fprintf(t.Out, "side/%d line %d\n", t.Partition, i); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// Join groups its shuffle partition by key and writes
// "key\tcount\tv1,v2,...\n" lines, keys and values sorted: the map tasks'
// outputs arrive in manifest order, which the output must not reflect.
func Join(ctx context.Context, t *batchwork.Task) error {
	groups := map[string][]string{}
	err := batchwork.Records(t.Input, func(k, v string) error {
		groups[k] = append(groups[k], v)
		return nil
	})
	if err != nil {
		return fmt.Errorf("read shuffle: %w", err)
	}
	names := make([]string, 0, len(groups))
	for k := range groups {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		vs := groups[k]
		slices.Sort(vs)
		if _, err := fmt.Fprintf(t.Out, "%s\t%s\t%s\n", k, strconv.Itoa(len(vs)), strings.Join(vs, ",")); err != nil {
			return err
		}
	}
	return ctx.Err()
}
