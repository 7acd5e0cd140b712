package kernel

import (
	"context"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
)

// NoteAttemptEnd records how an attempt ended without committing, for the
// task's attempt history, the job's timeline and the stage's failure count.
// It runs after the transition that ended the attempt, by the caller that
// won it; the record is history, not state, so a failure to write it is
// logged and never fails the transition. Each attempt has at most one end
// record: the first writer wins. holder is the attempt's claim record when
// the caller has it (else zero): the record keeps its executor and claim
// time, so the attempt's history says who ran it and since when without
// a write of its own.
func (s *Kernel) NoteAttemptEnd(ctx context.Context, ref domain.TaskRef, attempt int, kind domain.AttemptEndKind, msg string, holder domain.Task) {
	if attempt < 1 {
		return
	}
	shards, err := s.StageShards(ctx, ref.Job, ref.Stage)
	if err != nil {
		s.Logger(ref).Warn("record attempt end: no stage plan", "attempt", attempt, "err", err)
		shards = 0
	}
	first, err := s.store.AttemptRecordEnd(ctx, dynamo.AttemptEndParams{
		End:    AttemptEnd(ref, attempt, kind, s.Now(), Truncate(msg, MaxErrorLen), holder),
		Shards: shards,
	})
	if err != nil {
		s.Logger(ref).Warn("record attempt end", "attempt", attempt, "kind", kind, "err", err)
	}
	// A job deleted under a late attempt (the store refuses its record)
	// may still get its outputs, written after the deletion's data step:
	// tagged, the lifecycle rule expires them (with the spec in this
	// process's cache; best effort).
	if first || errors.Is(err, domain.ErrNotFound) {
		s.MarkUncommitted(ctx, ref, attempt)
	}
}

// MarkUncommitted tags an attempt's outputs for the bucket's lifecycle
// rule to expire: the attempt ended without committing, so nothing will
// ever read them. Best effort: an untagged leftover costs storage, never
// correctness, since only a manifest makes outputs visible.
func (s *Kernel) MarkUncommitted(ctx context.Context, ref domain.TaskRef, attempt int) {
	sp, err := s.CachedSpec(ctx, ref.Job)
	if err != nil {
		s.Logger(ref).Warn("mark attempt outputs uncommitted", "attempt", attempt, "err", err)
		return
	}
	prefix := blob.AttemptPrefix(ref.Job, sp.Stages[ref.Stage].Name, ref.Partition, attempt)
	if _, err := s.blob.MarkUncommitted(ctx, prefix); err != nil {
		s.Logger(ref).Warn("mark attempt outputs uncommitted", "attempt", attempt, "err", err)
	}
}

// MaxErrorLen bounds the error kept on a task record and its history, so
// the record stays within one write unit (1 KB) with the longest input key.
const MaxErrorLen = 256

// Truncate keeps s within n bytes, "…" marking where it was cut. It keeps
// the end, where a failure's cause is (an exec program's traceback ends
// with its exception; a wrapped error with its root), and the first line
// when that is short (an exec failure's exit code, before its last stderr
// lines). A cut never splits a UTF-8 sequence: the message is stored as a
// DynamoDB string, which must be valid UTF-8.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	head := ""
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < n/2 {
		head = s[:i+1]
	}
	keep := max(n-len(head)-len(mark), 0)
	start := len(s) - keep
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	if n < len(mark) {
		return s[start:]
	}
	return head + mark + s[start:]
}
