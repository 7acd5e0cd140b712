package spec

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// namePattern keeps names usable verbatim in S3 keys, DynamoDB keys and
// log fields without escaping.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

// maxKeyBytes is S3's limit on an object key, and so on an input prefix.
const maxKeyBytes = 1024

// Validate checks j against every rule and returns a *ValidationError
// listing all violations, or nil. Parse calls it; call it directly on a
// Job built in code.
func (j *Job) Validate() error {
	return j.validate().err()
}

func (j *Job) validate() errorList {
	var errs errorList
	checkName(&errs, "name", j.Name)
	checkPriority(&errs, "priority", j.Priority)
	checkLease(&errs, "lease", j.Lease)
	checkRetry(&errs, "retry", j.Retry)
	if j.Deadline != 0 && (j.Deadline < MinDeadline || j.Deadline > MaxDeadline) {
		errs.add("deadline", fmt.Sprintf("must be between %v and %v", MinDeadline, MaxDeadline))
	}
	if j.MaxConcurrency < 0 || j.MaxConcurrency > MaxConcurrencyLimit {
		errs.add("maxConcurrency", fmt.Sprintf("must be between 1 and %d, or 0 for no limit", MaxConcurrencyLimit))
	}
	if !hasPlaceholder(j.Output) { // else Resolve checks it resolved
		checkOutput(&errs, "output", j.Output) // output.go
	}
	checkRunParams(&errs, j.Params) // params.go

	switch n := len(j.Stages); {
	case n == 0:
		errs.add("stages", "at least one stage is required")
	case n > MaxStages:
		errs.add("stages", fmt.Sprintf("has %d stages; at most %d are allowed", n, MaxStages))
	}

	index := j.index()
	for i, s := range j.Stages {
		p := stagePath(i)
		checkName(&errs, p+".name", s.Name)
		if first, ok := index[s.Name]; ok && first != i {
			errs.add(p+".name", fmt.Sprintf("duplicate stage name %q (also %s)", s.Name, stagePath(first)))
		}
		checkRunnable(&errs, p, s) // task, exec or lambda: stagerun.go
		checkPriority(&errs, p+".priority", s.Priority)
		checkLease(&errs, p+".lease", s.Lease)
		checkRetry(&errs, p+".retry", s.Retry)
		checkTolerance(&errs, p, s)   // tolerance.go
		checkStageOutput(&errs, p, s) // stageoutput.go
		checkAfter(&errs, p, s, index)
		if s.Shuffle != nil && (s.Shuffle.Partitions < 1 || s.Shuffle.Partitions > MaxShufflePartitions) {
			errs.add(p+".shuffle.partitions", fmt.Sprintf("must be between 1 and %d", MaxShufflePartitions))
		}
	}

	up := j.upstream(index)
	down := downstream(up)
	for i, s := range j.Stages {
		j.checkPartitions(&errs, i, up[i])
		if s.Shuffle != nil && len(down[i]) == 0 {
			errs.add(stagePath(i)+".shuffle", "no stage reads this shuffle")
		}
		j.checkShuffleBy(&errs, i, down[i]) // shuffleby.go
		j.checkSkew(&errs, i)               // skew.go
	}
	errs = append(errs, j.cycles(up)...)

	// The spec is stored and re-parsed as JSON, which can be larger than
	// the YAML it came from; the limit must hold for the stored form too.
	if b, err := j.Encode(); err == nil && len(b) > MaxSpecBytes {
		errs.add("", fmt.Sprintf("spec encodes to %d bytes of JSON; at most %d are allowed", len(b), MaxSpecBytes))
	}
	return errs
}

func stagePath(i int) string { return "stages[" + strconv.Itoa(i) + "]" }

func checkName(errs *errorList, field, v string) {
	switch {
	case v == "":
		errs.add(field, "is required")
	case len(v) > MaxNameLen:
		errs.add(field, fmt.Sprintf("must be at most %d characters", MaxNameLen))
	case !namePattern.MatchString(v):
		errs.add(field, fmt.Sprintf("%q must start with a letter or digit and contain only letters, digits, '_' and '-'", v))
	}
}

// Task names may also use dots, so libraries can namespace their functions
// ("wordcount.map").
var taskPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

func checkTaskName(errs *errorList, field, v string) {
	switch {
	case v == "":
		errs.add(field, "is required")
	case len(v) > MaxNameLen:
		errs.add(field, fmt.Sprintf("must be at most %d characters", MaxNameLen))
	case !taskPattern.MatchString(v):
		errs.add(field, fmt.Sprintf("%q must start with a letter or digit and contain only letters, digits, '.', '_' and '-'", v))
	}
}

func checkPriority(errs *errorList, field string, p Priority) {
	switch p {
	case "", PriorityHigh, PriorityNormal, PriorityLow:
	default:
		errs.add(field, fmt.Sprintf("%q is not a priority; use %q, %q or %q", string(p), PriorityHigh, PriorityNormal, PriorityLow))
	}
}

// checkLease accepts 0, which means "inherit".
func checkLease(errs *errorList, field string, d Duration) {
	if d != 0 && (d < MinLease || d > MaxLease) {
		errs.add(field, fmt.Sprintf("must be between %v and %v", MinLease, MaxLease))
	}
}

// checkRetry accepts zero fields, which mean "inherit".
func checkRetry(errs *errorList, field string, r *Retry) {
	if r == nil {
		return
	}
	if r.MaxAttempts < 0 || r.MaxAttempts > MaxAttemptsLimit {
		errs.add(field+".maxAttempts", fmt.Sprintf("must be between 1 and %d", MaxAttemptsLimit))
	}
	switch {
	case r.Backoff < 0:
		errs.add(field+".backoff", "must not be negative")
	case r.Backoff > MaxBackoff:
		errs.add(field+".backoff", fmt.Sprintf("must be at most %v", MaxBackoff))
	}
}

func checkAfter(errs *errorList, p string, s Stage, index map[string]int) {
	seen := make(map[string]bool, len(s.After))
	for k, a := range s.After {
		ap := p + ".after[" + strconv.Itoa(k) + "]"
		_, known := index[a]
		switch {
		case a == s.Name:
			errs.add(ap, "a stage cannot run after itself")
		case seen[a]:
			errs.add(ap, fmt.Sprintf("duplicate entry %q", a))
		case !known:
			errs.add(ap, fmt.Sprintf("unknown stage %q", a))
		}
		seen[a] = true
	}
}

// checkPartitions enforces that stage i gets its task count from exactly
// one source: an explicit count, S3 inputs, or its upstream shuffles.
func (j *Job) checkPartitions(errs *errorList, i int, up []int) {
	s := j.Stages[i]
	p := stagePath(i)
	var shuffles []int
	for _, u := range up {
		if j.Stages[u].Shuffle != nil {
			shuffles = append(shuffles, u)
		}
	}
	switch {
	case s.Partitions != nil && len(shuffles) > 0:
		errs.add(p+".partitions", fmt.Sprintf("a stage fed by a shuffle takes its partitions from shuffle of stage %q", j.Stages[shuffles[0]].Name))
	case s.Partitions == nil && len(shuffles) == 0:
		errs.add(p+".partitions", "required (count, input or inputs) unless the stage reads a shuffle: a stage in its after: with shuffle: {partitions: N}")
	}
	j.checkShuffleSources(errs, i, shuffles) // inputs.go
	if s.Partitions == nil {
		return
	}

	pp := p + ".partitions"
	P := s.Partitions
	set := 0
	for _, b := range []bool{P.Count != 0, P.Input != nil, P.Inputs != nil} {
		if b {
			set++
		}
	}
	switch {
	case set > 1:
		errs.add(pp, "count, input and inputs are mutually exclusive: give exactly one")
	case set == 0 && len(shuffles) == 0:
		errs.add(pp, "count, input or inputs is required")
	}
	countOK := P.Count >= 1 && P.Count <= MaxPartitions
	if P.Count != 0 && !countOK {
		errs.add(pp+".count", fmt.Sprintf("must be between 1 and %d", MaxPartitions))
	}
	if P.Params != nil {
		switch {
		case P.Count == 0:
			errs.add(pp+".params", "requires count: there is one params entry per partition")
		case countOK && len(P.Params) != P.Count:
			errs.add(pp+".params", fmt.Sprintf("must have one entry per partition: has %d, count is %d", len(P.Params), P.Count))
		}
		for k, m := range P.Params {
			checkParams(errs, pp+".params["+strconv.Itoa(k)+"]", m)
		}
	}
	checkInputs(errs, pp, P) // inputs.go
}

// checkParquet holds what only Parquet reads to Parquet: columns, and
// never a whole-object codec, since a Parquet file compresses its pages
// itself and a byte range of a gzip stream cannot be read.
func checkParquet(errs *errorList, field string, in *Input) {
	if in.Format != FormatParquet {
		if in.Columns != nil {
			errs.add(field+".columns", "applies only to format parquet")
		}
		return
	}
	seen := make(map[string]bool, len(in.Columns))
	for i, c := range in.Columns {
		f := field + ".columns[" + strconv.Itoa(i) + "]"
		switch {
		case strings.TrimSpace(c) == "":
			errs.add(f, "must name a column")
		case seen[c]:
			errs.add(f, fmt.Sprintf("%q is listed twice", c))
		}
		seen[c] = true
	}
	if in.Columns != nil && len(in.Columns) == 0 {
		errs.add(field+".columns", "must name at least one column; leave it out to read all of them")
	}
	p := strings.ToLower(in.Prefix)
	if strings.HasSuffix(p, ".gz") || strings.HasSuffix(p, ".zst") {
		errs.add(field+".prefix", "names a gzip or zstd object, but Parquet is not compressed as a whole file: its pages are compressed inside it; name the .parquet objects")
	}
	if in.DynamicSplit {
		errs.add(field+".dynamicSplit", "does not apply to parquet: a task reads whole row groups")
	}
}

// checkParams bounds one partition's parameters: they travel inside the
// task record, which must stay within DynamoDB's item size.
func checkParams(errs *errorList, field string, m map[string]string) {
	for k, v := range m {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			// JSON would silently replace the bad bytes, so the stored
			// spec would differ from the one submitted.
			errs.add(field, "keys and values must be valid UTF-8")
			return
		}
	}
	b, err := encodeJSON(m)
	if err == nil && len(b) > MaxParamsBytes {
		errs.add(field, fmt.Sprintf("encodes to %d bytes of JSON; at most %d are allowed", len(b), MaxParamsBytes))
	}
}

// cycles reports the cycles found by a depth-first walk of the "after"
// edges. Every cycle has a stage whose "after" names a stage declared
// later (in an acyclic spec written top-down there is none), and that is
// the stage a cycle is reported on: it is the likeliest mistake. The path
// is in execution order, starting with the later-declared stage:
// "stages[0].after: cycle c -> a -> b -> c" means stage 0 (a) runs after c.
func (j *Job) cycles(up [][]int) errorList {
	const (
		unvisited = iota
		onStack
		done
	)
	var errs errorList
	state := make([]int8, len(j.Stages))
	var stack []int
	var visit func(u int)
	visit = func(u int) {
		state[u] = onStack
		stack = append(stack, u)
		for _, v := range up[u] {
			switch state[v] {
			case unvisited:
				visit(v)
			case onStack:
				// stack is v ... u, each stage running after the next
				// one, and u runs after v: in execution order the cycle
				// is v, u, then the stack back down to v.
				cyc := []int{v}
				for k := len(stack) - 1; stack[k] != v; k-- {
					cyc = append(cyc, stack[k])
				}
				errs = append(errs, j.cycleError(cyc))
			}
		}
		stack = stack[:len(stack)-1]
		state[u] = done
	}
	for i := range j.Stages {
		if state[i] == unvisited {
			visit(i)
		}
	}
	return errs
}

// cycleError reports cyc, a cycle in execution order, on the earliest
// declared stage that runs after a stage declared later than itself.
func (j *Job) cycleError(cyc []int) FieldError {
	at := -1 // position in cyc of the stage to report
	for k, to := range cyc {
		from := cyc[(k+len(cyc)-1)%len(cyc)]
		if from > to && (at < 0 || to < cyc[at]) {
			at = k
		}
	}
	start := (at + len(cyc) - 1) % len(cyc)
	names := make([]string, 0, len(cyc)+1)
	for k := range len(cyc) + 1 {
		names = append(names, j.Stages[cyc[(start+k)%len(cyc)]].Name)
	}
	return FieldError{Field: stagePath(cyc[at]) + ".after", Message: "cycle " + strings.Join(names, " -> ")}
}

// InputsScheme starts an input prefix that names a path in the
// submitter's own inputs area of the installation's data bucket
// ("inputs:corpus/"), so a user need not know the area's key. The control
// plane resolves it at submit (s3://<data bucket>/inputs/<owner key>/corpus/)
// and records the job's spec resolved.
const InputsScheme = "inputs:"

// MaxInputsPath bounds the path of an inputs: prefix: what is left of an
// S3 key after the inputs area's own prefix, inputs/<owner key>/ (40
// bytes; blob.InputsPrefix, a test holds the two together).
const MaxInputsPath = maxKeyBytes - InputsAreaPrefixBytes

// InputsAreaPrefixBytes is the length of an inputs area's prefix,
// "inputs/" + a 32-hex-digit owner key + "/".
const InputsAreaPrefixBytes = len("inputs/") + 32 + 1

// InputsPath returns the path of an inputs: prefix, and whether prefix is
// one.
func InputsPath(prefix string) (string, bool) { return strings.CutPrefix(prefix, InputsScheme) }

// checkInputPrefix checks an input prefix's form: an s3:// URI, or
// inputs:<path>.
func checkInputPrefix(s string) error {
	path, ok := InputsPath(s)
	if !ok {
		_, prefix, err := ParseS3URI(s)
		if err != nil {
			return err
		}
		return checkSegments(prefix)
	}
	switch {
	case !utf8.ValidString(path):
		return fmt.Errorf("the path after %s must be valid UTF-8", InputsScheme)
	case strings.HasPrefix(path, "/"):
		return fmt.Errorf("the path after %s is relative to your inputs area: drop the leading '/'", InputsScheme)
	case len(path) > MaxInputsPath:
		return fmt.Errorf("the path after %s is %d bytes; at most %d fit in an S3 key under your inputs area", InputsScheme, len(path), MaxInputsPath)
	}
	return checkSegments(path)
}

// ParseS3URI splits "s3://bucket/prefix" into its bucket and key prefix
// (which may be empty).
func ParseS3URI(s string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(s, "s3://")
	if !ok {
		return "", "", fmt.Errorf("%q must have the form s3://bucket/prefix, or %s<path> for a path in your inputs area", s, InputsScheme)
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	if len(bucket) < 3 || len(bucket) > 63 || strings.Trim(bucket, "abcdefghijklmnopqrstuvwxyz0123456789.-") != "" {
		return "", "", fmt.Errorf("bucket %q must be 3 to 63 characters of a-z, 0-9, '.' and '-'", bucket)
	}
	if !utf8.ValidString(prefix) {
		return "", "", fmt.Errorf("prefix must be valid UTF-8")
	}
	if len(prefix) > maxKeyBytes {
		return "", "", fmt.Errorf("prefix is %d bytes; S3 keys are at most %d", len(prefix), maxKeyBytes)
	}
	return bucket, prefix, nil
}
