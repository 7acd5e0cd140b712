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

// A version id rides on the task record only where it fits the key's
// budget with the ETag pin; past it (or past MaxVersionIDBytes) the input
// keeps its ETag pin alone, and the record is no larger for it.
func TestFitVersion(t *testing.T) {
	t.Parallel()
	etag := strings.Repeat("0", 32) + "-10000"
	v32 := strings.Repeat("v", 32) // what S3 issues
	fits := MaxInputKeyBytes - PinBytes(etag) - VersionPinBytes(v32)
	tests := []struct {
		name, key, etag, version, want string
	}{
		{"a usual version", "data/a.txt", etag, v32, v32},
		{"no version", "data/a.txt", etag, "", ""},
		{"the longest key that fits", strings.Repeat("k", fits), etag, v32, v32},
		{"one byte over: ETag pin alone", strings.Repeat("k", fits+1), etag, v32, ""},
		{"the longest version", "k", etag, strings.Repeat("v", MaxVersionIDBytes), strings.Repeat("v", MaxVersionIDBytes)},
		{"a version past MaxVersionIDBytes: ETag pin alone", "k", etag, strings.Repeat("v", MaxVersionIDBytes+1), ""},
		{"S3's longest version: ETag pin alone", "k", etag, strings.Repeat("v", 1024), ""},
		{"null version, no ETag", "k", "", "null", "null"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := FitVersion(tc.key, tc.etag, tc.version)
			if got != tc.want {
				t.Fatalf("FitVersion = %q, want %q", got, tc.want)
			}
			if len(tc.key)+PinBytes(tc.etag) > MaxInputKeyBytes {
				return // refused at planning
			}
			task := sampleTask(len(tc.key))
			task.Input.ETag, task.Input.Version = tc.etag, got
			if n, unpinned := TaskItemSize(task, 259), TaskItemSize(sampleTask(MaxInputKeyBytes), 259); n > unpinned {
				t.Fatalf("task item with key %d bytes, ETag and version %q is %d bytes, more than the %d of an unpinned one", len(tc.key), got, n, unpinned)
			}
			if d := decodeTask(task.Ref, encodeTask(task, task.Updated)).Input; d.Version != got || d.ETag != tc.etag {
				t.Fatalf("decoded input %+v, want ETag %q version %q", d, tc.etag, got)
			}
		})
	}
}
