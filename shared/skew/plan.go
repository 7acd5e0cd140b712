// Package skew plans the split of a reducing stage's hot shuffle
// partitions (spec.Skew): which partitions are hot, and how many tasks
// read each, which of its map outputs each reads. A plan depends only on
// the upstream shuffles' committed map outputs and their indexes, which
// never change, and is written once beside the stage's other plan
// (blob.SkewPlanKey), so every materializer, claim and reducer of the
// stage sees the same one.
package skew

import (
	"fmt"
	"math"
	"slices"
)

// MaxPieces bounds the tasks one hot partition is split over.
const MaxPieces = 64

// MapOutput is one committed map task of a shuffle, as its reducers read
// it: the map task's partition and the bytes it holds for each shuffle
// partition (Sizes[p]).
type MapOutput struct {
	Task  int     `json:"task"`
	Sizes []int64 `json:"-"`
}

// Source is one shuffle a stage reads: its stage index and its map
// outputs.
type Source struct {
	Stage int
	Maps  []MapOutput
}

// Piece is one task's share of a hot partition: of shuffle stage Source,
// the map outputs of map tasks From to To-1, and of every other shuffle
// the stage reads (a join), all of the partition.
type Piece struct {
	Partition int   `json:"partition"`
	Task      int   `json:"task"`
	Source    int   `json:"source"`
	From      int   `json:"from"`
	To        int   `json:"to"`
	Bytes     int64 `json:"bytes"`
}

// Plan is a stage's split of its hot partitions. Tasks 0 to Partitions-1
// are the stage's usual tasks; Pieces' tasks past them are extra. In a
// join a hot partition's first piece is its own task; in a combinable
// reduction every piece is an extra task and the partition's own task
// reduces the pieces' outputs (Combine).
type Plan struct {
	Partitions int     `json:"partitions"`
	Combinable bool    `json:"combinable,omitempty"`
	Median     int64   `json:"median"`
	Pieces     []Piece `json:"pieces,omitempty"`
}

// Tasks is the stage's number of tasks: its partitions and the extra
// pieces.
func (p Plan) Tasks() int {
	n := p.Partitions
	for _, pc := range p.Pieces {
		n = max(n, pc.Task+1)
	}
	return n
}

// PieceOf is the piece task reads, if it reads one.
func (p Plan) PieceOf(task int) (Piece, bool) {
	i := slices.IndexFunc(p.Pieces, func(pc Piece) bool { return pc.Task == task })
	if i < 0 {
		return Piece{}, false
	}
	return p.Pieces[i], true
}

// Combine lists the pieces whose outputs task reduces: those of its
// partition when the plan is combinable and the partition is hot; none
// otherwise.
func (p Plan) Combine(task int) []Piece {
	if !p.Combinable || task >= p.Partitions {
		return nil
	}
	var out []Piece
	for _, pc := range p.Pieces {
		if pc.Partition == task {
			out = append(out, pc)
		}
	}
	return out
}

// Make plans the split of parts partitions read from srcs (each source's
// maps in any order). A partition is hot when its bytes, over every
// source, pass threshold times the median partition and minBytes; its
// largest side is cut into groups of map outputs of contiguous map tasks,
// of about the median each (at most MaxPieces, and one group per map
// output at most: a map output is not cut, so one that holds most of a
// partition leaves it less evenly split).
func Make(parts int, srcs []Source, threshold int, minBytes int64, combinable bool) (Plan, error) {
	plan := Plan{Partitions: parts, Combinable: combinable}
	if parts < 1 {
		return plan, fmt.Errorf("skew plan of %d partitions", parts)
	}
	srcs = slices.Clone(srcs)
	for i := range srcs {
		srcs[i].Maps = slices.Clone(srcs[i].Maps)
		slices.SortStableFunc(srcs[i].Maps, func(a, b MapOutput) int { return a.Task - b.Task })
		for _, m := range srcs[i].Maps {
			if m.Sizes != nil && len(m.Sizes) != parts {
				return plan, fmt.Errorf("map task %d of stage %d holds %d partitions, want %d", m.Task, srcs[i].Stage, len(m.Sizes), parts)
			}
		}
	}
	// side[s][p]: the bytes of partition p from source s.
	side := make([][]int64, len(srcs))
	total := make([]int64, parts)
	for s, src := range srcs {
		side[s] = make([]int64, parts)
		for _, m := range src.Maps {
			for p, n := range m.Sizes {
				side[s][p] += n
				total[p] += n
			}
		}
	}
	sorted := slices.Clone(total)
	slices.Sort(sorted)
	plan.Median = sorted[(parts-1)/2]
	next := parts
	for p := range parts {
		t := total[p]
		if t <= minBytes || float64(t) <= float64(threshold)*float64(plan.Median) {
			continue
		}
		big := 0
		for s := range srcs {
			if side[s][p] > side[big][p] {
				big = s
			}
		}
		target := max(plan.Median, 1)
		k := int(min(int64(MaxPieces), (side[big][p]+target-1)/target))
		groups := cut(srcs[big].Maps, p, side[big][p], k)
		if len(groups) < 2 {
			continue // one map output holds it all: nothing to split
		}
		for g, grp := range groups {
			task := p
			if combinable || g > 0 {
				task, next = next, next+1
			}
			plan.Pieces = append(plan.Pieces, Piece{Partition: p, Task: task, Source: srcs[big].Stage, From: grp.from, To: grp.to, Bytes: grp.bytes})
		}
	}
	slices.SortFunc(plan.Pieces, func(a, b Piece) int { return a.Task - b.Task })
	return plan, nil
}

type group struct {
	from, to int // map tasks [from, to)
	bytes    int64
}

// cut splits maps (sorted by task) into at most k groups of contiguous
// map tasks holding about bytes/k of partition p each, none empty. The
// first group starts at map task 0 and the last ends past every task, so
// the groups cover every map task however the maps are numbered.
func cut(maps []MapOutput, p int, bytes int64, k int) []group {
	if k < 2 || bytes == 0 {
		return nil
	}
	var out []group
	cur := group{from: 0}
	var acc int64
	j := int64(1)
	for i, m := range maps {
		n := m.size(p)
		acc += n
		cur.bytes += n
		if int(j) < k && acc*int64(k) >= j*bytes && acc < bytes && i+1 < len(maps) {
			cur.to = maps[i+1].Task
			out = append(out, cur)
			cur = group{from: cur.to}
			for int(j) < k && acc*int64(k) >= j*bytes {
				j++
			}
		}
	}
	cur.to = math.MaxInt32
	return append(out, cur)
}

func (m MapOutput) size(p int) int64 {
	if m.Sizes == nil {
		return 0
	}
	return m.Sizes[p]
}

// Reads reports whether the piece reads map task task's output.
func (pc Piece) Reads(task int) bool { return task >= pc.From && task < pc.To }
