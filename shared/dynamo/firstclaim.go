package dynamo

// First claims, batched.
//
// The first claim of an unwritten task (sm.TaskUnwritten) writes its
// record. Written as a PartiQL INSERT, it is conditional on the record's
// absence by itself, and it needs no answer but success: the record is
// the one it wrote, attribute for attribute what TaskClaim's UpdateItem
// makes of a missing item (TestFirstClaimInsertEqualsUpdate). So the
// first claims a process makes at once go together, up to 25 statements
// in one BatchExecuteStatement: one request where there were as many
// UpdateItems, the same write units (an item of up to 1 KB each).
//
// The batching is group commit, with no timer (stmtbatch.go): a claim
// that finds fewer than batchSenders batches in flight sends at once
// (alone when nothing else waits, so a lone claim waits for nothing); the
// claims that arrive while they are all in flight go together in the next
// one, sent by the first of them as soon as one is answered. A batch holds
// one job's claims (stmtGroups), so that its request is that job's cost.
//
// A statement that does not succeed (the record exists: claimed before,
// or written at materialization; throttled; the request failed) is not an
// outcome: the claim goes on to its UpdateItem, with the same token, as
// if the batch had not been tried. That write's condition decides, as it
// always did; and an INSERT that applied but whose answer was lost leaves
// a record claimed with this very token, which TaskClaim recognises as
// its own. A claim of a record that exists (a retry's, a duplicate
// message's) thus costs one request more than its UpdateItem alone. An
// endpoint that cannot run PartiQL fails the whole request: a store on
// which no statement has run then claims with UpdateItem only, as its
// materialization then writes transactions (partiQLFailed, puttasks.go).

import (
	"maps"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	sm "github.com/batchwork/batchwork/statemachine"
)

// firstClaimItem is the record the first claim p writes: what TaskClaim's
// UpdateItem (claimUpdate, claimTrace, and the mx of an unwritten task)
// makes of a missing item.
func firstClaimItem(p ClaimParams) map[string]types.AttributeValue {
	lease := p.Now.Add(p.Lease)
	it := key(taskPK(p.Ref), taskSK(p.Ref.Partition))
	maps.Copy(it, map[string]types.AttributeValue{
		aState:   sv(string(sm.Tasks.Transition(sm.TaskClaim).To)),
		aToken:   sv(p.Token),
		aLease:   ms(lease),
		aUpdated: ms(p.Now),
		aClaimed: ms(p.Now),
		attrDue:  ms(lease.Add(p.Grace)),
		aAttempt: nv(1),
		aMax:     nv(int64(p.MaxAttempts)),
	})
	if !p.SlotAt.IsZero() {
		it[aSlotAt] = ms(p.SlotAt)
	}
	if p.Executor != "" {
		it[aExecutor] = sv(p.Executor)
	}
	if b := traceSpanBytes(p.TraceSpan); b != nil {
		it[aTrace] = &types.AttributeValueMemberB{Value: b}
	}
	return it
}

func itemKey(it map[string]types.AttributeValue) string {
	return getS(it, attrPK) + "\x00" + getS(it, attrSK)
}
