package ddbwire

import (
	"github.com/batchwork/batchwork/shared/awswire/wirejson"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// errorBody is what an AWS JSON 1.0 error answer carries that the store
// and the retryer read.
type errorBody struct {
	code, message string
	item          map[string]types.AttributeValue
	reasons       []types.CancellationReason
	throttling    []types.ThrottlingReason
}

// decodeError reads an error answer into the error the SDK returns for
// it: DynamoDB's own type for the codes it models on the store's
// operations, a *smithy.GenericAPIError for the others (ValidationException,
// AccessDeniedException, ...). The code is the X-Amzn-ErrorType header's,
// else the body's __type (or code), without its namespace, as the SDK
// sanitizes it.
func decodeError(header string, body []byte) (error, error) {
	eb := errorBody{}
	d := &dec{wirejson.Dec{B: body}}
	var bodyCode string
	if len(body) > 0 {
		d.Object(func(k []byte) {
			switch {
			case string(k) == "__type", strings.EqualFold(string(k), "code") && bodyCode == "":
				bodyCode = d.Str()
			case strings.EqualFold(string(k), "message"):
				eb.message = d.Str()
			case string(k) == "Item":
				eb.item = d.avMap()
			case string(k) == "CancellationReasons":
				eb.reasons = d.cancellationReasons()
			case string(k) == "ThrottlingReasons":
				eb.throttling = d.throttlingReasons()
			default:
				d.Skip()
			}
		})
		if d.Err != nil {
			return nil, &smithy.DeserializationError{Err: d.Err, Snapshot: snapshot(body)}
		}
	}
	code := "UnknownError"
	switch {
	case header != "":
		code = sanitizeCode(header)
	case bodyCode != "":
		code = sanitizeCode(bodyCode)
	}
	eb.code = code
	return typedError(eb), nil
}

func snapshot(b []byte) []byte {
	if len(b) > 1024 {
		b = b[:1024]
	}
	return append([]byte(nil), b...)
}

// sanitizeCode is restjson.SanitizeErrorCode: the part after a '#' and
// before a ':'.
func sanitizeCode(c string) string {
	if i := strings.IndexByte(c, ':'); i >= 0 {
		c = c[:i]
	}
	if i := strings.LastIndexByte(c, '#'); i >= 0 {
		c = c[i+1:]
	}
	return c
}

func msg(eb errorBody) *string {
	if eb.message == "" {
		return nil
	}
	m := eb.message
	return &m
}

// typedError is the SDK's error for the code. The SDK matches codes
// without regard to case; so does this.
func typedError(eb errorBody) error {
	m := msg(eb)
	switch strings.ToLower(eb.code) {
	case "conditionalcheckfailedexception":
		return &types.ConditionalCheckFailedException{Message: m, Item: eb.item}
	case "transactioncanceledexception":
		return &types.TransactionCanceledException{Message: m, CancellationReasons: eb.reasons}
	case "provisionedthroughputexceededexception":
		return &types.ProvisionedThroughputExceededException{Message: m, ThrottlingReasons: eb.throttling}
	case "requestlimitexceeded":
		return &types.RequestLimitExceeded{Message: m, ThrottlingReasons: eb.throttling}
	case "throttlingexception":
		return &types.ThrottlingException{Message: m, ThrottlingReasons: eb.throttling}
	case "resourcenotfoundexception":
		return &types.ResourceNotFoundException{Message: m}
	case "internalservererror":
		return &types.InternalServerError{Message: m}
	case "invalidendpointexception":
		return &types.InvalidEndpointException{Message: m}
	case "itemcollectionsizelimitexceededexception":
		return &types.ItemCollectionSizeLimitExceededException{Message: m}
	case "transactionconflictexception":
		return &types.TransactionConflictException{Message: m}
	case "transactioninprogressexception":
		return &types.TransactionInProgressException{Message: m}
	case "idempotentparametermismatchexception":
		return &types.IdempotentParameterMismatchException{Message: m}
	case "replicatedwriteconflictexception":
		return &types.ReplicatedWriteConflictException{Message: m}
	}
	message := eb.message
	if message == "" {
		message = eb.code
	}
	return &smithy.GenericAPIError{Code: eb.code, Message: message}
}

func (d *dec) cancellationReasons() []types.CancellationReason {
	if d.Null() {
		return nil
	}
	l := []types.CancellationReason{}
	d.Array(func() {
		var r types.CancellationReason
		d.Object(func(k []byte) {
			switch string(k) {
			case "Code":
				r.Code = d.StrPtr()
			case "Item":
				r.Item = d.avMap()
			case "Message":
				r.Message = d.StrPtr()
			default:
				d.Skip()
			}
		})
		l = append(l, r)
	})
	return l
}

func (d *dec) throttlingReasons() []types.ThrottlingReason {
	if d.Null() {
		return nil
	}
	l := []types.ThrottlingReason{}
	d.Array(func() {
		var r types.ThrottlingReason
		d.Object(func(k []byte) {
			switch string(k) {
			case "reason":
				r.Reason = d.StrPtr()
			case "resource":
				r.Resource = d.StrPtr()
			default:
				d.Skip()
			}
		})
		l = append(l, r)
	})
	return l
}
