package faults

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// variant is one error response a service sends for a kind of fault.
type variant struct {
	code   string // the error code, as the SDK reports it
	ns     string // the namespace AWS puts before the code in a JSON __type
	status int
	msg    string
}

const (
	nsDynamoDB = "com.amazonaws.dynamodb.v20120810#"
	nsSQS      = "com.amazonaws.sqs#"
	// Throttles from AWS's front end carry this namespace, not the
	// service's.
	nsCoral = "com.amazon.coral.availability#"

	opTransactWrite = "TransactWriteItems"
	codeCanceled    = "TransactionCanceledException"
)

// Services lists the services the error kinds are modelled for. Lost
// applies to every service.
var Services = []string{"DynamoDB", "SQS", "S3", "EventBridge"}

// conflictOps are the DynamoDB operations a transaction conflict cancels.
var conflictOps = []string{opTransactWrite, "UpdateItem", "PutItem", "DeleteItem"}

// byService holds the variants that do not depend on the operation.
var byService = map[Kind]map[string][]variant{
	Throttle: {
		"DynamoDB": {
			{"ProvisionedThroughputExceededException", nsDynamoDB, 400, "The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API."},
			{"ThrottlingException", nsCoral, 400, "Rate of requests exceeds the allowed throughput."},
		},
		"SQS": {
			{"RequestThrottled", nsSQS, 400, "Request is throttled."},
			{"ThrottlingException", nsCoral, 400, "Rate exceeded"},
		},
		"S3": {
			{"SlowDown", "", 503, "Please reduce your request rate."},
		},
		"EventBridge": {
			{"ThrottlingException", nsCoral, 400, "Rate exceeded"},
		},
	},
	ServerError: {
		"DynamoDB": {
			{"InternalServerError", nsDynamoDB, 500, "Internal server error"},
			{"ServiceUnavailable", nsDynamoDB, 503, "Service unavailable"},
		},
		"SQS": {
			{"InternalFailure", "", 500, "The request processing has failed because of an unknown error, exception or failure."},
			{"ServiceUnavailable", "", 503, "The request has failed due to a temporary failure of the server."},
		},
		"S3": {
			{"InternalError", "", 500, "We encountered an internal error. Please try again."},
			{"ServiceUnavailable", "", 503, "Service is unable to handle request."},
		},
		// EventBridge (AWS JSON 1.1) answers a failed PutEvents as a
		// whole with InternalException.
		"EventBridge": {
			{"InternalException", "", 500, "Internal service error."},
		},
	},
}

// variants returns the responses svc can give op for kind, keeping only
// code when it is set. None means the kind does not apply there.
func variants(kind Kind, svc, op, code string) []variant {
	var vs []variant
	switch kind {
	case Conflict:
		switch {
		case svc != "DynamoDB":
		case op == opTransactWrite:
			vs = []variant{{codeCanceled, nsDynamoDB, 400, ""}}
		case contains(conflictOps, op):
			// A single-item write to an item in a transaction in flight.
			vs = []variant{{"TransactionConflictException", nsDynamoDB, 400, "Transaction is ongoing for the item"}}
		}
	case InProgress:
		if svc == "DynamoDB" && op == opTransactWrite {
			vs = []variant{{"TransactionInProgressException", nsDynamoDB, 400, "Transaction is in progress"}}
		}
	default:
		vs = byService[kind][svc]
	}
	if code == "" {
		return vs
	}
	var out []variant
	for _, v := range vs {
		if strings.EqualFold(v.code, code) {
			out = append(out, v)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// applies reports whether r can fire on some service and operation.
func applies(r Rule) bool {
	if r.Kind == Lost {
		return r.Code == ""
	}
	if r.Kind == Duplicate {
		return r.Code == "" && matchPattern(r.Service, "SQS") && matchPattern(r.Operation, opReceive)
	}
	for _, svc := range Services {
		if !matchPattern(r.Service, svc) {
			continue
		}
		ops := []string{""} // any operation
		if r.Kind == Conflict || r.Kind == InProgress {
			ops = conflictOps
		}
		for _, op := range ops {
			if op != "" && !matchPattern(r.Operation, op) {
				continue
			}
			if len(variants(r.Kind, svc, op, r.Code)) > 0 {
				return true
			}
		}
	}
	return false
}

// scopeText says where a kind applies, for errors.
func scopeText(kind Kind) string {
	switch kind {
	case Lost:
		return "every service and operation, without a code"
	case Conflict:
		return "DynamoDB TransactWriteItems (TransactionCanceledException) and UpdateItem, PutItem, DeleteItem (TransactionConflictException)"
	case InProgress:
		return "DynamoDB TransactWriteItems"
	case Duplicate:
		return "SQS ReceiveMessage, without a code"
	}
	var parts []string
	for _, svc := range Services {
		var codes []string
		for _, v := range byService[kind][svc] {
			codes = append(codes, v.code)
		}
		parts = append(parts, svc+" ("+strings.Join(codes, ", ")+")")
	}
	return strings.Join(parts, ", ")
}

// response is an HTTP response to answer an attempt with.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) build(req *smithyhttp.Request) *smithyhttp.Response {
	return &smithyhttp.Response{Response: r.httpResponse(req.Method)}
}

// httpResponse is the answer to a request with method.
func (r response) httpResponse(method string) *http.Response {
	body := r.body
	if method == http.MethodHead {
		// HEAD responses have no body; S3 then takes the code from the
		// status, as it does on AWS.
		body = nil
	}
	h := r.header.Clone()
	h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	h.Set("Content-Length", strconv.Itoa(len(body)))
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", r.status, http.StatusText(r.status)),
		StatusCode:    r.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
	}
}

// respond builds the response for rule r on one attempt. It draws from
// the random source, so the caller holds the lock.
func (i *Injector) respond(svc, op string, r *ruleState, input any) response {
	vs := variants(r.Kind, svc, op, r.Code)
	v := vs[0]
	if len(vs) > 1 {
		v = vs[i.rng.IntN(len(vs))]
	}
	// A request ID that says where the error came from, for whoever reads
	// the logs.
	reqID := fmt.Sprintf("FAULTINJECTED%06d", i.seq)
	h := http.Header{}
	var body []byte
	switch svc {
	case "S3":
		h.Set("Content-Type", "application/xml")
		h.Set("X-Amz-Request-Id", reqID)
		h.Set("X-Amz-Id-2", "fault-injector")
		body = s3Error(v, reqID)
	default: // DynamoDB and SQS speak AWS JSON 1.0.
		h.Set("Content-Type", "application/x-amz-json-1.0")
		h.Set("X-Amzn-Requestid", reqID)
		if v.code == codeCanceled {
			body = i.cancelBody(input)
		} else {
			body = jsonError(v)
		}
		switch svc {
		case "DynamoDB":
			// DynamoDB signs its bodies with a CRC32 the SDK checks.
			h.Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
		case "SQS":
			// SQS keeps its old query-protocol code in a header, and the
			// SDK prefers it for errors it has no type for.
			fault := "Sender"
			if v.status >= 500 {
				fault = "Receiver"
			}
			h.Set("X-Amzn-Query-Error", v.code+";"+fault)
		}
	}
	return response{status: v.status, header: h, body: body}
}

func jsonError(v variant) []byte {
	b, _ := json.Marshal(struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}{v.ns + v.code, v.msg})
	return b
}

type cancelReason struct {
	Code    string
	Message string `json:",omitempty"`
}

// cancelBody is DynamoDB's TransactionCanceledException for a conflict on
// one of the transaction's items: one reason per item, in item order.
func (i *Injector) cancelBody(input any) []byte {
	n := 1
	if in, ok := input.(*dynamodb.TransactWriteItemsInput); ok && len(in.TransactItems) > 0 {
		n = len(in.TransactItems)
	}
	hit := 0
	if n > 1 {
		hit = i.rng.IntN(n)
	}
	reasons := make([]cancelReason, n)
	codes := make([]string, n)
	for k := range reasons {
		reasons[k].Code = "None"
		if k == hit {
			reasons[k] = cancelReason{Code: "TransactionConflict", Message: "Transaction is ongoing for the item"}
		}
		codes[k] = reasons[k].Code
	}
	b, _ := json.Marshal(struct {
		Type                string `json:"__type"`
		CancellationReasons []cancelReason
		Message             string
	}{
		nsDynamoDB + codeCanceled, reasons,
		"Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]",
	})
	return b
}

func s3Error(v variant, reqID string) []byte {
	b, _ := xml.Marshal(struct {
		XMLName   xml.Name `xml:"Error"`
		Code      string
		Message   string
		RequestID string `xml:"RequestId"`
		HostID    string `xml:"HostId"`
	}{Code: v.code, Message: v.msg, RequestID: reqID, HostID: "fault-injector"})
	return append([]byte(xml.Header), b...)
}
