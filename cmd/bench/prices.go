package main

import listprices "github.com/batchwork/batchwork/shared/cost"

// AWS list prices, us-east-1, as of PricesDate: shared/cost's table, which
// the jobs' own cost figures use too, in the units the bench prints.
const PricesDate = listprices.PricesDate

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
	DynamoWRU: listprices.Prices.DynamoWRU * 1e6, DynamoRRU: listprices.Prices.DynamoRRU * 1e6,
	SQSRequest: listprices.Prices.SQSRequest * 1e6,
	S3Tier1:    listprices.Prices.S3Tier1 * 1e3, S3Tier2: listprices.Prices.S3Tier2 * 1e3,
	LambdaRequest: listprices.Prices.LambdaInvoke * 1e6, LambdaGBSecond: listprices.Prices.LambdaGBSecond,
	SFNTransition: 0.025,
}
