// Package spec defines a Batchwork job specification: a DAG of stages, each
// split into partitioned tasks, with its parsing, defaults and validation.
//
// A spec is immutable once submitted; the control plane stores it verbatim
// with the job and every executor reads its stage settings from it.
package spec

import "time"

// Priority is the scheduling class of a stage's tasks. Each class has its
// own ready queue.
type Priority string

const (
	PriorityHigh   Priority = "high"
	PriorityNormal Priority = "normal"
	PriorityLow    Priority = "low"
)

// Job is a whole job specification.
type Job struct {
	Name   string  `json:"name"`
	Stages []Stage `json:"stages"`
	// Defaults apply to every stage that does not override them.
	Retry    *Retry   `json:"retry,omitempty"`
	Lease    Duration `json:"lease,omitempty"`
	Priority Priority `json:"priority,omitempty"`
	// Deadline, counted from submission, fails the job with "deadline
	// exceeded" and cancels its running tasks. 0: none.
	Deadline Duration `json:"deadline,omitempty"`
	// MaxConcurrency caps the job's tasks running at once. A task over the
	// cap waits in its queue without spending an attempt. 0: no cap.
	MaxConcurrency int `json:"maxConcurrency,omitempty"`
	// Output, when set, is the folder the job's final outputs are
	// published to when it succeeds, with a _SUCCESS marker written last:
	// "s3://bucket/prefix/", or "outputs:<path>/" in the submitter's
	// outputs area (OutputsScheme), which a stored job's spec holds
	// resolved (output.go; shared/control/publish.go).
	Output string `json:"output,omitempty"`
	// Params declares the run parameters: name to default, nil for none
	// (every submission sets it). A stored job's spec holds every value,
	// resolved (params.go).
	Params map[string]*string `json:"params,omitempty"`
}

// Stage is one node of the DAG. Its task count comes from exactly one of:
// Partitions.Count, Partitions.Input, Partitions.Inputs, or (when
// Partitions is nil) the shuffles of the upstream stages in After that
// have one, which all shuffle into the same number of partitions
// (ShuffleSources).
type Stage struct {
	Name string `json:"name"`
	// Exactly one of Task, Exec and Lambda says what runs: a function
	// registered on the executor, a program (Exec: the program and its
	// arguments; records on stdin, outputs on stdout, see
	// internal/executor/execstage) on an executor host that allows programs,
	// or an existing Lambda function (a name or ARN the operator allows;
	// internal/executor/lambdatask.go).
	Task       string      `json:"task,omitempty"`
	Exec       []string    `json:"exec,omitempty"`
	Lambda     string      `json:"lambda,omitempty"`
	After      []string    `json:"after,omitempty"`
	Partitions *Partitions `json:"partitions,omitempty"`
	Shuffle    *Shuffle    `json:"shuffle,omitempty"`
	Retry      *Retry      `json:"retry,omitempty"`
	Lease      Duration    `json:"lease,omitempty"`
	Priority   Priority    `json:"priority,omitempty"`
	// Failure tolerance (tolerance.go). Timeout bounds one attempt's run
	// (0: only the lease and the job deadline bound it).
	Timeout           Duration     `json:"timeout,omitempty"`
	ToleratedFailures *Tolerance   `json:"toleratedFailures,omitempty"`
	MaxBadRecords     int          `json:"maxBadRecords,omitempty"`
	Speculation       *Speculation `json:"speculation,omitempty"`
	Resources         *Resources   `json:"resources,omitempty"`
	// Output is how the stage's outputs are written: lines, or Parquet
	// of a declared schema (stageoutput.go). Not Job.Output, the folder.
	Output *StageOutput `json:"output,omitempty"`
	// Skew splits the stage's hot shuffle partitions (skew.go).
	Skew *Skew `json:"skew,omitempty"`
}

// Partitions says how a stage is split into tasks.
type Partitions struct {
	// Count is an explicit number of tasks; Params, when given, has one
	// entry per partition.
	Count  int                 `json:"count,omitempty"`
	Params []map[string]string `json:"params,omitempty"`
	// Input splits the objects under an S3 prefix by file and by byte range
	// on record boundaries.
	Input *Input `json:"input,omitempty"`
	// Inputs are several prefixes, each with its own format, planned
	// together: a task reads a split of one object of one of them
	// (inputs.go). Exclusive with Input and Count.
	Inputs []Input `json:"inputs,omitempty"`
}

// Input is an S3 prefix read as records of a format.
type Input struct {
	// Name tells a task which input its split comes from (the Go task's
	// Source, SourceName); "" names it by its index in Inputs ("0" for
	// Input).
	Name string `json:"name,omitempty"`
	// Prefix is "s3://bucket/prefix", or "inputs:<path>" for a path in
	// the submitter's inputs area (InputsScheme), which a stored job's
	// spec holds resolved.
	Prefix string `json:"prefix"`
	// Format is how the objects are read into records: one of Formats;
	// "" is FormatLines. Objects named .gz or .zst are decompressed
	// whatever the format, each as one task, except Parquet, which
	// compresses its own pages and refuses such names.
	Format string `json:"format,omitempty"`
	// Columns, for FormatParquet only, are the top-level columns a record
	// holds; none means all of them.
	Columns []string `json:"columns,omitempty"`
	// SplitSize is the target bytes per task; defaults to DefaultSplitSize.
	SplitSize Size `json:"splitSize,omitempty"`
	// DynamicSplit lets a straggling task of this input give the unread
	// rest of its byte range away as new tasks of the same stage.
	DynamicSplit bool `json:"dynamicSplit,omitempty"`
	// AllowEmpty lets the prefix match no object: the stage then has no
	// task and completes. Without it such a stage fails its job at
	// planning, since an empty prefix is most often a mistyped path.
	AllowEmpty bool `json:"allowEmpty,omitempty"`
}

// Input formats (Input.Format); shared/split reads them.
const (
	FormatLines = "lines" // a record is a line of text
	FormatJSONL = "jsonl" // JSON Lines: a record is a line holding one JSON value
	FormatCSV   = "csv"   // CSV with a header row (RFC 4180: quoted fields may hold newlines)
	// FormatParquet: a record is a row of a Parquet file, read as a JSON
	// object on a line; a task reads the row groups that start in its
	// byte range.
	FormatParquet = "parquet"
)

// Formats lists the input formats, default first.
var Formats = []string{FormatLines, FormatJSONL, FormatCSV, FormatParquet}

// Shuffle partitions a stage's output by key into Partitions parts, each
// of which becomes one task of the downstream stage: by a hash of the key
// (By "" or ShuffleByHash), or by key ranges drawn from a sample, each
// part's records sorted by key (ShuffleByRange; shuffleby.go).
type Shuffle struct {
	Partitions int    `json:"partitions"`
	By         string `json:"by,omitempty"`
}

// Retry bounds how often a failing task is attempted.
type Retry struct {
	MaxAttempts int      `json:"maxAttempts,omitempty"`
	Backoff     Duration `json:"backoff,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("30s").
type Duration time.Duration

// Size is a byte count written as an integer or with a unit ("64MiB").
type Size int64

// Defaults and limits. Limits keep a job's records within DynamoDB's item
// and transaction sizes (docs/job-spec.md lists them for users).
const (
	DefaultMaxAttempts = 3
	DefaultBackoff     = Duration(time.Second)
	DefaultLease       = Duration(60 * time.Second)
	DefaultPriority    = PriorityNormal
	DefaultSplitSize   = Size(64 << 20)

	MaxSpecBytes         = 256 << 10
	MaxStages            = 64
	MaxPartitions        = 100_000
	MaxShufflePartitions = 10_000
	MaxAttemptsLimit     = 100
	MinLease             = Duration(time.Second)
	MaxLease             = Duration(12 * time.Hour)
	MaxBackoff           = Duration(24 * time.Hour)
	MinSplitSize         = Size(4 << 10)   // why 4 KiB: see checkPartitions
	MaxSplitSize         = Size(256 << 20) // a task may hold its split in memory: see tuning.ExecutorMemory
	MaxNameLen           = 64
	MaxParamsBytes       = 512
	MinDeadline          = Duration(time.Second)
	MaxDeadline          = Duration(7 * 24 * time.Hour)
	// MaxConcurrencyLimit is 1,000 for the same reason as the owner
	// limit's cap (control.MaxOwnerConcurrency): a job's slots are one
	// item of about 40 bytes per running task, billed by size on every
	// claim and release; at 10,000 it would be ~400 KB, DynamoDB's item
	// limit.
	MaxConcurrencyLimit = 1_000
)
