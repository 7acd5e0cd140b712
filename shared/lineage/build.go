package lineage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/events"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/split"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Jobs is where the builder reads a job's record (dynamo.Store).
type Jobs interface {
	// JobGet reads a job with its spec; an error wrapping
	// domain.ErrNotFound when it was deleted.
	JobGet(ctx context.Context, id string) (domain.Job, error)
}

// Plans is where the builder reads the plans that pinned a job's input
// objects (blob.Store, the data bucket).
type Plans interface {
	// Get reads an object of the data bucket; an error wrapping
	// domain.ErrNotFound when there is none.
	Get(ctx context.Context, key string) ([]byte, error)
	// Bucket is the data bucket's name.
	Bucket() string
}

// Builder builds a job's run events from its outbox events.
type Builder struct {
	// Namespace is the installation's job namespace (Config.Namespace).
	Namespace string
	Jobs      Jobs
	Plans     Plans
}

// runNamespace makes run ids: a job's run id is the UUID (version 5) of
// its id in it, the same in every process and on every copy.
var runNamespace = uuid.MustParse("4b1d7e9e-63f4-4a8e-9a55-3c6f0a2f1b6d")

// RunID is the OpenLineage run id of a job.
func RunID(job string) string { return uuid.NewSHA1(runNamespace, []byte(job)).String() }

// JobName is the OpenLineage name of a job: its spec's name under its
// owner, so that two owners' jobs of one name are two jobs.
func JobName(owner, name string) string { return owner + "/" + name }

// EventType is the run event type of an outbox event; ok is false for
// events that are no run's transition (stages, tasks) and for the
// submission of a job that waits for its start time (WAITING): its run
// starts with its start (events.JobStarted).
func EventType(ev events.Event) (string, bool) {
	switch ev.DetailType {
	case events.JobSubmitted:
		return Start, ev.Detail.State != string(sm.JobWaiting)
	case events.JobStarted:
		return Start, true
	case events.JobSucceeded:
		return Complete, true
	case events.JobFailed:
		return Fail, true
	case events.JobCancelled:
		return Abort, true
	}
	return "", false
}

// Build returns the run event of ev; ok is false when ev reports no run's
// transition. The event depends only on ev and on what never changes
// once written (the job's spec, its plans), so every copy is the same
// but for a job deleted between copies, whose event then names no
// datasets. An error is a read that failed, to be tried again.
func (b *Builder) Build(ctx context.Context, ev events.Event) (*RunEvent, bool, error) {
	typ, ok := EventType(ev)
	if !ok {
		return nil, false, nil
	}
	d := ev.Detail
	re := &RunEvent{
		EventType: typ, EventTime: events.TimeString(ev.Time), Producer: Producer, SchemaURL: SchemaURL,
		Run: Run{RunID: RunID(d.JobID), Facets: RunFacets{Batchwork: &JobRunFacet{
			BaseFacet: base(facetsURL), JobID: d.JobID, Owner: d.Owner, State: d.State, Manifest: d.Manifest,
		}}},
		Job: Job{Namespace: b.Namespace, Name: JobName(d.Owner, d.JobName), Facets: JobFacets{JobType: &JobTypeFacet{
			BaseFacet:      base("https://openlineage.io/spec/facets/2-0-4/JobTypeJobFacet.json#/$defs/JobTypeJobFacet"),
			ProcessingType: "BATCH", Integration: "BATCHWORK", JobType: "JOB",
		}}},
		Inputs: []InputDataset{}, Outputs: []OutputDataset{},
	}
	if d.Error != "" && (typ == Fail || typ == Abort) {
		re.Run.Facets.ErrorMessage = &ErrorMessageFacet{
			BaseFacet: base("https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet"),
			Message:   d.Error, ProgrammingLanguage: "GO",
		}
	}
	j, err := b.Jobs.JobGet(ctx, d.JobID)
	if errors.Is(err, domain.ErrNotFound) || (err == nil && j.Spec == nil) {
		return re, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("lineage of %s: %w", ev.ID, err)
	}
	if re.Inputs, err = b.inputs(ctx, j); err != nil {
		return nil, false, fmt.Errorf("lineage of %s: %w", ev.ID, err)
	}
	re.Outputs = []OutputDataset{b.output(j)}
	return re, true, nil
}

// output is the job's published folder, or its own area of the data
// bucket, where its stages' committed outputs and manifests are.
func (b *Builder) output(j domain.Job) OutputDataset {
	if bucket, prefix, err := spec.ParseS3URI(j.Spec.Output); j.Spec.Output != "" && err == nil {
		return OutputDataset{Namespace: "s3://" + bucket, Name: prefix}
	}
	return OutputDataset{Namespace: "s3://" + b.Plans.Bucket(), Name: blob.JobPrefix(j.ID)}
}

// inputs are the job's input prefixes (resolved at submit), every input
// of every stage, each with the objects its stages' plans pinned under it
// (a split names its input: split.Split.Source). A stage not planned yet
// (a FAIL or ABORT before it started; a START before the root stages'
// planning) adds its prefixes without pins.
func (b *Builder) inputs(ctx context.Context, j domain.Job) ([]InputDataset, error) {
	out := []InputDataset{} // never null: the schema wants an array
	pins := map[string][]PinnedObject{}
	for _, st := range j.Spec.Stages {
		ins := st.Partitions.InputList()
		if len(ins) == 0 {
			continue
		}
		names := make([]string, len(ins)) // "s3://bucket/prefix" of each input; "" if unparsable
		for k, in := range ins {
			bucket, prefix, err := spec.ParseS3URI(in.Prefix)
			if err != nil {
				continue // never stored so: submit resolved and checked it
			}
			names[k] = "s3://" + bucket + "/" + prefix
			if !slices.ContainsFunc(out, func(d InputDataset) bool { return d.Namespace == "s3://"+bucket && d.Name == prefix }) {
				out = append(out, InputDataset{Namespace: "s3://" + bucket, Name: prefix})
			}
		}
		bySource, err := b.pinned(ctx, j.ID, st.Name)
		if err != nil {
			return nil, err
		}
		for k, objs := range bySource {
			if k >= 0 && k < len(names) && names[k] != "" {
				pins[names[k]] = mergePins(pins[names[k]], objs)
			}
		}
	}
	for i := range out {
		objs := pins[out[i].Namespace+"/"+out[i].Name]
		if len(objs) == 0 {
			continue
		}
		out[i].Facets = &DatasetFacets{Version: &DatasetVersionFacet{
			BaseFacet:      base("https://openlineage.io/spec/facets/1-0-1/DatasetVersionDatasetFacet.json#/$defs/DatasetVersionDatasetFacet"),
			DatasetVersion: digest(objs),
		}}
		f := &PinnedObjectsFacet{BaseFacet: base(facetsURL), Objects: objs, Count: len(objs)}
		if len(objs) > MaxPinnedObjects {
			f.Objects, f.Truncated = objs[:MaxPinnedObjects], true
		}
		out[i].InputFacets = &InputDatasetFacets{PinnedObjects: f}
	}
	return out, nil
}

// pinned reads the objects a stage's plan pinned, by the input they were
// listed under (split.Split.Source), one per key in key order; none when
// the stage has no plan (yet, or its data was deleted).
func (b *Builder) pinned(ctx context.Context, job, stage string) (map[int][]PinnedObject, error) {
	raw, err := b.Plans.Get(ctx, blob.PlanKey(job, stage))
	if errors.Is(err, domain.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read plan of stage %q: %w", stage, err)
	}
	var splits []split.Split
	if err := json.Unmarshal(raw, &splits); err != nil {
		return nil, fmt.Errorf("decode plan of stage %q: %w", stage, err)
	}
	objs := map[int][]PinnedObject{}
	for _, s := range splits {
		objs[s.Source] = append(objs[s.Source], PinnedObject{Key: s.Key, ETag: s.ETag, VersionID: s.Version})
	}
	for k := range objs {
		objs[k] = mergePins(nil, objs[k])
	}
	return objs, nil
}

// mergePins is a and b, one entry per key, in key order.
func mergePins(a, b []PinnedObject) []PinnedObject {
	all := append(slices.Clone(a), b...)
	slices.SortStableFunc(all, func(x, y PinnedObject) int { return strings.Compare(x.Key, y.Key) })
	return slices.CompactFunc(all, func(x, y PinnedObject) bool { return x.Key == y.Key })
}

// digest names the version of the objects read: the same objects at the
// same ETags and versions give the same digest.
func digest(objs []PinnedObject) string {
	h := sha256.New()
	for _, o := range objs {
		fmt.Fprintf(h, "%s\x00%s\x00%s\n", o.Key, o.ETag, o.VersionID)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}
