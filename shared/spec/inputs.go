package spec

import (
	"fmt"
	"slices"
	"strconv"
)

// MaxInputs bounds a stage's input prefixes: planning lists each one, and
// holds every listing at once, in the api and sweep functions' memory.
const MaxInputs = 16

// InputList returns the stage's input prefixes in order: Inputs, or Input
// alone; nil for a stage partitioned by count. The pointers are into p,
// so a caller may rewrite a prefix in place (admission resolves inputs:).
func (p *Partitions) InputList() []*Input {
	switch {
	case p == nil:
		return nil
	case p.Input != nil:
		return []*Input{p.Input}
	}
	out := make([]*Input, len(p.Inputs))
	for k := range p.Inputs {
		out[k] = &p.Inputs[k]
	}
	return out
}

// InputAt returns input k of the stage (split.Split.Source), or nil if the
// stage has no such input.
func (p *Partitions) InputAt(k int) *Input {
	ins := p.InputList()
	if k < 0 || k >= len(ins) {
		return nil
	}
	return ins[k]
}

// HasInput reports whether the stage's tasks read splits of input
// prefixes (Input or Inputs).
func (p *Partitions) HasInput() bool { return len(p.InputList()) > 0 }

// SourceName is how a task of input k is told which input it reads: the
// input's name, or its index.
func (in *Input) SourceName(k int) string {
	if in.Name != "" {
		return in.Name
	}
	return strconv.Itoa(k)
}

// ShuffleSources returns, in "after" order, the upstream stages whose
// shuffles feed stage i: several for a stage that joins them (each task p
// reads partition p of every one), none if it reads no shuffle. In a
// valid job they all shuffle into the same number of partitions.
func (j *Job) ShuffleSources(i int) []int {
	var out []int
	for _, u := range j.upstream(j.index())[i] {
		if j.Stages[u].Shuffle != nil {
			out = append(out, u)
		}
	}
	return out
}

// checkShuffleSources holds a stage that reads several shuffles to one
// partition count: its task p reads partition p of each.
func (j *Job) checkShuffleSources(errs *errorList, i int, shuffles []int) {
	if len(shuffles) < 2 {
		return
	}
	first := j.Stages[shuffles[0]]
	if first.Shuffle.Partitions < 1 {
		return // reported on the upstream stage
	}
	for _, u := range shuffles[1:] {
		if n := j.Stages[u].Shuffle.Partitions; n >= 1 && n != first.Shuffle.Partitions {
			errs.add(stagePath(i)+".after", fmt.Sprintf("reads the shuffles of stages %q (%d partitions) and %q (%d partitions); a stage reading several shuffles needs them all to have the same shuffle.partitions",
				first.Name, first.Shuffle.Partitions, j.Stages[u].Name, n))
			return
		}
	}
}

// checkInputs checks partitions.input or each of partitions.inputs. pp is
// the stage's "stages[i].partitions".
func checkInputs(errs *errorList, pp string, P *Partitions) {
	if P.Inputs != nil {
		switch n := len(P.Inputs); {
		case n == 0:
			errs.add(pp+".inputs", "must list at least one input; leave it out for a stage partitioned by count")
		case n > MaxInputs:
			errs.add(pp+".inputs", fmt.Sprintf("lists %d inputs; at most %d are allowed", n, MaxInputs))
		}
	}
	names := map[string]string{}
	for k, in := range P.InputList() {
		field := pp + ".input"
		if P.Input == nil {
			field = pp + ".inputs[" + strconv.Itoa(k) + "]"
		}
		if in.Name != "" {
			checkName(errs, field+".name", in.Name)
		}
		name := in.SourceName(k)
		if other, dup := names[name]; dup {
			errs.add(field+".name", fmt.Sprintf("%q names two inputs (also %s); give each input its own name", name, other))
		}
		names[name] = field
		checkInput(errs, field, in)
	}
}

// checkInput checks one input prefix; field is its path in the spec.
func checkInput(errs *errorList, field string, in *Input) {
	if err := checkInputPrefix(in.Prefix); err != nil && !hasPlaceholder(in.Prefix) { // Resolve checks it resolved
		errs.add(field+".prefix", err.Error())
	}
	if in.Format != "" && !slices.Contains(Formats, in.Format) {
		errs.add(field+".format", fmt.Sprintf("%q is not a format; want lines, jsonl, csv or parquet", in.Format))
	}
	checkParquet(errs, field, in)
	// A split under a page holds a few lines at most, so tiny sizes
	// only multiply tasks. The floor is not the memory guard: planning
	// counts splits before it makes any (a job stored before the floor
	// was raised still plans) and refuses more than MaxPartitions.
	switch {
	case in.SplitSize != 0 && in.SplitSize < MinSplitSize:
		errs.add(field+".splitSize", fmt.Sprintf("must be at least %d (bytes)", MinSplitSize))
	case in.SplitSize > MaxSplitSize:
		// Checked only here: a job stored before the cap keeps its
		// plan, since planning must give every process the same splits.
		errs.add(field+".splitSize", fmt.Sprintf("must be at most %d (bytes, %d MiB), so that a task's split fits in an executor's memory", MaxSplitSize, MaxSplitSize>>20))
	}
}
