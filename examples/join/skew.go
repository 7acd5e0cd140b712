package join

import "fmt"

// SkewSpec is the join of CSV orders under orders and JSON Lines customers
// under customers into r partitions, with skew: a partition over
// threshold times the median and over minBytes is split, each piece
// joining a share of its larger side (the orders of a frequent customer)
// with all of the other side's partition. An inner join's output for a
// customer depends on matching pairs alone, so the pieces' outputs are
// disjoint parts of the result.
func SkewSpec(name, orders, customers string, r, threshold int, minBytes int64) []byte {
	return fmt.Appendf(nil, `{"name": %q, "stages": [
  {"name": %q, "task": %q, "partitions": {"input": {"prefix": %q, "format": "jsonl", "splitSize": "16KiB"}}, "shuffle": {"partitions": %d}},
  {"name": %q, "task": %q, "partitions": {"input": {"prefix": %q, "format": "csv", "splitSize": "16KiB"}}, "shuffle": {"partitions": %d}},
  {"name": "join", "task": %q, "after": [%q, %q], "skew": {"join": true, "threshold": %d, "minBytes": %d}}]}`,
		name, CustomersStage, CustomersTask, customers, r, OrdersStage, OrdersTask, orders, r, JoinTask, CustomersStage, OrdersStage, threshold, minBytes)
}
