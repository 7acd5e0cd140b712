package readside

import (
	"github.com/batchwork/batchwork/shared/cost"
	"github.com/batchwork/batchwork/shared/domain"
)

// JobCost is what a job's AWS requests cost, as its stages' counter
// shards carry it (shared/cost): the requests and capacity units by
// service, their price at list prices, and the compute time its task
// attempts ran. It leaves out requests no job could be found for (empty
// polls, the sweep's scans) and those a process made for the job after
// its last count there (the last stage's manifests, the job's end).
type JobCost struct {
	Requests cost.Counts  `json:"requests"`
	Dollars  cost.Dollars `json:"dollars"`
	// PricesDate is when the list prices were read (us-east-1).
	PricesDate string `json:"pricesDate"`
}

// jobCost sums the stages' counts; nil when they count nothing.
func jobCost(stats []domain.StageStats) *JobCost {
	var c cost.Counts
	for _, st := range stats {
		c.Add(st.Counters.Cost)
	}
	if c.IsZero() {
		return nil
	}
	for _, f := range c.Fields() {
		*f.Value = cost.Round(*f.Value)
	}
	d := cost.Price(c)
	return &JobCost{Requests: c, Dollars: d, PricesDate: cost.PricesDate}
}
