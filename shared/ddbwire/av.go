package ddbwire

import (
	"encoding/base64"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// av writes one attribute value. A value of no known kind (nil, or a
// union member newer than this code) is an error: dropping it would write
// an item other than the caller's.
func (e *enc) av(v types.AttributeValue) error {
	e.Open('{')
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		e.Key("S")
		e.Str(v.Value)
	case *types.AttributeValueMemberN:
		e.Key("N")
		e.Str(v.Value)
	case *types.AttributeValueMemberB:
		e.Key("B")
		e.bytes(v.Value)
	case *types.AttributeValueMemberBOOL:
		e.Key("BOOL")
		e.Bool(v.Value)
	case *types.AttributeValueMemberNULL:
		e.Key("NULL")
		e.Bool(v.Value)
	case *types.AttributeValueMemberM:
		e.Key("M")
		if err := e.avMap(v.Value); err != nil {
			return err
		}
	case *types.AttributeValueMemberL:
		e.Key("L")
		if err := e.avList(v.Value); err != nil {
			return err
		}
	case *types.AttributeValueMemberSS:
		e.Key("SS")
		e.strings(v.Value)
	case *types.AttributeValueMemberNS:
		e.Key("NS")
		e.strings(v.Value)
	case *types.AttributeValueMemberBS:
		e.Key("BS")
		e.Open('[')
		for _, b := range v.Value {
			e.bytes(b)
		}
		e.Close(']')
	default:
		return fmt.Errorf("ddbwire: attribute value of type %T is not supported", v)
	}
	e.Close('}')
	return nil
}

func (e *enc) bytes(b []byte) {
	e.Sep()
	e.B = append(e.B, '"')
	e.B = base64.StdEncoding.AppendEncode(e.B, b)
	e.B = append(e.B, '"')
}

func (e *enc) strings(ss []string) {
	e.Open('[')
	for _, s := range ss {
		e.Str(s)
	}
	e.Close(']')
}

func (e *enc) avMap(m map[string]types.AttributeValue) error {
	e.Open('{')
	for k, v := range m {
		e.AnyKey(k)
		if err := e.av(v); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	e.Close('}')
	return nil
}

func (e *enc) avList(l []types.AttributeValue) error {
	e.Open('[')
	for i, v := range l {
		if err := e.av(v); err != nil {
			return fmt.Errorf("[%d]: %w", i, err)
		}
	}
	e.Close(']')
	return nil
}

func (e *enc) strMap(m map[string]string) {
	e.Open('{')
	for k, v := range m {
		e.AnyKey(k)
		e.Str(v)
	}
	e.Close('}')
}

// av reads one attribute value, as the SDK's deserializer does: an object
// with one member naming the kind.
func (d *dec) av() types.AttributeValue {
	var v types.AttributeValue
	d.Object(func(k []byte) {
		if v != nil {
			d.Fail("attribute value with more than one kind")
			return
		}
		switch string(k) {
		case "S":
			v = &types.AttributeValueMemberS{Value: d.Str()}
		case "N":
			v = &types.AttributeValueMemberN{Value: d.Str()}
		case "B":
			v = &types.AttributeValueMemberB{Value: d.bin()}
		case "BOOL":
			v = &types.AttributeValueMemberBOOL{Value: d.Bool()}
		case "NULL":
			v = &types.AttributeValueMemberNULL{Value: d.Bool()}
		case "M":
			v = &types.AttributeValueMemberM{Value: d.avMap()}
		case "L":
			v = &types.AttributeValueMemberL{Value: d.avList()}
		case "SS":
			v = &types.AttributeValueMemberSS{Value: d.strList()}
		case "NS":
			v = &types.AttributeValueMemberNS{Value: d.strList()}
		case "BS":
			var bs [][]byte
			d.Array(func() { bs = append(bs, d.bin()) })
			v = &types.AttributeValueMemberBS{Value: bs}
		default:
			// The SDK keeps a kind it does not know as UnknownUnionMember;
			// the store reads none.
			v = &types.UnknownUnionMember{Tag: string(k), Value: d.raw()}
		}
	})
	if v == nil && d.Err == nil {
		d.Fail("attribute value of no kind")
	}
	return v
}

// raw returns the next value's bytes.
func (d *dec) raw() []byte {
	d.Peek()
	start := d.I
	d.Skip()
	return append([]byte(nil), d.B[start:d.I]...)
}

func (d *dec) bin() []byte {
	s := d.StrBytes()
	if s == nil {
		return nil
	}
	b, err := base64.StdEncoding.AppendDecode(make([]byte, 0, base64.StdEncoding.DecodedLen(len(s))), s)
	if err != nil {
		d.Fail("bad base64")
	}
	return b
}

func (d *dec) avMap() map[string]types.AttributeValue {
	if d.Null() {
		return nil
	}
	m := map[string]types.AttributeValue{}
	d.Object(func(k []byte) { m[string(k)] = d.av() })
	return m
}

func (d *dec) avList() []types.AttributeValue {
	if d.Null() {
		return nil
	}
	l := []types.AttributeValue{}
	d.Array(func() { l = append(l, d.av()) })
	return l
}

func (d *dec) avMaps() []map[string]types.AttributeValue {
	if d.Null() {
		return nil
	}
	l := []map[string]types.AttributeValue{}
	d.Array(func() { l = append(l, d.avMap()) })
	return l
}

func (d *dec) strList() []string {
	if d.Null() {
		return nil
	}
	l := []string{}
	d.Array(func() { l = append(l, d.Str()) })
	return l
}
