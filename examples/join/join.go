// Package join is a reduce-side join of orders and customers: two map
// stages each shuffle their records by customer id into the same number
// of partitions, and the join stage, after both, reads partition p of
// each shuffle, every record tagged with the stage it came from
// (batchwork.TaggedRecords), and writes each order with its customer's
// name (an inner join).
//
// Spec generates its data (the chaos run uses it: every output is a
// function of the spec alone, sorted and free of attempt numbers, so two
// runs of one spec are byte-identical however many attempts their tasks
// took). SpecInputs reads stored data instead: orders (order_id,
// customer_id, amount) under one or more prefixes, each CSV or JSON
// Lines, and customers as JSON Lines ({"id": ..., "name": ...}).
package join

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/batchwork/batchwork/shared/batchwork"
)

// Task names, as a spec refers to them.
const (
	GenOrdersTask    = "join.genorders"
	GenCustomersTask = "join.gencustomers"
	OrdersTask       = "join.orders"
	CustomersTask    = "join.customers"
	JoinTask         = "join.join"
)

// Stage names: the join tells its sources apart by them.
const (
	OrdersStage    = "orders"
	CustomersStage = "customers"
)

// customers is the generated customers' id space: ids c00..c63, of which
// every ninth has no customer record, so some orders match no customer.
const customers = 64

// ordersPerTask is how many orders each generating task emits.
const ordersPerTask = 40

// Register adds the example's task functions to reg.
func Register(reg *batchwork.Registry) {
	reg.Register(GenOrdersTask, GenOrders)
	reg.Register(GenCustomersTask, GenCustomers)
	reg.Register(OrdersTask, Orders)
	reg.Register(CustomersTask, Customers)
	reg.Register(JoinTask, Join)
}

// Spec is the generated join: n order tasks and m customer tasks, both
// shuffling into r partitions, so r join tasks.
func Spec(name string, n, m, r int) []byte {
	params := strings.TrimSuffix(strings.Repeat(fmt.Sprintf(`{tasks: "%d"}, `, m), m), ", ")
	return fmt.Appendf(nil, `name: %s
stages:
  - {name: %s, task: %s, partitions: {count: %d, params: [%s]}, shuffle: {partitions: %d}}
  - {name: %s, task: %s, partitions: {count: %d}, shuffle: {partitions: %d}}
  - {name: join, task: %s, after: [%s, %s]}
`, name, CustomersStage, GenCustomersTask, m, params, r, OrdersStage, GenOrdersTask, n, r, JoinTask, CustomersStage, OrdersStage)
}

// Prefix is an input prefix and its format (csv or jsonl).
type Prefix struct{ Prefix, Format string }

// SpecInputs is the join over stored data: the orders stage reads every
// prefix in orders, each in its own format (partitions.inputs, one task
// per split of any of them), the customers stage the JSON Lines under
// customers, and the join's r tasks read both shuffles.
func SpecInputs(name string, orders []Prefix, customers string, r int) []byte {
	var ins []string
	for _, p := range orders {
		ins = append(ins, fmt.Sprintf(`{"prefix": %q, "format": %q, "splitSize": "16KiB"}`, p.Prefix, p.Format))
	}
	return fmt.Appendf(nil, `{"name": %q, "stages": [
  {"name": %q, "task": %q, "partitions": {"input": {"prefix": %q, "format": "jsonl", "splitSize": "16KiB"}}, "shuffle": {"partitions": %d}},
  {"name": %q, "task": %q, "partitions": {"inputs": [%s]}, "shuffle": {"partitions": %d}},
  {"name": "join", "task": %q, "after": [%q, %q]}]}`,
		name, CustomersStage, CustomersTask, customers, r, OrdersStage, OrdersTask, strings.Join(ins, ", "), r, JoinTask, CustomersStage, OrdersStage)
}

// GenOrders emits ordersPerTask orders keyed by customer id, value
// "order_id,amount", sorted so that even its shuffle outputs are the same
// on every attempt.
func GenOrders(ctx context.Context, t *batchwork.Task) error {
	p := t.Partition
	type rec struct{ k, v string }
	recs := make([]rec, 0, ordersPerTask)
	for i := range ordersPerTask {
		c := (p*7 + i*13) % customers
		recs = append(recs, rec{fmt.Sprintf("c%02d", c), fmt.Sprintf("o%d.%d,%d.%02d", p, i, (p+i)%50, i%100)})
	}
	slices.SortFunc(recs, func(a, b rec) int { return strings.Compare(a.k+"\t"+a.v, b.k+"\t"+b.v) })
	for _, r := range recs {
		if err := t.Out.Emit(r.k, r.v); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// GenCustomers emits the customers whose id number c has c % tasks ==
// its partition (tasks, its stage's task count, comes in its params), so
// each id is emitted once; every ninth id has no customer.
func GenCustomers(ctx context.Context, t *batchwork.Task) error {
	tasks, err := strconv.Atoi(t.Params["tasks"])
	if err != nil || tasks < 1 {
		return batchwork.Permanent(fmt.Errorf("params.tasks %q: want the stage's task count", t.Params["tasks"]))
	}
	for c := t.Partition; c < customers; c += tasks {
		if c%9 == 0 {
			continue
		}
		if err := t.Out.Emit(fmt.Sprintf("c%02d", c), fmt.Sprintf("Customer %02d", c)); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// Orders emits each order of its split keyed by customer_id, value
// "order_id,amount"; it reads CSV (by the header's column names) or JSON
// Lines, whichever its input's format is.
func Orders(ctx context.Context, t *batchwork.Task) error {
	return eachRecord(t, func(rec map[string]string) error {
		return t.Out.Emit(rec["customer_id"], rec["order_id"]+","+rec["amount"])
	})
}

// Customers emits each customer of its split keyed by id, value its name.
func Customers(ctx context.Context, t *batchwork.Task) error {
	return eachRecord(t, func(rec map[string]string) error {
		return t.Out.Emit(rec["id"], rec["name"])
	})
}

// eachRecord calls fn with each record of a CSV or JSON Lines split as a
// map of field to text. A field holding a tab or a newline is refused: it
// would break the shuffle's lines.
func eachRecord(t *batchwork.Task, fn func(map[string]string) error) error {
	check := func(rec map[string]string) error {
		for k, v := range rec {
			if strings.ContainsAny(v, "\t\n") {
				return fmt.Errorf("input %s: field %s holds a tab or a newline: %q", t.Source, k, v)
			}
		}
		return fn(rec)
	}
	switch t.Format {
	case "csv":
		r := csv.NewReader(t.Input)
		r.FieldsPerRecord = len(t.Header)
		for {
			row, err := r.Read()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("input %s: %w", t.Source, err)
			}
			rec := make(map[string]string, len(row))
			for i, v := range row {
				rec[t.Header[i]] = v
			}
			if err := check(rec); err != nil {
				return err
			}
		}
	case "jsonl":
		d := json.NewDecoder(t.Input)
		d.UseNumber()
		for {
			var raw map[string]any
			if err := d.Decode(&raw); errors.Is(err, io.EOF) {
				return nil
			} else if err != nil {
				return fmt.Errorf("input %s: %w", t.Source, err)
			}
			rec := make(map[string]string, len(raw))
			for k, v := range raw {
				rec[k] = fmt.Sprint(v)
			}
			if err := check(rec); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("input %s: format %q; want csv or jsonl", t.Source, t.Format)
}

// Join reads its partition of both shuffles and writes, for every order
// whose customer exists, "customer_id\tname\torder_id\tamount\n", sorted:
// the map tasks' outputs arrive in manifest order, which the output must
// not reflect. A customer id listed twice takes the first name in sorted
// order.
func Join(ctx context.Context, t *batchwork.Task) error {
	names := map[string]string{}
	orders := map[string][]string{}
	err := batchwork.TaggedRecords(t.Input, func(source, k, v string) error {
		switch source {
		case CustomersStage:
			if old, ok := names[k]; !ok || v < old {
				names[k] = v
			}
		case OrdersStage:
			orders[k] = append(orders[k], v)
		default:
			return fmt.Errorf("a record of stage %q, which this join does not read", source)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read shuffles: %w", err)
	}
	var lines []string
	for k, os := range orders {
		name, ok := names[k]
		if !ok {
			continue
		}
		for _, o := range os {
			id, amount, _ := strings.Cut(o, ",")
			lines = append(lines, k+"\t"+name+"\t"+id+"\t"+amount+"\n")
		}
	}
	slices.Sort(lines)
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString(l)
	}
	if _, err := t.Out.Write(b.Bytes()); err != nil {
		return err
	}
	return ctx.Err()
}
