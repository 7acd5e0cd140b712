package dynamo

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// ErrContention means a transaction was cancelled by contention
// (TransactionConflict, TransactionInProgress, throttling) on every one of
// its tries. Nothing of it was applied.
var ErrContention = errors.New("transaction contention")

// Cancellation reason codes of a TransactWriteItems, one per item.
const (
	reasonNone       = "None"
	reasonCondFailed = "ConditionalCheckFailed"
)

// transientReasons are the cancellation reasons that say nothing about the
// items themselves: another transaction held one of them, or the table was
// throttled. AWS cancels overlapping transactions on one item, and the Go
// SDK does not retry TransactionCanceledException, so the store does.
var transientReasons = map[string]bool{
	"TransactionConflict":                    true,
	"ThrottlingError":                        true,
	"ProvisionedThroughputExceeded":          true,
	"TransactionInProgress":                  true,
	"ProvisionedThroughputExceededException": true,
}

// transientTx reports whether a TransactWriteItems error left nothing
// applied and may be answered differently if sent again: a cancellation
// with a transient reason on any item, or a top-level
// TransactionInProgress. A cancellation that also failed a condition is
// sent again too: contention on one item may have hidden what the others'
// conditions would say (the commit's last committer sees its counter's
// guard fail and its task item conflict at once), and a resend's
// conditions decide afresh.
func transientTx(err error) bool {
	if err == nil {
		return false
	}
	if reasons := cancelReasons(err); reasons != nil {
		for _, r := range reasons {
			if transientReasons[r] {
				return true
			}
		}
		return false
	}
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "TransactionInProgressException"
}

// Transaction retry schedule: full jitter over a doubling window, so the
// committers that collided spread out instead of colliding again.
const (
	txTries    = 8
	txBaseWait = 10 * time.Millisecond
	txMaxWait  = 500 * time.Millisecond
)

// transact sends a TransactWriteItems, and sends it again, after a jittered
// backoff, while it is cancelled by contention alone. That is safe for any
// transaction: a cancelled one applied nothing. No ClientRequestToken is
// set: the SDK fills in one that is stable across its own retries (a lost
// response is answered from the first try), and each of these retries is a
// new request whose conditions decide again. A fixed token reused with
// other parameters (a timestamp, a fresh id) would be refused by AWS with
// IdempotentParameterMismatch.
func (s *Store) transact(ctx context.Context, in *dynamodb.TransactWriteItemsInput) error {
	return retryWhile(ctx, transientTx, func() error {
		// A fresh token for each try: the SDK fills one into in on the
		// first, and AWS does not promise what a token whose request was
		// cancelled does when it comes back.
		in.ClientRequestToken = nil
		_, err := s.db.TransactWriteItems(ctx, in)
		return err
	})
}

// retryWhile calls try until it fails with an error that transient does
// not accept, with backoff between calls, txTries times at most.
func retryWhile(ctx context.Context, transient func(error) bool, try func() error) error {
	var err error
	for n := 0; n < txTries; n++ {
		if n > 0 {
			if werr := backoff(ctx, n); werr != nil {
				return errors.Join(err, werr)
			}
		}
		if err = try(); !transient(err) {
			return err
		}
	}
	return errors.Join(ErrContention, err)
}

// backoff waits before try (1-based after the first) of a request that
// contention or throttling refused: a random time up to a window that
// doubles per try from txBaseWait to txMaxWait (full jitter), or until ctx
// ends.
func backoff(ctx context.Context, try int) error {
	window := min(txBaseWait<<(try-1), txMaxWait)
	t := time.NewTimer(time.Duration(rand.Int64N(int64(window)) + 1))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// updateItem is UpdateItem retried while a transaction on the same item
// refuses it (TransactionConflictException): the SDK does not retry that
// error, and a single-item write that shares an item with transactions
// (a counter shard with failures, splits and watched commits; a task with
// a copy's claim) meets it under contention as a transaction would.
func (s *Store) updateItem(ctx context.Context, in *dynamodb.UpdateItemInput) (out *dynamodb.UpdateItemOutput, err error) {
	err = retryWhile(ctx, isTxConflict, func() error {
		out, err = s.db.UpdateItem(ctx, in)
		return err
	})
	return out, err
}

func isTxConflict(err error) bool {
	var tc *types.TransactionConflictException
	return errors.As(err, &tc)
}
