package client

import "github.com/batchwork/batchwork/shared/cost"

// JobCost is what a job's AWS requests cost so far: the requests and
// capacity units by service, their price at us-east-1 list prices, and the
// compute time its task attempts ran (docs/operations.md, "What a job
// cost").
type JobCost struct {
	Requests cost.Counts  `json:"requests"`
	Dollars  cost.Dollars `json:"dollars"`
	// PricesDate is when the list prices were read.
	PricesDate string `json:"pricesDate"`
}
