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
	e.open('{')
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		e.key("S")
		e.str(v.Value)
	case *types.AttributeValueMemberN:
		e.key("N")
		e.str(v.Value)
	case *types.AttributeValueMemberB:
		e.key("B")
		e.bytes(v.Value)
	case *types.AttributeValueMemberBOOL:
		e.key("BOOL")
		e.boolean(v.Value)
	case *types.AttributeValueMemberNULL:
		e.key("NULL")
		e.boolean(v.Value)
	case *types.AttributeValueMemberM:
		e.key("M")
		if err := e.avMap(v.Value); err != nil {
			return err
		}
	case *types.AttributeValueMemberL:
		e.key("L")
		if err := e.avList(v.Value); err != nil {
			return err
		}
	case *types.AttributeValueMemberSS:
		e.key("SS")
		e.strings(v.Value)
	case *types.AttributeValueMemberNS:
		e.key("NS")
		e.strings(v.Value)
	case *types.AttributeValueMemberBS:
		e.key("BS")
		e.open('[')
		for _, b := range v.Value {
			e.bytes(b)
		}
		e.close(']')
	default:
		return fmt.Errorf("ddbwire: attribute value of type %T is not supported", v)
	}
	e.close('}')
	return nil
}

func (e *enc) bytes(b []byte) {
	e.sep()
	e.b = append(e.b, '"')
	e.b = base64.StdEncoding.AppendEncode(e.b, b)
	e.b = append(e.b, '"')
}

func (e *enc) strings(ss []string) {
	e.open('[')
	for _, s := range ss {
		e.str(s)
	}
	e.close(']')
}

func (e *enc) avMap(m map[string]types.AttributeValue) error {
	e.open('{')
	for k, v := range m {
		e.anyKey(k)
		if err := e.av(v); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	e.close('}')
	return nil
}

func (e *enc) avList(l []types.AttributeValue) error {
	e.open('[')
	for i, v := range l {
		if err := e.av(v); err != nil {
			return fmt.Errorf("[%d]: %w", i, err)
		}
	}
	e.close(']')
	return nil
}

func (e *enc) strMap(m map[string]string) {
	e.open('{')
	for k, v := range m {
		e.anyKey(k)
		e.str(v)
	}
	e.close('}')
}

// av reads one attribute value, as the SDK's deserializer does: an object
// with one member naming the kind.
func (d *dec) av() types.AttributeValue {
	var v types.AttributeValue
	d.object(func(k []byte) {
		if v != nil {
			d.fail("attribute value with more than one kind")
			return
		}
		switch string(k) {
		case "S":
			v = &types.AttributeValueMemberS{Value: d.str()}
		case "N":
			v = &types.AttributeValueMemberN{Value: d.str()}
		case "B":
			v = &types.AttributeValueMemberB{Value: d.bin()}
		case "BOOL":
			v = &types.AttributeValueMemberBOOL{Value: d.boolean()}
		case "NULL":
			v = &types.AttributeValueMemberNULL{Value: d.boolean()}
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
			d.array(func() { bs = append(bs, d.bin()) })
			v = &types.AttributeValueMemberBS{Value: bs}
		default:
			// The SDK keeps a kind it does not know as UnknownUnionMember;
			// the store reads none.
			v = &types.UnknownUnionMember{Tag: string(k), Value: d.raw()}
		}
	})
	if v == nil && d.err == nil {
		d.fail("attribute value of no kind")
	}
	return v
}

// raw returns the next value's bytes.
func (d *dec) raw() []byte {
	d.peek()
	start := d.i
	d.skip()
	return append([]byte(nil), d.b[start:d.i]...)
}

func (d *dec) bin() []byte {
	s := d.strBytes()
	if s == nil {
		return nil
	}
	b, err := base64.StdEncoding.AppendDecode(make([]byte, 0, base64.StdEncoding.DecodedLen(len(s))), s)
	if err != nil {
		d.fail("bad base64")
	}
	return b
}

func (d *dec) avMap() map[string]types.AttributeValue {
	if d.null() {
		return nil
	}
	m := map[string]types.AttributeValue{}
	d.object(func(k []byte) { m[string(k)] = d.av() })
	return m
}

func (d *dec) avList() []types.AttributeValue {
	if d.null() {
		return nil
	}
	l := []types.AttributeValue{}
	d.array(func() { l = append(l, d.av()) })
	return l
}

func (d *dec) avMaps() []map[string]types.AttributeValue {
	if d.null() {
		return nil
	}
	l := []map[string]types.AttributeValue{}
	d.array(func() { l = append(l, d.avMap()) })
	return l
}

func (d *dec) strList() []string {
	if d.null() {
		return nil
	}
	l := []string{}
	d.array(func() { l = append(l, d.str()) })
	return l
}
