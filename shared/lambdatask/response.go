package lambdatask

import (
	"encoding/json"
	"unicode/utf8"
)

// Response is what the function answers: the outputs it wrote, or an
// error, which fails the attempt (it is retried like any failure).
type Response struct {
	Outputs []Output `json:"outputs"`
	Error   string   `json:"error,omitempty"`
	// Permanent, with Error, says no retry can fix the error: the task
	// fails at once, without its remaining attempts (as a Go function's
	// batchwork.Permanent).
	Permanent bool `json:"permanent,omitempty"`
	// Rejects are the records the function rejected, as a Go function's
	// Task.Reject: committed with the attempt and counted against the
	// stage's maxBadRecords.
	Rejects []Reject `json:"rejects,omitempty"`
	// Checkpoint asks the executor to save it and invoke the function
	// again from it (the package doc's Checkpoints).
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
}

// Output is one output partition written.
type Output struct {
	Part int    `json:"part"`
	Key  string `json:"key"`
}

// Checkpoint is a checkpoint a function's response asks for.
type Checkpoint struct {
	Offset int64  `json:"offset"`
	State  []byte `json:"state,omitempty"` // base64 in JSON
}

// Reject is one record a lambda stage's function rejected, listed in its
// response's rejects (Response.Rejects): the same as a Go function's
// Task.Reject. The rejections go with the attempt: written before it
// commits, counted in the commit against the stage's maxBadRecords, shown
// by `batchwork result ID --bad-records` only once the attempt
// committed, never when it failed or was fenced.
type Reject struct {
	// Record is the record's bytes as text (cut to 1 KiB when kept).
	Record string `json:"record"`
	// Reason says what is wrong with it (cut to 256 bytes; empty is
	// shown as "(no reason given)").
	Reason string `json:"reason"`
	// Offset is where the record starts, in bytes from the first byte of
	// the task's input (for a split, the event's input.start), or -1
	// (the default when absent) when the function does not know.
	Offset *int64 `json:"offset,omitempty"`
}

// OutOfMemory is the errorType Lambda's runtimes report for an
// invocation that ran out of its function's memory (the runtime was
// killed; Lambda answers with FunctionError "Unhandled").
const OutOfMemory = "Runtime.OutOfMemory"

// FunctionErrorMessage is the message of a function error's payload
// ({"errorMessage": ..., "errorType": ...} in Lambda's runtimes), cut to
// 2,000 bytes.
func FunctionErrorMessage(raw []byte) string {
	var e struct {
		Message string `json:"errorMessage"`
		Type    string `json:"errorType"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Message != "" {
		if e.Type != "" {
			return truncate(e.Type+": "+e.Message, 2000)
		}
		return truncate(e.Message, 2000)
	}
	return truncate(string(raw), 2000)
}

// truncate cuts s to n bytes on a rune boundary (the message is stored
// as a string) and marks the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
