package dynamo

import (
	"encoding/hex"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// aTrace holds trace context (shared/tracing) on records: on job and
// stage records the W3C traceparent of the job's submit span, the root of
// its trace; on a task record only its span's id, as 8 bytes, since its
// trace is its job's and a task record must stay within one write unit
// (budget.go). Written by the write that creates the record (a job's and
// its stages' at submit, a task's at materialization or, unwritten, at
// its first claim), never by a write of its own; absent while tracing is
// off.
const aTrace = "tr"

func putTrace(item map[string]types.AttributeValue, traceparent string) {
	if traceparent != "" {
		item[aTrace] = sv(traceparent)
	}
}

// traceSpanBytes is a span id's 8 bytes from its 16 hex digits, nil for
// anything else.
func traceSpanBytes(span string) []byte {
	b, err := hex.DecodeString(span)
	if err != nil || len(b) != 8 {
		return nil
	}
	return b
}

func putTraceSpan(item map[string]types.AttributeValue, span string) {
	if b := traceSpanBytes(span); b != nil {
		item[aTrace] = &types.AttributeValueMemberB{Value: b}
	}
}

func getTraceSpan(item map[string]types.AttributeValue) string {
	if b, ok := item[aTrace].(*types.AttributeValueMemberB); ok && len(b.Value) == 8 {
		return hex.EncodeToString(b.Value)
	}
	return ""
}

// claimTrace adds to a claim's update the task span id its message
// carried, kept if the record has one: the claim that creates an
// unwritten task's record thereby writes its trace with it.
func claimTrace(c *cond, span, upd string) string {
	b := traceSpanBytes(span)
	if b == nil {
		return upd
	}
	c.values[":tr"] = &types.AttributeValueMemberB{Value: b}
	return "SET " + aTrace + " = if_not_exists(" + aTrace + ", :tr), " + upd[len("SET "):]
}
