package dynamo

import (
	"strings"
	"testing"
)

// The input pin shares the key's budget (control.MaxInputKey = MaxInputKeyBytes bytes
// for the key and PinBytes together): a task record with the longest key
// a pinned object may have is no larger than one with the longest key
// and no pin, which TestTaskItemUnder1KB keeps within one write unit.
func TestPinnedTaskItemUnder1KB(t *testing.T) {
	t.Parallel()
	// A multipart upload's ETag: 32 hex digits and a part count.
	etag := strings.Repeat("0", 32) + "-10000"
	task := sampleTask(MaxInputKeyBytes - PinBytes(etag))
	task.Input.ETag = etag
	if n, unpinned := TaskItemSize(task, 259), TaskItemSize(sampleTask(MaxInputKeyBytes), 259); n > unpinned {
		t.Fatalf("pinned task item is %d bytes, more than the %d of an unpinned one", n, unpinned)
	}
	if got := decodeTask(task.Ref, encodeTask(task, task.Updated)).Input.ETag; got != etag {
		t.Fatalf("decoded ETag %q, want %q", got, etag)
	}
}
