// Package cost is what a job spent in AWS requests: the counts of its
// billed requests and capacity units by service (Counts), and their price
// at AWS list prices (Price). The counting itself, per job and per
// process, is shared/cost/meter; the counts are kept on the job's stage
// counter shards (shared/dynamo) and summed by the job's status.
package cost

import "math"

// PricesDate is when Prices were read off the AWS pricing pages
// (us-east-1, on-demand; /work/shared/AWS-NOTES.md keeps the figures):
// https://aws.amazon.com/dynamodb/pricing/on-demand/,
// https://aws.amazon.com/sqs/pricing/, https://aws.amazon.com/s3/pricing/,
// https://aws.amazon.com/lambda/pricing/,
// https://aws.amazon.com/eventbridge/pricing/.
const PricesDate = "2026-11-23"

// PriceList is a list price per billed unit, in dollars.
type PriceList struct {
	// DynamoDB on-demand: per write and read request unit.
	DynamoWRU, DynamoRRU float64
	// SQS standard: per request (each started 64 KB of payload is one).
	SQSRequest float64
	// S3 Standard: PUT, COPY, POST, LIST (tier 1); GET, HEAD and the
	// rest (tier 2). DELETE is free.
	S3Tier1, S3Tier2 float64
	// Lambda: per invocation (arm64 and x86 alike), per GB-second (arm64).
	LambdaInvoke, LambdaGBSecond float64
	// EventBridge: per custom event published (each 64 KB chunk).
	EventBridgeEvent float64
}

// Prices is the us-east-1 list, per unit.
var Prices = PriceList{
	DynamoWRU: 0.625 / 1e6, DynamoRRU: 0.125 / 1e6,
	SQSRequest: 0.40 / 1e6,
	S3Tier1:    0.005 / 1e3, S3Tier2: 0.0004 / 1e3,
	LambdaInvoke: 0.20 / 1e6, LambdaGBSecond: 0.0000133334,
	EventBridgeEvent: 1.00 / 1e6,
}

// Counts is what requests made for one job were billed, by service. The
// fields are float64: a request shared by several jobs' messages (an SQS
// batch) is split between them by share.
type Counts struct {
	// DynamoDB: requests, and the read and write request units they
	// consumed (as DynamoDB reported them, or estimated where it did not).
	DynamoRequests   float64 `json:"dynamodbRequests,omitempty"`
	DynamoReadUnits  float64 `json:"dynamodbReadUnits,omitempty"`
	DynamoWriteUnits float64 `json:"dynamodbWriteUnits,omitempty"`
	// SQS: billed requests (each started 64 KB of a request's payload is
	// one), sends, receives, deletes and visibility changes alike.
	SQSRequests float64 `json:"sqsRequests,omitempty"`
	// S3: requests by price tier (S3Tier): PUT, COPY, POST and LIST;
	// GET, HEAD and the rest; and the free ones (DELETE).
	S3Tier1 float64 `json:"s3Tier1Requests,omitempty"`
	S3Tier2 float64 `json:"s3Tier2Requests,omitempty"`
	S3Free  float64 `json:"s3FreeRequests,omitempty"`
	// LambdaInvokes counts invocations (a lambda stage's calls of its
	// function).
	LambdaInvokes float64 `json:"lambdaInvokes,omitempty"`
	// Events counts EventBridge events published.
	Events float64 `json:"events,omitempty"`
	// ComputeSeconds is the run time of the job's task attempts (claim to
	// commit or failure), and GBSeconds that time by the attempt's
	// executor memory, where it is known.
	ComputeSeconds float64 `json:"computeSeconds,omitempty"`
	GBSeconds      float64 `json:"gbSeconds,omitempty"`
}

// Add adds o to c.
func (c *Counts) Add(o Counts) {
	c.DynamoRequests += o.DynamoRequests
	c.DynamoReadUnits += o.DynamoReadUnits
	c.DynamoWriteUnits += o.DynamoWriteUnits
	c.SQSRequests += o.SQSRequests
	c.S3Tier1 += o.S3Tier1
	c.S3Tier2 += o.S3Tier2
	c.S3Free += o.S3Free
	c.LambdaInvokes += o.LambdaInvokes
	c.Events += o.Events
	c.ComputeSeconds += o.ComputeSeconds
	c.GBSeconds += o.GBSeconds
}

// IsZero says whether c counts nothing.
func (c Counts) IsZero() bool { return c == Counts{} }

// Fields names each count, in a fixed order: the attribute names the
// store keeps them under are derived from these.
func (c *Counts) Fields() []Field {
	return []Field{
		{"ddbReq", &c.DynamoRequests}, {"ddbRRU", &c.DynamoReadUnits}, {"ddbWRU", &c.DynamoWriteUnits},
		{"sqsReq", &c.SQSRequests},
		{"s3T1", &c.S3Tier1}, {"s3T2", &c.S3Tier2}, {"s3Free", &c.S3Free},
		{"lambdaInv", &c.LambdaInvokes}, {"events", &c.Events},
		{"cpuS", &c.ComputeSeconds}, {"gbS", &c.GBSeconds},
	}
}

// Field is one count, by name.
type Field struct {
	Name  string
	Value *float64
}

// Dollars is a price by service.
type Dollars struct {
	DynamoDB    float64 `json:"dynamodb"`
	SQS         float64 `json:"sqs"`
	S3          float64 `json:"s3"`
	Lambda      float64 `json:"lambda"`
	EventBridge float64 `json:"eventbridge"`
	// Requests is the sum of the above: what the job's requests cost. Its
	// compute (Counts.GBSeconds) is not in it: where it ran (Lambda,
	// Fargate, a laptop) decides that price.
	Requests float64 `json:"requests"`
}

// Price is what c's requests cost at the list prices p.
func (p PriceList) Price(c Counts) Dollars {
	d := Dollars{
		DynamoDB:    c.DynamoReadUnits*p.DynamoRRU + c.DynamoWriteUnits*p.DynamoWRU,
		SQS:         c.SQSRequests * p.SQSRequest,
		S3:          c.S3Tier1*p.S3Tier1 + c.S3Tier2*p.S3Tier2,
		Lambda:      c.LambdaInvokes * p.LambdaInvoke,
		EventBridge: c.Events * p.EventBridgeEvent,
	}
	d.Requests = d.DynamoDB + d.SQS + d.S3 + d.Lambda + d.EventBridge
	return d
}

// Price is what c's requests cost at the us-east-1 list prices.
func Price(c Counts) Dollars { return Prices.Price(c) }

// S3 price tiers of an operation.
const (
	S3FreeTier = 0 // DELETE and abort
	S3Tier1    = 1 // PUT, COPY, POST, LIST (and the multipart steps)
	S3Tier2    = 2 // GET, HEAD and everything else
)

// S3Tier is the price tier of an S3 operation ("PutObject").
func S3Tier(op string) int {
	for _, p := range []string{"Delete", "Abort"} {
		if hasPrefix(op, p) {
			return S3FreeTier
		}
	}
	for _, p := range []string{"Put", "Copy", "List", "Create", "UploadPart", "Complete", "Restore"} {
		if hasPrefix(op, p) {
			return S3Tier1
		}
	}
	return S3Tier2
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// Round rounds a count to the micro-unit, as the store keeps it: shares
// of a request are thirds and sevenths, whose sums would otherwise grow
// long decimal tails.
func Round(f float64) float64 { return math.Round(f*1e6) / 1e6 }
