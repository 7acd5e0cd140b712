package dynamo

import (
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Attribute names are short on purpose: every task record must stay under
// 1 KB (one write unit), and names count towards item size.
const (
	aState     = "st"
	aAttempt   = "att"
	aMax       = "mx"
	aToken     = "tok"
	aLease     = "lease"
	aNotBefore = "nb"
	aSlotAt    = "sat"
	aExecutor  = "ex"
	aAlive     = "alive"
	aInKey     = "ik"
	aInStart   = "is"
	aInEnd     = "ie"
	aCommitAtt = "catt"
	aOutputs   = "nout"
	aErr       = "err"
	aUpdated   = "upd"
	aCreated   = "crt"
	aEnded     = "end"
	aStarted   = "sta"
	aName      = "nm"
	aOwner     = "own"
	aSpec      = "spec"
	aSpecHash  = "sh"
	aManifest  = "man"
	aTotal     = "tot"
	aShards    = "nsh"
	aMat       = "mat"
	aEnqueued  = "enq"
	aLeft      = "left"
	aJob       = "job"
	aTTL       = "ttl"
)

func sv(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func nv(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}
func bv(b bool) types.AttributeValue { return &types.AttributeValueMemberBOOL{Value: b} }
func ms(t time.Time) types.AttributeValue {
	return nv(t.UnixMilli())
}

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: sv(pk), attrSK: sv(sk)}
}

func getS(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func getN(item map[string]types.AttributeValue, name string) int64 {
	if v, ok := item[name].(*types.AttributeValueMemberN); ok {
		n, _ := strconv.ParseInt(v.Value, 10, 64)
		return n
	}
	return 0
}

func getB(item map[string]types.AttributeValue, name string) bool {
	if v, ok := item[name].(*types.AttributeValueMemberBOOL); ok {
		return v.Value
	}
	return false
}

func getT(item map[string]types.AttributeValue, name string) time.Time {
	n := getN(item, name)
	if n == 0 {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}

// ItemSize approximates DynamoDB's item size: attribute name lengths plus
// value sizes (numbers as their digits, roughly).
func ItemSize(item map[string]types.AttributeValue) int {
	size := 0
	for name, v := range item {
		size += len(name)
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			size += len(v.Value)
		case *types.AttributeValueMemberN:
			size += (len(v.Value)+1)/2 + 1
		case *types.AttributeValueMemberBOOL:
			size++
		default:
			size += 8
		}
	}
	return size
}
