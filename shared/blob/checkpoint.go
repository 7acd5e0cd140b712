package blob

import "fmt"

// Checkpoints of a task, beside its attempt outputs but outside every
// attempt's output prefix (AttemptPrefix), so that marking an ended
// attempt's outputs for expiry never touches a checkpoint a later
// attempt resumes from, and a commit's listing never sees one:
//
//	jobs/<job>/ckpt/<stage>/p<partition>/a<attempt>/<seq>.json        checkpoint record
//	jobs/<job>/ckpt/<stage>/p<partition>/a<attempt>/<seq>/part-<r>    output segment
//
// Every object is written once (If-None-Match: *) and never changes:
// a checkpoint names only segments written before it.

// TaskCheckpointsPrefix holds the checkpoints of every attempt of a task.
func TaskCheckpointsPrefix(job, stage string, partition int) string {
	return fmt.Sprintf("jobs/%s/ckpt/%s/p%06d/", job, stage, partition)
}

// CheckpointPrefix holds the checkpoints of one attempt of a task.
func CheckpointPrefix(job, stage string, partition, attempt int) string {
	return fmt.Sprintf("%sa%d/", TaskCheckpointsPrefix(job, stage, partition), attempt)
}

// CheckpointKey is checkpoint seq of an attempt.
func CheckpointKey(job, stage string, partition, attempt, seq int) string {
	return fmt.Sprintf("%s%06d.json", CheckpointPrefix(job, stage, partition, attempt), seq)
}

// SegmentKey is output partition r's segment that checkpoint seq of an
// attempt seals (and, for the final seal before publishing, seq past the
// last checkpoint).
func SegmentKey(job, stage string, partition, attempt, seq, r int) string {
	return fmt.Sprintf("%s%06d/part-%05d", CheckpointPrefix(job, stage, partition, attempt), seq, r)
}
