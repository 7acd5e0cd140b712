package ddbwire_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/batchwork/batchwork/shared/awswire/wiretest"
)

// walked are the structs whose members the field walk descends into: the
// parts of a request the lean client writes member by member.
var walked = map[reflect.Type]bool{
	reflect.TypeFor[types.TransactWriteItem]():     true,
	reflect.TypeFor[types.ConditionCheck]():        true,
	reflect.TypeFor[types.Delete]():                true,
	reflect.TypeFor[types.Put]():                   true,
	reflect.TypeFor[types.Update]():                true,
	reflect.TypeFor[types.KeysAndAttributes]():     true,
	reflect.TypeFor[types.BatchStatementRequest](): true,
}

// refused are the members the lean client refuses; every other member of
// the inputs must be written as the SDK writes it.
var refused = []string{
	"BatchGetItem.RequestItems.AttributesToGet",
	"GetItem.AttributesToGet",
	"PutItem.ConditionalOperator", "PutItem.Expected",
	"Query.AttributesToGet", "Query.ConditionalOperator", "Query.KeyConditions", "Query.QueryFilter",
	"Scan.AttributesToGet", "Scan.ConditionalOperator", "Scan.ScanFilter",
	"UpdateItem.AttributeUpdates", "UpdateItem.ConditionalOperator", "UpdateItem.Expected",
}

var walk = wiretest.Walker{Walked: walked, Interface: func(t reflect.Type) reflect.Value {
	if t != reflect.TypeFor[types.AttributeValue]() {
		return reflect.Zero(t)
	}
	return reflect.ValueOf(&types.AttributeValueMemberS{Value: "SAMPLE"})
}}

// TestEveryInputMember walks every member of the seven operations'
// inputs: each, set on a valid input, is either written as the SDK's
// serializer writes it or refused with an error naming it, never dropped;
// and the refused ones are exactly the legacy members listed.
func TestEveryInputMember(t *testing.T) {
	rec, sdk, lean := pair(t)
	var gotRefused []string
	for _, op := range []string{"GetItem", "PutItem", "UpdateItem", "Query", "Scan", "BatchGetItem", "TransactWriteItems", "BatchExecuteStatement"} {
		base := reflect.ValueOf(minimalInput(op)).Elem()
		ls := walk.Leaves(base.Type(), op)
		for _, l := range ls {
			in := reflect.New(base.Type())
			in.Elem().Set(deepCopy(base))
			walk.Set(in.Elem(), l.Path)
			_, lerr := call(lean, op, in.Interface())
			if lerr != nil {
				field := l.Name[strings.LastIndexByte(l.Name, '.')+1:]
				if !strings.Contains(lerr.Error(), field+" is not supported") {
					t.Errorf("%s: lean: %v", l.Name, lerr)
				}
				gotRefused = append(gotRefused, l.Name)
				continue
			}
			got := rec.last()
			if _, err := call(sdk, op, in.Interface()); err != nil {
				t.Errorf("%s: SDK: %v", l.Name, err)
				continue
			}
			sameJSON(t, l.Name, rec.last(), got)
		}
	}
	slices.Sort(gotRefused)
	if !slices.Equal(gotRefused, refused) {
		t.Errorf("refused %q, want %q", gotRefused, refused)
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
