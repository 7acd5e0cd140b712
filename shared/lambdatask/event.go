package lambdatask

import "time"

const (
	// MaxWait is Lambda's longest run (15 minutes) and a margin: the
	// executor waits no longer for a response.
	MaxWait = 15*time.Minute + 30*time.Second
	// MaxEvent is Lambda's limit on a synchronous request.
	MaxEvent = 6 << 20
)

// Event is what a lambda stage's function receives.
type Event struct {
	Task TaskRef `json:"task"`
	// Params are the partition's parameters ({} when none).
	Params map[string]string `json:"params"`
	// RunParams are the job's run parameters (its spec's params:, as
	// resolved at submit); absent when it has none.
	RunParams map[string]string `json:"runParams,omitempty"`
	// Input is the task's split of an S3 input: the records that start in
	// the byte range [start, end) of the object (a record running through
	// start belongs to the previous split). Nil for other tasks.
	Input *Input `json:"input,omitempty"`
	// Shuffle is the task's shuffle partition: read every object, in
	// order; each holds key<TAB>value lines. Nil for other tasks. (A
	// shuffle read by a lambda stage keeps one object per partition, not
	// the indexed objects other reducers read slices of:
	// internal/executor/shuffle.go.)
	Shuffle *Shuffle `json:"shuffle,omitempty"`
	// Format is the input's record format: lines, jsonl or csv.
	Format string `json:"format"`
	// Source names the input prefix Input is a split of (the input's
	// name in the spec, or its index); "" for other tasks.
	Source string `json:"source,omitempty"`
	// OutputPrefix is this attempt's own prefix, s3://bucket/jobs/...
	// /a<attempt>/; Outputs are the keys (in the same bucket) of its
	// output partitions, one per part: write part r, if at all, to
	// Outputs[r]. A stage with a shuffle has one part per downstream task,
	// and key<TAB>value line k belongs to part
	// FNV-1a-32(k) mod len(Outputs), as Emit does.
	OutputPrefix string   `json:"outputPrefix"`
	Outputs      []string `json:"outputs"`
	// Deadline is when the executor stops waiting for the response.
	Deadline string `json:"deadline"`
	// Resume and CheckpointOutputs are the task's checkpoints (the
	// package doc's Checkpoints): where to resume, and where an
	// invocation that checkpoints writes its outputs.
	Resume            *Resume  `json:"resume,omitempty"`
	CheckpointOutputs []string `json:"checkpointOutputs,omitempty"`
}

// TaskRef names the task and attempt.
type TaskRef struct {
	Job       string `json:"job"`
	Stage     string `json:"stage"`
	Partition int    `json:"partition"`
	Attempt   int    `json:"attempt"`
}

// Input is a split of one S3 object.
type Input struct {
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
	Start  int64  `json:"start"`
	End    int64  `json:"end"`
	// ETag is the object's ETag when the stage was planned: a function
	// that reads with If-Match (quoted) never reads a changed object.
	ETag string `json:"etag,omitempty"`
	// VersionID, on a versioned bucket, is the object's version when the
	// stage was planned: a function that reads it (GetObject VersionId)
	// reads the planned bytes even after the key is overwritten.
	VersionID string `json:"versionId,omitempty"`
}

// Shuffle lists the objects of a shuffle partition.
type Shuffle struct {
	Bucket string   `json:"bucket"`
	Keys   []string `json:"keys"`
	// Sources, for a stage that joins several upstream shuffles, lists
	// each one's objects under its stage's name, in the order the stage's
	// "after" names them: a function tags each record with its source
	// (internal/executor/tagged). Keys then lists every source's objects
	// in the same order, untagged.
	Sources []ShuffleSource `json:"sources,omitempty"`
}

// ShuffleSource is the objects of one upstream shuffle a joining
// stage's task reads.
type ShuffleSource struct {
	Source string   `json:"source"`
	Keys   []string `json:"keys"`
}

// Resume is where a lambda stage's function resumes.
type Resume struct {
	Offset int64  `json:"offset"`
	State  []byte `json:"state"` // base64 in JSON
}
