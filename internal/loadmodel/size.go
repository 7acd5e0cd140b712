package loadmodel

import (
	"math"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDB's billing units, from its documented size rules: a write unit
// covers 1 KB of item, a read unit 4 KB (half a unit when eventually
// consistent), and a transaction costs twice either.
const (
	writeUnitBytes = 1024
	readUnitBytes  = 4096
)

// ItemSize is an item's size as DynamoDB bills it: each attribute's name
// plus its value (strings and binaries their length in bytes, numbers
// about one byte per two significant digits plus one, booleans and nulls
// one byte, lists and maps 3 bytes plus one per element besides their
// elements' own sizes).
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += numberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	}
	return 0
}

// numberSize is a number's size: one byte per two significant digits
// (leading and trailing zeros do not count), plus one.
func numberSize(s string) int {
	s = strings.TrimLeft(s, "+-")
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	digits := strings.Replace(s, ".", "", 1)
	digits = strings.TrimLeft(digits, "0")
	if strings.Contains(s, ".") {
		digits = strings.TrimRight(digits, "0")
	} else {
		// 1000 has one significant digit too.
		digits = strings.TrimRight(digits, "0")
	}
	d := max(len(digits), 1)
	return (d+1)/2 + 1
}

// WriteUnits is the write capacity one write of an item of size bytes
// costs: a unit per started KB, at least one; twice in a transaction.
func WriteUnits(size int, transactional bool) float64 {
	u := math.Max(1, math.Ceil(float64(size)/writeUnitBytes))
	if transactional {
		u *= 2
	}
	return u
}

// ReadUnits is the read capacity a read of size bytes costs: a unit per
// started 4 KB, at least one; half that when eventually consistent,
// twice it in a transaction. A Query's size is the sum of the items it
// returns, rounded once; a GetItem or BatchGetItem rounds each item.
func ReadUnits(size int, consistent, transactional bool) float64 {
	u := math.Max(1, math.Ceil(float64(size)/readUnitBytes))
	switch {
	case transactional:
		u *= 2
	case !consistent:
		u /= 2
	}
	return u
}
