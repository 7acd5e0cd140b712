package sqswire

import (
	"github.com/batchwork/batchwork/shared/awswire/wirejson"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/batchwork/batchwork/shared/awswire"
)

// typed is the SDK's typed errors per operation: an operation's
// deserializer knows the codes its model lists, and answers any other
// code with a *smithy.GenericAPIError.
var typed = map[string][]string{
	opSend:        {"BatchEntryIdsNotDistinct", "BatchRequestTooLong", "EmptyBatchRequest", "InvalidAddress", "InvalidBatchEntryId", "InvalidSecurity", "KmsAccessDenied", "KmsDisabled", "KmsInvalidKeyUsage", "KmsInvalidState", "KmsNotFound", "KmsOptInRequired", "KmsThrottled", "QueueDoesNotExist", "RequestThrottled", "TooManyEntriesInBatchRequest", "UnsupportedOperation"},
	opReceive:     {"InvalidAddress", "InvalidSecurity", "KmsAccessDenied", "KmsDisabled", "KmsInvalidKeyUsage", "KmsInvalidState", "KmsNotFound", "KmsOptInRequired", "KmsThrottled", "OverLimit", "QueueDoesNotExist", "RequestThrottled", "UnsupportedOperation"},
	opDelete:      {"BatchEntryIdsNotDistinct", "EmptyBatchRequest", "InvalidAddress", "InvalidBatchEntryId", "InvalidSecurity", "QueueDoesNotExist", "RequestThrottled", "TooManyEntriesInBatchRequest", "UnsupportedOperation"},
	opChange:      {"InvalidAddress", "InvalidSecurity", "MessageNotInflight", "QueueDoesNotExist", "ReceiptHandleIsInvalid", "RequestThrottled", "UnsupportedOperation"},
	opChangeBatch: {"BatchEntryIdsNotDistinct", "EmptyBatchRequest", "InvalidAddress", "InvalidBatchEntryId", "InvalidSecurity", "QueueDoesNotExist", "RequestThrottled", "TooManyEntriesInBatchRequest", "UnsupportedOperation"},
}

// decodeError reads an error answer into the error the SDK returns for
// it. The code is the X-Amzn-ErrorType header's, else the body's __type,
// else its code, without its namespace; the message the body's (any case
// of "message"), else "UnknownError". SQS also names its old query
// protocol code in x-amzn-query-error ("AWS.SimpleQueueService.
// NonExistentQueue;Sender"), which the SDK keeps as a typed error's
// ErrorCodeOverride and as a generic error's code.
func decodeError(op string, h http.Header, body []byte) (error, error) {
	var typ, bodyCode, message string
	var typedMessage *string
	if len(body) > 0 {
		d := &dec{wirejson.Dec{B: body}}
		d.Object(func(k []byte) {
			switch {
			case strings.EqualFold(string(k), "__type"):
				typ = d.Str()
			case strings.EqualFold(string(k), "code"):
				if d.Peek() == '"' {
					bodyCode = d.Str()
				} else {
					d.Skip()
				}
			case strings.EqualFold(string(k), "message"):
				s := d.StrPtr()
				if s != nil {
					message = *s
				}
				// The typed error reads "message" or "Message" only.
				if string(k) == "message" || string(k) == "Message" {
					typedMessage = s
				}
			default:
				d.Skip()
			}
		})
		d.End()
		if d.Err != nil {
			return nil, &smithy.DeserializationError{Err: d.Err, Snapshot: awswire.Snapshot(body)}
		}
	}
	code := "UnknownError"
	switch {
	case h.Get("X-Amzn-ErrorType") != "":
		code = sanitizeCode(h.Get("X-Amzn-ErrorType"))
	case typ != "":
		code = sanitizeCode(typ)
	case bodyCode != "":
		code = sanitizeCode(bodyCode)
	}
	var override *string
	if q := strings.Split(h.Get("X-Amzn-Query-Error"), ";"); len(q) == 2 && q[0] != "" {
		override = &q[0]
	}
	for _, c := range typed[op] {
		if strings.EqualFold(c, code) {
			return typedError(c, typedMessage, override), nil
		}
	}
	if message == "" {
		message = "UnknownError"
	}
	if override != nil {
		code = *override
	}
	return &smithy.GenericAPIError{Code: code, Message: message}, nil
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

func typedError(code string, m, o *string) error {
	switch code {
	case "BatchEntryIdsNotDistinct":
		return &types.BatchEntryIdsNotDistinct{Message: m, ErrorCodeOverride: o}
	case "BatchRequestTooLong":
		return &types.BatchRequestTooLong{Message: m, ErrorCodeOverride: o}
	case "EmptyBatchRequest":
		return &types.EmptyBatchRequest{Message: m, ErrorCodeOverride: o}
	case "InvalidAddress":
		return &types.InvalidAddress{Message: m, ErrorCodeOverride: o}
	case "InvalidBatchEntryId":
		return &types.InvalidBatchEntryId{Message: m, ErrorCodeOverride: o}
	case "InvalidSecurity":
		return &types.InvalidSecurity{Message: m, ErrorCodeOverride: o}
	case "KmsAccessDenied":
		return &types.KmsAccessDenied{Message: m, ErrorCodeOverride: o}
	case "KmsDisabled":
		return &types.KmsDisabled{Message: m, ErrorCodeOverride: o}
	case "KmsInvalidKeyUsage":
		return &types.KmsInvalidKeyUsage{Message: m, ErrorCodeOverride: o}
	case "KmsInvalidState":
		return &types.KmsInvalidState{Message: m, ErrorCodeOverride: o}
	case "KmsNotFound":
		return &types.KmsNotFound{Message: m, ErrorCodeOverride: o}
	case "KmsOptInRequired":
		return &types.KmsOptInRequired{Message: m, ErrorCodeOverride: o}
	case "KmsThrottled":
		return &types.KmsThrottled{Message: m, ErrorCodeOverride: o}
	case "MessageNotInflight":
		return &types.MessageNotInflight{Message: m, ErrorCodeOverride: o}
	case "OverLimit":
		return &types.OverLimit{Message: m, ErrorCodeOverride: o}
	case "QueueDoesNotExist":
		return &types.QueueDoesNotExist{Message: m, ErrorCodeOverride: o}
	case "ReceiptHandleIsInvalid":
		return &types.ReceiptHandleIsInvalid{Message: m, ErrorCodeOverride: o}
	case "RequestThrottled":
		return &types.RequestThrottled{Message: m, ErrorCodeOverride: o}
	case "TooManyEntriesInBatchRequest":
		return &types.TooManyEntriesInBatchRequest{Message: m, ErrorCodeOverride: o}
	}
	return &types.UnsupportedOperation{Message: m, ErrorCodeOverride: o}
}
