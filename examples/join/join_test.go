package join

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/spec"
)

func TestSpec(t *testing.T) {
	sp, err := spec.Parse(Spec("j", 3, 2, 4))
	if err != nil {
		t.Fatalf("spec: %v", err)
	}
	var names []string
	for _, src := range sp.ShuffleSources(2) {
		names = append(names, sp.Stages[src].Name)
	}
	if !slices.Equal(names, []string{CustomersStage, OrdersStage}) {
		t.Fatalf("join reads the shuffles of %v, want customers and orders", names)
	}
	if got := sp.Sinks(); len(got) != 1 || sp.Stages[got[0]].Name != "join" {
		t.Fatalf("sinks %v, want [join]", got)
	}
	sp, err = spec.Parse(SpecInputs("j", []Prefix{{"inputs:orders/a/", "csv"}, {"inputs:orders/b/", "jsonl"}}, "inputs:customers/", 4))
	if err != nil {
		t.Fatalf("inputs spec: %v", err)
	}
	if n := len(sp.Stages[1].Partitions.InputList()); n != 2 || len(sp.ShuffleSources(2)) != 2 {
		t.Fatalf("orders reads %d inputs, join %d shuffles; want 2 and 2", n, len(sp.ShuffleSources(2)))
	}
}

// The generated job run stage by stage with RunTask: each join partition
// reads its part of both shuffles, tagged as an executor tags them, and
// the outputs together are the inner join of the generated orders and
// customers, the same on every run.
func TestGeneratedJoin(t *testing.T) {
	const n, m, r = 3, 2, 4
	ctx := context.Background()
	shuffle := func(fn batchwork.Func, tasks int, params map[string]string) [][]byte {
		parts := make([][]byte, r)
		for p := range tasks {
			res, err := batchwork.RunTask(ctx, fn, batchwork.TaskInput{Partition: p, Parts: r, Params: params})
			if err != nil {
				t.Fatal(err)
			}
			for q := range r {
				parts[q] = append(parts[q], res.Parts[q]...)
			}
		}
		return parts
	}
	cust := shuffle(GenCustomers, m, map[string]string{"tasks": fmt.Sprint(m)})
	ords := shuffle(GenOrders, n, nil)
	// The naive join, over every partition's records at once.
	names, want := map[string]string{}, []string(nil)
	for _, b := range cust {
		for line := range strings.Lines(string(b)) {
			k, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "\t")
			names[k] = v
		}
	}
	for _, b := range ords {
		for line := range strings.Lines(string(b)) {
			k, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "\t")
			if name, ok := names[k]; ok {
				id, amount, _ := strings.Cut(v, ",")
				want = append(want, k+"\t"+name+"\t"+id+"\t"+amount)
			}
		}
	}
	var got []string
	for q := range r {
		var in bytes.Buffer
		for src, b := range map[string][]byte{CustomersStage: cust[q], OrdersStage: ords[q]} {
			for line := range strings.Lines(string(b)) {
				in.WriteString(src + "\t" + line)
			}
		}
		res, err := batchwork.RunTask(ctx, Join, batchwork.TaskInput{Partition: q, Input: &in})
		if err != nil {
			t.Fatal(err)
		}
		out := string(res.Parts[0])
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if !slices.IsSorted(lines) {
			t.Errorf("partition %d output not sorted: %q", q, out)
		}
		if out != "" {
			got = append(got, lines...)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if len(want) == 0 || len(want) == n*ordersPerTask || !slices.Equal(got, want) {
		t.Fatalf("joined %d lines, want the %d of the naive join (some of %d orders unmatched):\n%q\n%q", len(got), len(want), n*ordersPerTask, got, want)
	}
}

// Orders and Customers read CSV by its header and JSON Lines, whichever
// their input is, and key each record by customer id.
func TestOrdersAndCustomersRead(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		fn     batchwork.Func
		in     batchwork.TaskInput
		want   string
		errSub string
	}{
		{"orders from CSV", Orders, batchwork.TaskInput{Format: "csv", Header: []string{"amount", "order_id", "customer_id"}, Input: strings.NewReader("9.50,o1,c7\n\"1,000\",o2,c8\n")},
			"c7\to1,9.50\nc8\to2,1,000\n", ""},
		{"orders from JSON Lines", Orders, batchwork.TaskInput{Format: "jsonl", Input: strings.NewReader(`{"order_id":"o1","customer_id":"c7","amount":9.50}` + "\n")},
			"c7\to1,9.50\n", ""},
		{"customers from JSON Lines", Customers, batchwork.TaskInput{Format: "jsonl", Input: strings.NewReader(`{"id":"c7","name":"Smith, \"Jo\""}` + "\n")},
			"c7\tSmith, \"Jo\"\n", ""},
		{"a tab in a field", Customers, batchwork.TaskInput{Format: "jsonl", Source: "customers", Input: strings.NewReader(`{"id":"c7","name":"a\tb"}` + "\n")},
			"", "input customers: field name holds a tab"},
		{"lines", Customers, batchwork.TaskInput{Format: "lines", Input: strings.NewReader("x\n")}, "", `format "lines"; want csv or jsonl`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := batchwork.RunTask(ctx, tt.fn, tt.in)
			if tt.errSub != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errSub) {
					t.Fatalf("error %v, want one containing %q", err, tt.errSub)
				}
				return
			}
			if err != nil || string(res.Parts[0]) != tt.want {
				t.Fatalf("got %q, %v; want %q", res.Parts[0], err, tt.want)
			}
		})
	}
}
