package sqswire_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
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

// leaves lists the paths (field indexes) of every member under t,
// descending through pointers, slices and maps into the walked structs.
func leaves(t reflect.Type, prefix []int, name string, out *[]leaf) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Name == "ResultMetadata" {
			continue
		}
		p := append(slices.Clone(prefix), i)
		elem := f.Type
		for elem.Kind() == reflect.Pointer || elem.Kind() == reflect.Slice || elem.Kind() == reflect.Map {
			elem = elem.Elem()
		}
		if walked[elem] {
			leaves(elem, p, name+"."+f.Name, out)
			continue
		}
		*out = append(*out, leaf{path: p, name: name + "." + f.Name})
	}
}

type leaf struct {
	path []int
	name string
}

// set gives the member at path a non-zero value, creating the pointers,
// first slice elements and map entries on the way.
func set(v reflect.Value, path []int) {
	f := v.Field(path[0])
	if len(path) == 1 {
		f.Set(sample(f.Type()))
		return
	}
	switch f.Kind() {
	case reflect.Pointer:
		if f.IsNil() {
			f.Set(reflect.New(f.Type().Elem()))
		}
		set(f.Elem(), path[1:])
	case reflect.Slice:
		if f.Len() == 0 {
			f.Set(reflect.Append(f, reflect.New(f.Type().Elem()).Elem()))
		}
		// The element that already has the member's parent (a
		// transaction's Put among its items), else the first.
		at := 0
		for i := range f.Len() {
			if len(path) > 2 && f.Index(i).Kind() == reflect.Struct {
				if g := f.Index(i).Field(path[1]); g.Kind() == reflect.Pointer && !g.IsNil() {
					at = i
					break
				}
			}
		}
		set(f.Index(at), path[1:])
	case reflect.Map:
		if f.Len() == 0 {
			f.Set(reflect.MakeMap(f.Type()))
			f.SetMapIndex(reflect.ValueOf("t"), reflect.New(f.Type().Elem()).Elem())
		}
		for _, k := range f.MapKeys() {
			e := reflect.New(f.Type().Elem()).Elem()
			e.Set(f.MapIndex(k))
			set(e, path[1:])
			f.SetMapIndex(k, e)
		}
	default:
		set(f, path[1:])
	}
}

// sample is a non-zero value of t.
func sample(t reflect.Type) reflect.Value {
	v := reflect.New(t).Elem()
	switch t.Kind() {
	case reflect.String:
		v.SetString("SAMPLE")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int32, reflect.Int64, reflect.Int:
		v.SetInt(7)
	case reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Pointer:
		v.Set(reflect.New(t.Elem()))
		v.Elem().Set(sample(t.Elem()))
	case reflect.Slice:
		v.Set(reflect.Append(v, sample(t.Elem())))
	case reflect.Map:
		v.Set(reflect.MakeMap(t))
		v.SetMapIndex(reflect.ValueOf(":k").Convert(t.Key()), sample(t.Elem()))
	case reflect.Uint8:
		v.SetUint(0xfe)
	case reflect.Struct:
		for i := range t.NumField() {
			if t.Field(i).IsExported() {
				v.Field(i).Set(sample(t.Field(i).Type))
			}
		}
	}
	return v
}

// TestEveryInputMember walks every member of the five operations'
// inputs: each, set on a valid input, is written as the SDK's serializer
// writes it, never dropped. The lean client writes them all, so it
// refuses none.
func TestEveryInputMember(t *testing.T) {
	rec, sdk, lean := pair(t)
	n := 0
	for op, b := range bases() {
		base := reflect.ValueOf(b).Elem()
		var ls []leaf
		leaves(base.Type(), nil, op, &ls)
		for _, l := range ls {
			in := reflect.New(base.Type())
			in.Elem().Set(deepCopy(base))
			set(in.Elem(), l.path)
			if _, err := call(lean, op, in.Interface()); err != nil {
				t.Errorf("%s: lean: %v", l.name, err)
				continue
			}
			got, _ := rec.last()
			if _, err := call(sdk, op, in.Interface()); err != nil {
				t.Errorf("%s: SDK: %v", l.name, err)
				continue
			}
			want, _ := rec.last()
			if strings.Count(string(want), "SAMPLE")+strings.Count(string(want), ":7")+strings.Count(string(want), "/g==") == 0 && !strings.Contains(string(want), "VisibilityTimeout") {
				t.Errorf("%s: the sample value is not in the SDK's request %s", l.name, want)
			}
			sameJSON(t, l.name, want, got)
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
