package skew

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

// maps builds map outputs whose sizes are rows[m][p].
func maps(rows ...[]int64) []MapOutput {
	out := make([]MapOutput, len(rows))
	for m, r := range rows {
		out[m] = MapOutput{Task: m, Sizes: r}
	}
	return out
}

// uniform is n map outputs holding each partition's bytes/n.
func uniform(n int, parts ...int64) []MapOutput {
	rows := make([][]int64, n)
	for m := range rows {
		rows[m] = make([]int64, len(parts))
		for p, b := range parts {
			rows[m][p] = b / int64(n)
		}
	}
	return maps(rows...)
}

func TestMake(t *testing.T) {
	for _, tc := range []struct {
		name       string
		parts      int
		srcs       []Source
		combinable bool
		want       []Piece
	}{
		{
			name:  "no skew",
			parts: 4,
			srcs:  []Source{{Stage: 0, Maps: uniform(4, 100, 120, 80, 100)}},
		},
		{
			name:  "one hot partition, a join: its first piece is its own task",
			parts: 4,
			srcs:  []Source{{Stage: 0, Maps: uniform(4, 100, 800, 100, 100)}, {Stage: 1, Maps: uniform(2, 10, 10, 10, 10)}},
			want: []Piece{
				{Partition: 1, Task: 1, Source: 0, From: 0, To: 1, Bytes: 200},
				{Partition: 1, Task: 4, Source: 0, From: 1, To: 2, Bytes: 200},
				{Partition: 1, Task: 5, Source: 0, From: 2, To: 3, Bytes: 200},
				{Partition: 1, Task: 6, Source: 0, From: 3, To: 1<<31 - 1, Bytes: 200},
			},
		},
		{
			name:       "one hot partition, combinable: every piece is an extra task",
			parts:      4,
			combinable: true,
			srcs:       []Source{{Stage: 0, Maps: uniform(2, 100, 800, 100, 100)}},
			want: []Piece{
				{Partition: 1, Task: 4, Source: 0, From: 0, To: 1, Bytes: 400},
				{Partition: 1, Task: 5, Source: 0, From: 1, To: 1<<31 - 1, Bytes: 400},
			},
		},
		{
			name:  "several hot partitions, extra tasks in partition order",
			parts: 5,
			srcs:  []Source{{Stage: 2, Maps: uniform(2, 900, 100, 100, 900, 100)}},
			want: []Piece{
				{Partition: 0, Task: 0, Source: 2, From: 0, To: 1, Bytes: 450},
				{Partition: 3, Task: 3, Source: 2, From: 0, To: 1, Bytes: 450},
				{Partition: 0, Task: 5, Source: 2, From: 1, To: 1<<31 - 1, Bytes: 450},
				{Partition: 3, Task: 6, Source: 2, From: 1, To: 1<<31 - 1, Bytes: 450},
			},
		},
		{
			name:  "the larger side of a join is split",
			parts: 3,
			srcs:  []Source{{Stage: 0, Maps: uniform(2, 10, 100, 10)}, {Stage: 1, Maps: uniform(2, 10, 900, 10)}},
			want: []Piece{
				{Partition: 1, Task: 1, Source: 1, From: 0, To: 1, Bytes: 450},
				{Partition: 1, Task: 3, Source: 1, From: 1, To: 1<<31 - 1, Bytes: 450},
			},
		},
		{
			name:  "one map output holds it all: not split",
			parts: 3,
			srcs:  []Source{{Stage: 0, Maps: maps([]int64{10, 1000, 10}, []int64{10, 0, 10})}},
		},
		{
			name:  "one dominating map output takes a piece of its own",
			parts: 3,
			srcs:  []Source{{Stage: 0, Maps: maps([]int64{5, 10, 5}, []int64{5, 900, 5}, []int64{5, 10, 5}, []int64{5, 10, 5})}},
			want: []Piece{
				{Partition: 1, Task: 1, Source: 0, From: 0, To: 2, Bytes: 910},
				{Partition: 1, Task: 3, Source: 0, From: 2, To: 3, Bytes: 10},
				{Partition: 1, Task: 4, Source: 0, From: 3, To: 1<<31 - 1, Bytes: 10},
			},
		},
		{
			name:  "under minBytes: not hot",
			parts: 3,
			srcs:  []Source{{Stage: 0, Maps: uniform(2, 1, 40, 1)}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Make(tc.parts, tc.srcs, 4, 50, tc.combinable)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.Pieces, tc.want) {
				t.Errorf("pieces\n got %+v\nwant %+v", p.Pieces, tc.want)
			}
			// Every piece's task is below Tasks, and the pieces of a
			// partition read each of its side's map tasks exactly once.
			for _, pc := range p.Pieces {
				if pc.Task >= p.Tasks() {
					t.Errorf("piece %+v past the %d tasks", pc, p.Tasks())
				}
			}
			for _, src := range tc.srcs {
				for _, m := range src.Maps {
					for part := range tc.parts {
						n, hot := 0, false
						for _, pc := range p.Pieces {
							if pc.Partition == part && pc.Source == src.Stage {
								hot = true
								if pc.Reads(m.Task) {
									n++
								}
							}
						}
						if hot && n != 1 {
							t.Errorf("map task %d of partition %d read by %d pieces", m.Task, part, n)
						}
					}
				}
			}
		})
	}
}

// TestMakeIsDeterministic: the same map outputs in any order plan the same.
func TestMakeIsDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var ms []MapOutput
	for m := range 40 {
		s := make([]int64, 8)
		for p := range s {
			s[p] = rng.Int64N(1000)
		}
		s[5] += 20000
		ms = append(ms, MapOutput{Task: m * 3, Sizes: s})
	}
	want, err := Make(8, []Source{{Maps: ms}}, 4, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Pieces) < 2 {
		t.Fatalf("partition 5 not split: %+v", want)
	}
	for range 5 {
		shuffled := append([]MapOutput(nil), ms...)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		got, err := Make(8, []Source{{Maps: shuffled}}, 4, 0, true)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("plans differ:\n%+v\n%+v", got, want)
		}
	}
	// Pieces are about the median each.
	for _, pc := range want.Pieces {
		if pc.Bytes > 3*want.Median {
			t.Errorf("piece %+v over 3 times the median %d", pc, want.Median)
		}
	}
}

func TestMakeRefusesMismatchedIndexes(t *testing.T) {
	if _, err := Make(3, []Source{{Maps: maps([]int64{1, 2})}}, 4, 0, false); err == nil {
		t.Error("a map output of 2 partitions planned as 3")
	}
}
