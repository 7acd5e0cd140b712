package dynamo

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/domain"
)

// answering is a DynamoDB that grants every update, answering a claim's
// with the task's record: what is left is the store's own work per
// request (its expressions, values and the record's decoding).
type answering struct {
	API
	claimed map[string]types.AttributeValue
}

func (a answering) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if in.ReturnValues == types.ReturnValueAllNew {
		return &dynamodb.UpdateItemOutput{Attributes: a.claimed}, nil
	}
	return &dynamodb.UpdateItemOutput{}, nil
}

// BenchmarkClaimCommit is a no-op task's claim and commit (its count
// batched, as the runner's are) in the store, over a DynamoDB that does
// nothing.
func BenchmarkClaimCommit(b *testing.B) {
	ref := domain.TaskRef{Job: "j1a1fd8fa5144ffa078bd8", Stage: 0, Partition: 1234}
	now := time.UnixMilli(1767225600123)
	claimed := map[string]types.AttributeValue{
		attrPK: sv(taskPK(ref)), attrSK: sv(taskSK(ref.Partition)), aState: sv("CLAIMED"),
		"tok": sv("0123456789abcdef0123456789abcdef"), "lease": ms(now.Add(time.Minute)), "att": nv(1), "mx": nv(3),
		"upd": ms(now), "ex": sv("e-1a2b3c"), "due": ms(now.Add(2 * time.Minute)),
	}
	s := New(answering{claimed: claimed}, "batchwork")
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		t, err := s.TaskClaim(ctx, ClaimParams{Ref: ref, Token: "0123456789abcdef0123456789abcdef", Now: now,
			Lease: time.Minute, Grace: time.Minute, Executor: "e-1a2b3c", MaxAttempts: 3})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.TaskCommit(ctx, CommitParams{HolderParams: HolderParams{Ref: ref, Token: t.Token, Now: now},
			Attempt: t.Attempt, Shards: 4, DeferCount: true}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the process's user and system time so far: a shared
// machine's load moves it less than the wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
