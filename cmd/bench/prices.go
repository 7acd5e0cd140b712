package main

// AWS list prices, us-east-1, as of PricesDate (the figures in
// ../shared/AWS-NOTES.md; confirm on the AWS pricing pages before relying
// on one). The bench's cost figures are these times the requests and
// capacity it counted.
const PricesDate = "2026-11-23"

var prices = struct {
	// DynamoDB on-demand, per million write and read request units.
	DynamoWRU, DynamoRRU float64
	// SQS standard, per million requests; each started 64 KB of a
	// request's payload is billed as one request.
	SQSRequest float64
	// S3 Standard, per 1,000 requests: PUT, COPY, POST, LIST; GET and
	// all others (DELETE is free).
	S3Tier1, S3Tier2 float64
	// Lambda arm64: per million invocations; per GB-second.
	LambdaRequest, LambdaGBSecond float64
	// Step Functions Standard, per 1,000 state transitions. A Distributed
	// Map bills one transition per child workflow execution it starts,
	// and a Standard child workflow bills its own states' transitions
	// besides (one Task state: one more).
	SFNTransition float64
}{
	DynamoWRU: 0.625, DynamoRRU: 0.125,
	SQSRequest: 0.40,
	S3Tier1:    0.005, S3Tier2: 0.0004,
	LambdaRequest: 0.20, LambdaGBSecond: 0.0000133334,
	SFNTransition: 0.025,
}
