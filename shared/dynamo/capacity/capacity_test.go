package capacity

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// inputs are a fresh input of every data operation.
func inputs() []any {
	return []any{
		&dynamodb.GetItemInput{}, &dynamodb.PutItemInput{}, &dynamodb.UpdateItemInput{}, &dynamodb.DeleteItemInput{},
		&dynamodb.QueryInput{}, &dynamodb.ScanInput{}, &dynamodb.BatchGetItemInput{}, &dynamodb.BatchWriteItemInput{},
		&dynamodb.TransactWriteItemsInput{}, &dynamodb.TransactGetItemsInput{},
		&dynamodb.ExecuteStatementInput{}, &dynamodb.BatchExecuteStatementInput{}, &dynamodb.ExecuteTransactionInput{},
	}
}

// rcc is the ReturnConsumedCapacity field of the input in points to.
func rcc(in any) reflect.Value {
	return reflect.ValueOf(in).Elem().FieldByName("ReturnConsumedCapacity")
}

func TestAsk(t *testing.T) {
	t.Parallel()
	for _, in := range inputs() {
		for _, tc := range []struct {
			set  types.ReturnConsumedCapacity
			same bool // the input itself comes back
		}{
			{"", false},
			{types.ReturnConsumedCapacityNone, false},
			{types.ReturnConsumedCapacityTotal, false}, // raised: INDEXES' answer holds the total
			{types.ReturnConsumedCapacityIndexes, true},
		} {
			t.Run(fmt.Sprintf("%T/%q", in, tc.set), func(t *testing.T) {
				t.Parallel()
				in := reflect.New(reflect.TypeOf(in).Elem()).Interface()
				rcc(in).Set(reflect.ValueOf(tc.set))
				got := Ask(in)
				if reflect.TypeOf(got) != reflect.TypeOf(in) {
					t.Fatalf("Ask returned a %T", got)
				}
				if asked := rcc(got).Interface(); asked != Want {
					t.Errorf("asks for %q, want %q", asked, Want)
				}
				if (got == in) != tc.same {
					t.Errorf("the input itself returned: %v, want %v", got == in, tc.same)
				}
				if kept := rcc(in).Interface(); kept != tc.set {
					t.Errorf("the caller's input changed to %q", kept)
				}
			})
		}
	}
}

func TestAskLeavesOthersAlone(t *testing.T) {
	t.Parallel()
	for _, in := range []any{nil, &s3.GetObjectInput{}, &dynamodb.DescribeTableInput{}, (*dynamodb.GetItemInput)(nil)} {
		if got := Ask(in); got != in {
			t.Errorf("Ask(%T) = %v, want the input", in, got)
		}
	}
}

func TestConsumed(t *testing.T) {
	t.Parallel()
	a := types.ConsumedCapacity{TableName: aws.String("a"), CapacityUnits: aws.Float64(1)}
	b := types.ConsumedCapacity{TableName: aws.String("b"), CapacityUnits: aws.Float64(2)}
	one, two := &a, []types.ConsumedCapacity{a, b}
	for _, tc := range []struct {
		out, none any // reporting, and not
		want      []types.ConsumedCapacity
	}{
		{&dynamodb.GetItemOutput{ConsumedCapacity: one}, &dynamodb.GetItemOutput{}, two[:1]},
		{&dynamodb.PutItemOutput{ConsumedCapacity: one}, &dynamodb.PutItemOutput{}, two[:1]},
		{&dynamodb.UpdateItemOutput{ConsumedCapacity: one}, &dynamodb.UpdateItemOutput{}, two[:1]},
		{&dynamodb.DeleteItemOutput{ConsumedCapacity: one}, &dynamodb.DeleteItemOutput{}, two[:1]},
		{&dynamodb.QueryOutput{ConsumedCapacity: one}, &dynamodb.QueryOutput{}, two[:1]},
		{&dynamodb.ScanOutput{ConsumedCapacity: one}, &dynamodb.ScanOutput{}, two[:1]},
		{&dynamodb.ExecuteStatementOutput{ConsumedCapacity: one}, &dynamodb.ExecuteStatementOutput{}, two[:1]},
		{&dynamodb.BatchGetItemOutput{ConsumedCapacity: two}, &dynamodb.BatchGetItemOutput{}, two},
		{&dynamodb.BatchWriteItemOutput{ConsumedCapacity: two}, &dynamodb.BatchWriteItemOutput{}, two},
		{&dynamodb.TransactWriteItemsOutput{ConsumedCapacity: two}, &dynamodb.TransactWriteItemsOutput{}, two},
		{&dynamodb.TransactGetItemsOutput{ConsumedCapacity: two}, &dynamodb.TransactGetItemsOutput{}, two},
		{&dynamodb.BatchExecuteStatementOutput{ConsumedCapacity: two}, &dynamodb.BatchExecuteStatementOutput{}, two},
		{&dynamodb.ExecuteTransactionOutput{ConsumedCapacity: two}, &dynamodb.ExecuteTransactionOutput{}, two},
	} {
		t.Run(fmt.Sprintf("%T", tc.out), func(t *testing.T) {
			t.Parallel()
			if got := Consumed(tc.out); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("reported %+v, want %+v", got, tc.want)
			}
			if got := Consumed(tc.none); len(got) != 0 {
				t.Errorf("none reported: %+v", got)
			}
			nilOut := reflect.Zero(reflect.TypeOf(tc.out)).Interface() // a nil output of its type: an error's
			if got := Consumed(nilOut); got != nil {
				t.Errorf("nil output: %+v", got)
			}
		})
	}
	if got := Consumed(&s3.GetObjectOutput{}); got != nil {
		t.Errorf("an S3 output: %+v", got)
	}
}

func TestBilled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("put: %w", &types.ConditionalCheckFailedException{}), true},
		{&types.TransactionCanceledException{}, true},
		{&types.ProvisionedThroughputExceededException{}, false},
		{errors.New("invalid"), false},
	} {
		if got := Billed(tc.err); got != tc.want {
			t.Errorf("Billed(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
