// Package lineage reports Batchwork's jobs as OpenLineage runs
// (https://openlineage.io): a START when a job starts running, and a
// COMPLETE, FAIL or ABORT (a cancelled job) when it ends, each naming the
// job's input datasets (its input prefixes, with the ETags of the objects
// its plans pinned) and its output dataset (its published folder, or its
// own area of the data bucket), POSTed to the endpoint the operator sets
// (OPENLINEAGE_URL, Config) as OpenLineage's HTTP transport does.
//
// Lineage rides on the event outbox (shared/events): a RunEvent is built
// from the job's Submitted or ended event when that event is delivered,
// and the outbox record stays until the endpoint accepted it as well as
// the bus. So lineage is never lost and never on a commit's critical
// path, and is delivered at least once; every copy of one event carries
// the same runId, eventType and eventTime (the outbox event's time),
// which OpenLineage consumers dedupe on.
package lineage

// SchemaURL is the OpenLineage spec the events follow.
const SchemaURL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"

// Producer identifies Batchwork as the producer of the events and of its
// facets.
const Producer = "https://github.com/batchwork/batchwork"

// facetsURL is where Batchwork's own facets are described.
const facetsURL = "https://github.com/batchwork/batchwork/blob/main/docs/lineage.md#facets"

// Event types (RunEvent.EventType).
const (
	Start    = "START"
	Complete = "COMPLETE"
	Fail     = "FAIL"
	Abort    = "ABORT"
)

// RunEvent is one OpenLineage run event.
type RunEvent struct {
	EventType string          `json:"eventType"`
	EventTime string          `json:"eventTime"`
	Producer  string          `json:"producer"`
	SchemaURL string          `json:"schemaURL"`
	Run       Run             `json:"run"`
	Job       Job             `json:"job"`
	Inputs    []InputDataset  `json:"inputs"`
	Outputs   []OutputDataset `json:"outputs"`
}

// Run is the run of one Batchwork job.
type Run struct {
	RunID  string    `json:"runId"`
	Facets RunFacets `json:"facets,omitempty"`
}

// RunFacets are the run's facets.
type RunFacets struct {
	ErrorMessage *ErrorMessageFacet `json:"errorMessage,omitempty"`
	Batchwork    *JobRunFacet       `json:"batchwork_job,omitempty"`
}

// Job names the job: the namespace of the installation and the spec's
// name under its owner.
type Job struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Facets    JobFacets `json:"facets,omitempty"`
}

// JobFacets are the job's facets.
type JobFacets struct {
	JobType *JobTypeFacet `json:"jobType,omitempty"`
}

// InputDataset is one input prefix.
type InputDataset struct {
	Namespace   string              `json:"namespace"`
	Name        string              `json:"name"`
	Facets      *DatasetFacets      `json:"facets,omitempty"`
	InputFacets *InputDatasetFacets `json:"inputFacets,omitempty"`
}

// OutputDataset is the job's output folder.
type OutputDataset struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// DatasetFacets are an input's dataset facets.
type DatasetFacets struct {
	Version *DatasetVersionFacet `json:"version,omitempty"`
}

// InputDatasetFacets are an input's input facets.
type InputDatasetFacets struct {
	PinnedObjects *PinnedObjectsFacet `json:"batchwork_pinnedObjects,omitempty"`
}

// BaseFacet is every facet's producer and schema.
type BaseFacet struct {
	Producer  string `json:"_producer"`
	SchemaURL string `json:"_schemaURL"`
}

// ErrorMessageFacet is why a job failed or was cancelled.
type ErrorMessageFacet struct {
	BaseFacet
	Message             string `json:"message"`
	ProgrammingLanguage string `json:"programmingLanguage"`
}

// JobTypeFacet says a Batchwork job is a batch job.
type JobTypeFacet struct {
	BaseFacet
	ProcessingType string `json:"processingType"`
	Integration    string `json:"integration"`
	JobType        string `json:"jobType"`
}

// DatasetVersionFacet is an input's version: a digest of the keys, ETags
// and version ids of the objects the job's plan pinned, so two runs that
// read the same bytes name the same version.
type DatasetVersionFacet struct {
	BaseFacet
	DatasetVersion string `json:"datasetVersion"`
}

// PinnedObjectsFacet lists the objects of an input the job's plan pinned
// (Batchwork's own facet), at most MaxPinnedObjects of them.
type PinnedObjectsFacet struct {
	BaseFacet
	Objects []PinnedObject `json:"objects"`
	// Count is how many objects were pinned, listed or not.
	Count int `json:"count"`
	// Truncated is set when Objects lists fewer than Count.
	Truncated bool `json:"truncated,omitempty"`
}

// PinnedObject is one input object as the job read it.
type PinnedObject struct {
	Key       string `json:"key"`
	ETag      string `json:"eTag,omitempty"`
	VersionID string `json:"versionId,omitempty"`
}

// MaxPinnedObjects bounds the objects listed per input, so an input of
// millions of objects does not make an event of megabytes; the version
// facet's digest covers them all.
const MaxPinnedObjects = 1000

// JobRunFacet is Batchwork's own run facet: the job as Batchwork names it.
type JobRunFacet struct {
	BaseFacet
	JobID string `json:"jobId"`
	Owner string `json:"owner"`
	// State is the job's state after the event (RUNNING, SUCCEEDED,
	// FAILED, CANCELLED).
	State string `json:"state"`
	// Manifest is a succeeded job's manifest key in the data bucket.
	Manifest string `json:"manifest,omitempty"`
}

func base(schema string) BaseFacet { return BaseFacet{Producer: Producer, SchemaURL: schema} }
