package spec

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"time"
)

// The helpers below resolve settings and walk the stage graph. They take a
// stage index as returned by StageIndex and panic if it is out of range,
// like a slice index. On an invalid job they ignore "after" entries that
// name no stage, the stage itself or a repeat, the same way Validate does.

// StageIndex returns the index of the stage called name, or -1, false.
func (j *Job) StageIndex(name string) (int, bool) {
	for i, s := range j.Stages {
		if s.Name == name {
			return i, true
		}
	}
	return -1, false
}

// StageRetry returns stage i's retry policy with every field resolved:
// the stage's value, else the job's, else the default.
func (j *Job) StageRetry(i int) Retry {
	r := Retry{MaxAttempts: DefaultMaxAttempts, Backoff: DefaultBackoff}
	for _, src := range []*Retry{j.Retry, j.Stages[i].Retry} { // later wins
		if src == nil {
			continue
		}
		if src.MaxAttempts != 0 {
			r.MaxAttempts = src.MaxAttempts
		}
		if src.Backoff != 0 {
			r.Backoff = src.Backoff
		}
	}
	return r
}

// StageLease returns how long a worker holds a task of stage i before the
// task is considered abandoned.
func (j *Job) StageLease(i int) time.Duration {
	return time.Duration(firstNonZero(j.Stages[i].Lease, j.Lease, DefaultLease))
}

// StagePriority returns the queue class of stage i's tasks.
func (j *Job) StagePriority(i int) Priority {
	return firstNonZero(j.Stages[i].Priority, j.Priority, DefaultPriority)
}

func firstNonZero[T comparable](vs ...T) T {
	var zero T
	for _, v := range vs {
		if v != zero {
			return v
		}
	}
	return zero
}

// SplitSizeOrDefault returns the target bytes per task of an input.
func (in *Input) SplitSizeOrDefault() Size {
	return firstNonZero(in.SplitSize, DefaultSplitSize)
}

// ShuffleSource returns the index of the first upstream stage whose
// shuffle feeds stage i (ShuffleSources lists them all; they share one
// partition count), and false if stage i does not read a shuffle.
func (j *Job) ShuffleSource(i int) (int, bool) {
	for _, u := range j.upstream(j.index())[i] {
		if j.Stages[u].Shuffle != nil {
			return u, true
		}
	}
	return -1, false
}

// Roots returns, in declaration order, the stages that run after no other
// stage: where a job starts.
func (j *Job) Roots() []int {
	var out []int
	for i, up := range j.upstream(j.index()) {
		if len(up) == 0 {
			out = append(out, i)
		}
	}
	return out
}

// Downstream returns, in declaration order, the stages that name stage i
// in their "after".
func (j *Job) Downstream(i int) []int {
	return downstream(j.upstream(j.index()))[i]
}

// Sinks returns, in declaration order, the stages no other stage runs
// after: the job is done when they are.
func (j *Job) Sinks() []int {
	var out []int
	for i, down := range downstream(j.upstream(j.index())) {
		if len(down) == 0 {
			out = append(out, i)
		}
	}
	return out
}

// TopoOrder returns the stages ordered so that each comes after every
// stage it runs after. Among stages that are ready together the earlier
// declared comes first, so the order is stable. Stages on or behind a
// cycle (only possible in an invalid job) are left out.
func (j *Job) TopoOrder() []int {
	up := j.upstream(j.index())
	down := downstream(up)
	waiting := make([]int, len(up))
	var ready []int
	for i, u := range up {
		waiting[i] = len(u)
		if waiting[i] == 0 {
			ready = append(ready, i)
		}
	}
	order := make([]int, 0, len(up))
	for len(ready) > 0 {
		k := slices.Index(ready, slices.Min(ready))
		i := ready[k]
		ready = slices.Delete(ready, k, k+1)
		order = append(order, i)
		for _, d := range down[i] {
			if waiting[d]--; waiting[d] == 0 {
				ready = append(ready, d)
			}
		}
	}
	return order
}

// index maps each stage name to the index of its first declaration.
func (j *Job) index() map[string]int {
	m := make(map[string]int, len(j.Stages))
	for i, s := range j.Stages {
		if _, dup := m[s.Name]; !dup && s.Name != "" {
			m[s.Name] = i
		}
	}
	return m
}

// upstream returns, per stage, the indices of the stages it runs after, in
// "after" order, without unknown names, self-references and repeats.
func (j *Job) upstream(index map[string]int) [][]int {
	up := make([][]int, len(j.Stages))
	for i, s := range j.Stages {
		for _, name := range s.After {
			if u, ok := index[name]; ok && u != i && !slices.Contains(up[i], u) {
				up[i] = append(up[i], u)
			}
		}
	}
	return up
}

// downstream inverts upstream; each list is in declaration order.
func downstream(up [][]int) [][]int {
	down := make([][]int, len(up))
	for i, us := range up {
		for _, u := range us {
			down[u] = append(down[u], i)
		}
	}
	return down
}

// Encode returns the canonical compact JSON form of j: the form stored
// with the job and hashed by Hash. encoding/json writes struct fields in
// declaration order and map keys sorted, so equal jobs encode equally.
// Parse(Encode(j)) returns a job equal to j for any job Parse accepted.
func (j *Job) Encode() ([]byte, error) {
	return encodeJSON(j)
}

// Hash identifies the spec: the first 32 hex digits of the SHA-256 of its
// encoding.
func (j *Job) Hash() string {
	b, err := j.Encode()
	if err != nil {
		// Every field of Job has an infallible JSON encoding.
		panic("spec: encoding a job failed: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:32]
}

// encodeJSON is json.Marshal without HTML escaping, which would only
// inflate the stored spec ("<" becomes "\u003c") and count against its
// size limits.
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
