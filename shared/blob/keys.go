package blob

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strings"
)

// The object layout of the Batchwork bucket, in one place:
//
//	jobs/<job>/out/<stage>/<spread>/p<partition>/a<attempt>/part-<r>  attempt outputs (immutable; only the committed attempt counts)
//	jobs/<job>/plan/<stage>.json                             input splits of an S3-input stage (immutable)
//	jobs/<job>/manifests/<stage>.json                        committed outputs of a stage that feeds a shuffle
//	jobs/<job>/manifest.json                                 the job's manifest, written when it succeeds
//	<manifest key without .json>.<n, 6 digits>.json          page n (from 1) of a paged manifest, written before it
//	jobs/<job>/badrecords/<stage>/p<partition>/a<attempt>.jsonl  an attempt's rejected records (badrecords.go)
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
	return fmt.Sprintf("jobs/%s/out/%s/%s/p%06d/a%d/", job, stage, Spread(partition), partition, attempt)
}

// SpreadWidth is how many prefixes a stage's outputs are spread over.
const SpreadWidth = 256

// Spread is the component of an output key that spreads a stage's
// outputs over SpreadWidth prefixes: two hex digits hashed from the
// partition. S3 serves 3,500 writes a second per prefix; a stage at
// 10,000 tasks a second writes 10,000 objects a second, which under one
// prefix S3 would throttle (503 SlowDown) until it has split it. Spread
// evenly over 256, a prefix takes about 40 a second, and S3 can split
// the stage's folder at these two characters. Partitions run roughly in
// order, so without the hash (p000123/ alone) the writes would crowd one
// key range at a time. The spread depends on the partition only, so an
// attempt's prefix, and everything listed or fenced under it, stays one
// prefix.
func Spread(partition int) string {
	h := fnv.New32a()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(partition))
	h.Write(b[:])
	return fmt.Sprintf("%02x", h.Sum32()%SpreadWidth)
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
