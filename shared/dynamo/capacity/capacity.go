// Package capacity asks DynamoDB requests for the capacity they consume
// and reads it from their answers: the accounting that the per-job cost
// meter (shared/cost/meter) and the bench's load model
// (internal/loadmodel) both do as middleware on the SDK's clients.
package capacity

import (
	"errors"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Want is what Ask asks for: the units by table and by index, which
// carry the request's total (TOTAL's answer) too. Asking costs nothing.
const Want = types.ReturnConsumedCapacityIndexes

type field = types.ReturnConsumedCapacity

// Ask returns a DynamoDB input that asks for the capacity it consumes
// (Want): a copy with ReturnConsumedCapacity set, or the input itself when
// it asks for Want already. A caller's TOTAL is raised to INDEXES, whose
// answer holds the same total. The caller's input is never changed;
// anything that is not a data operation's input is returned as it is.
func Ask(in any) any {
	switch v := in.(type) {
	case *dynamodb.GetItemInput:
		return ask(v, func(c *dynamodb.GetItemInput) *field { return &c.ReturnConsumedCapacity })
	case *dynamodb.PutItemInput:
		return ask(v, func(c *dynamodb.PutItemInput) *field { return &c.ReturnConsumedCapacity })
	case *dynamodb.UpdateItemInput:
		return ask(v, func(c *dynamodb.UpdateItemInput) *field { return &c.ReturnConsumedCapacity })
	case *dynamodb.DeleteItemInput:
		return ask(v, func(c *dynamodb.DeleteItemInput) *field { return &c.ReturnConsumedCapacity })
	case *dynamodb.QueryInput:
		return ask(v, func(c *dynamodb.QueryInput) *field { return &c.ReturnConsumedCapacity })
	case *dynamodb.ScanInput:
		return ask(v, func(c *dynamodb.ScanInput) *field { return &c.ReturnConsumedCapacity })
	case *dynamodb.BatchGetItemInput:
		return ask(v, func(c *dynamodb.BatchGetItemInput) *field { return &c.ReturnConsumedCapacity })
	case *dynamodb.BatchWriteItemInput:
		return ask(v, func(c *dynamodb.BatchWriteItemInput) *field { return &c.ReturnConsumedCapacity })
	case *dynamodb.TransactWriteItemsInput:
		return ask(v, func(c *dynamodb.TransactWriteItemsInput) *field { return &c.ReturnConsumedCapacity })
	case *dynamodb.TransactGetItemsInput:
		return ask(v, func(c *dynamodb.TransactGetItemsInput) *field { return &c.ReturnConsumedCapacity })
	case *dynamodb.ExecuteStatementInput:
		return ask(v, func(c *dynamodb.ExecuteStatementInput) *field { return &c.ReturnConsumedCapacity })
	case *dynamodb.BatchExecuteStatementInput:
		return ask(v, func(c *dynamodb.BatchExecuteStatementInput) *field { return &c.ReturnConsumedCapacity })
	case *dynamodb.ExecuteTransactionInput:
		return ask(v, func(c *dynamodb.ExecuteTransactionInput) *field { return &c.ReturnConsumedCapacity })
	}
	return in
}

// ask sets Want in a copy of v, in the field of that copy that of points to.
func ask[T any](v *T, of func(*T) *field) any {
	if v == nil || *of(v) == Want {
		return v
	}
	c := *v
	*of(&c) = Want
	return &c
}

// Consumed is the capacity a DynamoDB output reports, one entry per table
// (nil for a nil output, or one that reports none).
func Consumed(out any) []types.ConsumedCapacity {
	switch o := out.(type) {
	case *dynamodb.GetItemOutput:
		if o != nil {
			return one(o.ConsumedCapacity)
		}
	case *dynamodb.PutItemOutput:
		if o != nil {
			return one(o.ConsumedCapacity)
		}
	case *dynamodb.UpdateItemOutput:
		if o != nil {
			return one(o.ConsumedCapacity)
		}
	case *dynamodb.DeleteItemOutput:
		if o != nil {
			return one(o.ConsumedCapacity)
		}
	case *dynamodb.QueryOutput:
		if o != nil {
			return one(o.ConsumedCapacity)
		}
	case *dynamodb.ScanOutput:
		if o != nil {
			return one(o.ConsumedCapacity)
		}
	case *dynamodb.ExecuteStatementOutput:
		if o != nil {
			return one(o.ConsumedCapacity)
		}
	case *dynamodb.BatchGetItemOutput:
		if o != nil {
			return o.ConsumedCapacity
		}
	case *dynamodb.BatchWriteItemOutput:
		if o != nil {
			return o.ConsumedCapacity
		}
	case *dynamodb.TransactWriteItemsOutput:
		if o != nil {
			return o.ConsumedCapacity
		}
	case *dynamodb.TransactGetItemsOutput:
		if o != nil {
			return o.ConsumedCapacity
		}
	case *dynamodb.BatchExecuteStatementOutput:
		if o != nil {
			return o.ConsumedCapacity
		}
	case *dynamodb.ExecuteTransactionOutput:
		if o != nil {
			return o.ConsumedCapacity
		}
	}
	return nil
}

func one(c *types.ConsumedCapacity) []types.ConsumedCapacity {
	if c == nil {
		return nil
	}
	return []types.ConsumedCapacity{*c}
}

// Billed says whether DynamoDB bills a request that failed: a write whose
// condition failed consumes the units of the item it read to decide, as
// does a cancelled transaction; a throttled or invalid request is not
// billed.
func Billed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	var tc *types.TransactionCanceledException
	return errors.As(err, &ccf) || errors.As(err, &tc)
}
