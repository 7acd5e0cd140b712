package queue

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// visAPI answers ChangeMessageVisibilityBatch: entries whose receipt is in
// stale fail with ReceiptHandleIsInvalid; it records what was renewed.
type visAPI struct {
	API
	stale   map[string]bool
	renewed []string
}

func (v *visAPI) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		r := aws.ToString(e.ReceiptHandle)
		if v.stale[r] {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), SenderFault: true})
			continue
		}
		v.renewed = append(v.renewed, r)
	}
	return out, nil
}

// One stale receipt must not stop the renewal of the others (in its own
// chunk or later ones), and is reported so the caller stops renewing it.
func TestChangeVisibilityBatchRenewsEveryChunk(t *testing.T) {
	t.Parallel()
	var receipts []string
	for i := range 25 {
		receipts = append(receipts, "r"+strconv.Itoa(i))
	}
	api := &visAPI{stale: map[string]bool{"r3": true, "r12": true}}
	gone, err := New(api).ChangeVisibilityBatch(context.Background(), "q", receipts, 3*time.Second)
	if err != nil {
		t.Fatalf("err %v, want nil (stale receipts are reported, not errors)", err)
	}
	if len(api.renewed) != 23 || len(gone) != 2 || gone[0] != "r3" || gone[1] != "r12" {
		t.Fatalf("renewed %d, gone %v; want 23 renewed and [r3 r12] gone", len(api.renewed), gone)
	}
}
