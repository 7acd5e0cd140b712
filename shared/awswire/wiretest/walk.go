// Package wiretest walks the members of the AWS SDK's input types, for
// the lean clients' tests that every member is written as the SDK's
// serializer writes it (or refused), never dropped.
package wiretest

import (
	"reflect"
	"slices"
)

// Walker walks inputs: it descends into the struct types in Walked
// (through pointers, slices and maps) and gives an interface-typed member
// the value Interface returns (zero where Interface is nil).
type Walker struct {
	Walked    map[reflect.Type]bool
	Interface func(reflect.Type) reflect.Value
}

// Leaf is one member: its field indexes from the input, and its name
// (the operation's, then each field's, dot-separated).
type Leaf struct {
	Path []int
	Name string
}

// Leaves lists every member under t, named from name.
func (w Walker) Leaves(t reflect.Type, name string) []Leaf {
	var out []Leaf
	w.leaves(t, nil, name, &out)
	return out
}

func (w Walker) leaves(t reflect.Type, prefix []int, name string, out *[]Leaf) {
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
		if w.Walked[elem] {
			w.leaves(elem, p, name+"."+f.Name, out)
			continue
		}
		*out = append(*out, Leaf{Path: p, Name: name + "." + f.Name})
	}
}

// Set gives the member at path a non-zero value, creating the pointers,
// first slice elements and map entries on the way.
func (w Walker) Set(v reflect.Value, path []int) {
	f := v.Field(path[0])
	if len(path) == 1 {
		f.Set(w.Sample(f.Type()))
		return
	}
	switch f.Kind() {
	case reflect.Pointer:
		if f.IsNil() {
			f.Set(reflect.New(f.Type().Elem()))
		}
		w.Set(f.Elem(), path[1:])
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
		w.Set(f.Index(at), path[1:])
	case reflect.Map:
		if f.Len() == 0 {
			f.Set(reflect.MakeMap(f.Type()))
			f.SetMapIndex(reflect.ValueOf("t"), reflect.New(f.Type().Elem()).Elem())
		}
		for _, k := range f.MapKeys() {
			e := reflect.New(f.Type().Elem()).Elem()
			e.Set(f.MapIndex(k))
			w.Set(e, path[1:])
			f.SetMapIndex(k, e)
		}
	default:
		w.Set(f, path[1:])
	}
}

// Sample is a non-zero value of t.
func (w Walker) Sample(t reflect.Type) reflect.Value {
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
		v.Elem().Set(w.Sample(t.Elem()))
	case reflect.Slice:
		v.Set(reflect.Append(v, w.Sample(t.Elem())))
	case reflect.Map:
		v.Set(reflect.MakeMap(t))
		v.SetMapIndex(reflect.ValueOf(":k").Convert(t.Key()), w.Sample(t.Elem()))
	case reflect.Uint8:
		v.SetUint(0xfe)
	case reflect.Interface:
		if w.Interface != nil {
			v.Set(w.Interface(t))
		}
	case reflect.Struct:
		for i := range t.NumField() {
			if t.Field(i).IsExported() {
				v.Field(i).Set(w.Sample(t.Field(i).Type))
			}
		}
	}
	return v
}
