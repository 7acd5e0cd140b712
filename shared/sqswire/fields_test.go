package sqswire_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/batchwork/batchwork/shared/awswire/wiretest"
)

// walked are the structs whose members the field walk descends into: the
// parts of a request the lean client writes member by member.
var walked = map[reflect.Type]bool{
	reflect.TypeFor[types.SendMessageBatchRequestEntry]():             true,
	reflect.TypeFor[types.MessageAttributeValue]():                    true,
	reflect.TypeFor[types.MessageSystemAttributeValue]():              true,
	reflect.TypeFor[types.DeleteMessageBatchRequestEntry]():           true,
	reflect.TypeFor[types.ChangeMessageVisibilityBatchRequestEntry](): true,
}

// bases are the inputs each member is set on in turn: valid ones, with
// the members the SDK requires (it refuses a call without them).
func bases() map[string]any {
	q, id, h := aws.String(queueURL), aws.String("0"), aws.String("h")
	str := aws.String("String")
	return map[string]any{
		"SendMessageBatch": &sqs.SendMessageBatchInput{QueueUrl: q, Entries: []types.SendMessageBatchRequestEntry{{Id: id, MessageBody: aws.String("b"),
			MessageAttributes:       map[string]types.MessageAttributeValue{"t": {DataType: str}},
			MessageSystemAttributes: map[string]types.MessageSystemAttributeValue{"AWSTraceHeader": {DataType: str}}}}},
		"ReceiveMessage":               &sqs.ReceiveMessageInput{QueueUrl: q},
		"DeleteMessageBatch":           &sqs.DeleteMessageBatchInput{QueueUrl: q, Entries: []types.DeleteMessageBatchRequestEntry{{Id: id, ReceiptHandle: h}}},
		"ChangeMessageVisibility":      &sqs.ChangeMessageVisibilityInput{QueueUrl: q, ReceiptHandle: h},
		"ChangeMessageVisibilityBatch": &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: q, Entries: []types.ChangeMessageVisibilityBatchRequestEntry{{Id: id, ReceiptHandle: h}}},
	}
}

var walk = wiretest.Walker{Walked: walked}

// TestEveryInputMember walks every member of the five operations'
// inputs: each, set on a valid input, is written as the SDK's serializer
// writes it, never dropped. The lean client writes them all, so it
// refuses none.
func TestEveryInputMember(t *testing.T) {
	rec, sdk, lean := pair(t)
	n := 0
	for op, b := range bases() {
		base := reflect.ValueOf(b).Elem()
		ls := walk.Leaves(base.Type(), op)
		for _, l := range ls {
			in := reflect.New(base.Type())
			in.Elem().Set(deepCopy(base))
			walk.Set(in.Elem(), l.Path)
			if _, err := call(lean, op, in.Interface()); err != nil {
				t.Errorf("%s: lean: %v", l.Name, err)
				continue
			}
			got, _ := rec.last()
			if _, err := call(sdk, op, in.Interface()); err != nil {
				t.Errorf("%s: SDK: %v", l.Name, err)
				continue
			}
			want, _ := rec.last()
			if strings.Count(string(want), "SAMPLE")+strings.Count(string(want), ":7")+strings.Count(string(want), "/g==") == 0 && !strings.Contains(string(want), "VisibilityTimeout") {
				t.Errorf("%s: the sample value is not in the SDK's request %s", l.Name, want)
			}
			sameJSON(t, l.Name, want, got)
			n++
		}
	}
	if n < 30 {
		t.Errorf("walked %d members", n)
	}
}

// deepCopy copies v so that set does not write into the shared inputs.
func deepCopy(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		c := reflect.New(v.Type().Elem())
		c.Elem().Set(deepCopy(v.Elem()))
		return c
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			c.Index(i).Set(deepCopy(v.Index(i)))
		}
		return c
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		c := reflect.MakeMap(v.Type())
		for _, k := range v.MapKeys() {
			c.SetMapIndex(k, deepCopy(v.MapIndex(k)))
		}
		return c
	case reflect.Struct:
		c := reflect.New(v.Type()).Elem()
		c.Set(v)
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				c.Field(i).Set(deepCopy(v.Field(i)))
			}
		}
		return c
	}
	return v
}
