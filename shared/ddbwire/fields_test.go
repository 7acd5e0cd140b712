package ddbwire_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
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
	"UpdateItem.AttributeUpdates", "UpdateItem.ConditionalOperator", "UpdateItem.Expected",
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
	case reflect.Interface:
		if t == reflect.TypeFor[types.AttributeValue]() {
			v.Set(reflect.ValueOf(&types.AttributeValueMemberS{Value: "SAMPLE"}))
		}
	case reflect.Struct:
		for i := range t.NumField() {
			if t.Field(i).IsExported() {
				v.Field(i).Set(sample(t.Field(i).Type))
			}
		}
	}
	return v
}

// TestEveryInputMember walks every member of the seven operations'
// inputs: each, set on a valid input, is either written as the SDK's
// serializer writes it or refused with an error naming it, never dropped;
// and the refused ones are exactly the legacy members listed.
func TestEveryInputMember(t *testing.T) {
	rec, sdk, lean := pair(t)
	var gotRefused []string
	for _, op := range []string{"GetItem", "PutItem", "UpdateItem", "Query", "BatchGetItem", "TransactWriteItems", "BatchExecuteStatement"} {
		base := reflect.ValueOf(minimalInput(op)).Elem()
		var ls []leaf
		leaves(base.Type(), nil, op, &ls)
		for _, l := range ls {
			in := reflect.New(base.Type())
			in.Elem().Set(deepCopy(base))
			set(in.Elem(), l.path)
			_, lerr := call(lean, op, in.Interface())
			if lerr != nil {
				field := l.name[strings.LastIndexByte(l.name, '.')+1:]
				if !strings.Contains(lerr.Error(), field+" is not supported") {
					t.Errorf("%s: lean: %v", l.name, lerr)
				}
				gotRefused = append(gotRefused, l.name)
				continue
			}
			got := rec.last()
			if _, err := call(sdk, op, in.Interface()); err != nil {
				t.Errorf("%s: SDK: %v", l.name, err)
				continue
			}
			sameJSON(t, l.name, rec.last(), got)
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
