package blob

import (
	"fmt"
	"strings"
)

// The object layout of the Batchwork bucket, in one place:
//
//	jobs/<job>/out/<stage>/p<partition>/a<attempt>/part-<r>  attempt outputs (immutable; only the committed attempt counts)
//	jobs/<job>/plan/<stage>.json                             input splits of an S3-input stage (immutable)
//	jobs/<job>/manifests/<stage>.json                        committed outputs of a stage that feeds a shuffle
//	jobs/<job>/manifest.json                                 the job's manifest, written when it succeeds
//	<manifest key without .json>.<n, 6 digits>.json          page n (from 1) of a paged manifest, written before it
//	inputs/<owner key>/...                                   an owner's inputs, uploaded by the owner (owner key: principal.Key)
//
// A map task of a shuffle of more than one partition writes its
// partitions as one indexed object, its part-00000 (shuffle.go).
//
// Attempt outputs sit under their own prefix so that a stale executor's
// late writes land beside, never on, the committed ones. Nothing else
// lives in the bucket: the functions' roles read only the two areas.

// AttemptPrefix is where one attempt of a task writes its outputs.
func AttemptPrefix(job, stage string, partition, attempt int) string {
	return fmt.Sprintf("jobs/%s/out/%s/p%06d/a%d/", job, stage, partition, attempt)
}

// OutputKey is output part r of an attempt.
func OutputKey(job, stage string, partition, attempt, part int) string {
	return fmt.Sprintf("%spart-%05d", AttemptPrefix(job, stage, partition, attempt), part)
}

// PlanKey is the immutable split plan of an S3-input stage.
func PlanKey(job, stage string) string { return fmt.Sprintf("jobs/%s/plan/%s.json", job, stage) }

// StageManifestKey is the manifest of a stage's committed outputs.
func StageManifestKey(job, stage string) string {
	return fmt.Sprintf("jobs/%s/manifests/%s.json", job, stage)
}

// JobManifestKey is the job's manifest.
func JobManifestKey(job string) string { return fmt.Sprintf("jobs/%s/manifest.json", job) }

// JobPrefix holds every object of one job: its plans, outputs and
// manifests, and nothing else (deleting a job's data deletes it).
func JobPrefix(job string) string { return fmt.Sprintf("jobs/%s/", job) }

// ManifestPageKey is page n (from 1) of the manifest at key: beside it,
// so a job's manifests and their pages list together. Stage names cannot
// hold a '.', so no stage's manifest key is another's page key.
func ManifestPageKey(key string, n int) string {
	return fmt.Sprintf("%s.%06d.json", strings.TrimSuffix(key, ".json"), n)
}

// The bucket's two areas: every job's plans, outputs and manifests, and
// the owners' inputs. A job's input in the bucket lies within the
// submitter's own inputs area or outputs area (OutputsArea), never in the
// jobs area.
const (
	JobsArea   = "jobs/"
	InputsArea = "inputs/"
)

// InputsPrefix is the inputs area of the owner whose key (principal.Key)
// is ownerKey.
func InputsPrefix(ownerKey string) string { return InputsArea + ownerKey + "/" }
