package integration

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/examples/join"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/google/go-cmp/cmp"
)

// The reduce-side join on the emulator equals DuckDB's answer to the same
// join: orders under two prefixes, CSV and JSON Lines (one stage with
// inputs, each in its own format), customers as JSON Lines under a third, each shuffled by customer id into the same
// partitions, and the join stage reading both shuffles, each record tagged
// with its stage. Some orders name no customer and some customers have no
// order (an inner join drops both); names hold commas, quotes and
// non-ASCII letters, amounts CSV-quoted commas.
func TestJoinEqualsDuckDB(t *testing.T) {
	t.Parallel()
	const owner = "joiner"
	dir := t.TempDir()
	var customers bytes.Buffer
	for c := range 300 {
		if c%7 == 3 {
			continue // no such customer: its orders join nothing
		}
		line, err := json.Marshal(map[string]any{"id": fmt.Sprintf("c%03d", c), "name": fmt.Sprintf(`Kundin %d, "Zoë" Ørsted`, c), "since": 2000 + c%25})
		if err != nil {
			t.Fatal(err)
		}
		customers.Write(append(line, '\n'))
	}
	// October's orders are CSV, November's JSON Lines: one stage reads
	// both prefixes, each in its own format.
	months := []string{"2026-10", "2026-11"}
	orderFiles := make([]bytes.Buffer, len(months))
	w := csv.NewWriter(&orderFiles[0])
	w.Write([]string{"order_id", "customer_id", "amount"})
	for i := range 1500 {
		for k, m := range months {
			id, c, amount := fmt.Sprintf("o%s-%04d", m, i), fmt.Sprintf("c%03d", (i*37+k*11)%330), fmt.Sprintf("%d,%03d.%02d", i%4, i%1000, i%100)
			if k == 0 {
				w.Write([]string{id, c, amount}) // ids past c299 name no customer
				continue
			}
			line, err := json.Marshal(map[string]string{"order_id": id, "customer_id": c, "amount": amount})
			if err != nil {
				t.Fatal(err)
			}
			orderFiles[1].Write(append(line, '\n'))
		}
	}
	w.Flush()

	// DuckDB's answer, from the same bytes.
	var paths []string
	for k, ext := range []string{"csv", "jsonl"} {
		p := filepath.Join(dir, "orders-"+months[k]+"."+ext)
		if err := os.WriteFile(p, orderFiles[k].Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	custPath := filepath.Join(dir, "customers.jsonl")
	if err := os.WriteFile(custPath, customers.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`import duckdb, sys
rows = duckdb.connect().execute("""
  SELECT o.customer_id, c.name, o.order_id, o.amount
  FROM (SELECT order_id, customer_id, amount FROM read_csv('%s', header = true, all_varchar = true)
        UNION ALL
        SELECT order_id, customer_id, amount FROM read_json('%s', format = 'newline_delimited',
          columns = {'order_id': 'VARCHAR', 'customer_id': 'VARCHAR', 'amount': 'VARCHAR'})) o
  JOIN read_json('%s', format = 'newline_delimited', columns = {'id': 'VARCHAR', 'name': 'VARCHAR', 'since': 'BIGINT'}) c
  ON o.customer_id = c.id""").fetchall()
sys.stdout.buffer.write("".join("\t".join(r) + "\n" for r in rows).encode())
`, paths[0], paths[1], custPath)
	out, err := exec.Command("../.venv/bin/python", "-c", script).Output()
	if err != nil {
		t.Fatalf("DuckDB (make venv installs it): %v\n%s", err, out)
	}
	want := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	slices.Sort(want)
	if len(want) < 2000 || len(want) >= 3000 {
		t.Fatalf("DuckDB joined %d rows; the data should leave some of the 3,000 orders unmatched", len(want))
	}

	reg := batchwork.NewRegistry()
	join.Register(reg)
	e := newEnv(t, reg, envOptions{})
	e.putInput(owner, "orders/"+months[0]+"/part-0.csv", orderFiles[0].Bytes())
	e.putInput(owner, "orders/"+months[1]+"/part-0.jsonl", orderFiles[1].Bytes())
	e.putInput(owner, "customers/all.jsonl", customers.Bytes())
	id := e.submitAs(owner, "join", join.SpecInputs("join", []join.Prefix{{Prefix: "inputs:orders/2026-10/", Format: "csv"}, {Prefix: "inputs:orders/2026-11/", Format: "jsonl"}}, "inputs:customers/", 4))
	// The generated join the chaos run uses, beside it: it runs through
	// on real executors, and each customer id that has a record and
	// orders joins (ids c00..c63; every ninth has no customer).
	gen := e.submitAs(owner, "gen", join.Spec("gen", 3, 2, 3))
	st := e.waitJobAs(owner, id, 3*time.Minute)
	if diff := cmp.Diff(want, jobLines(t, e, st)); diff != "" {
		t.Errorf("joined rows (-DuckDB +job):\n%s", diff)
	}
	ids := map[string]bool{}
	for _, line := range jobLines(t, e, e.waitJobAs(owner, gen, 3*time.Minute)) {
		id, _, _ := strings.Cut(line, "\t")
		ids[id] = true
	}
	if len(ids) < 40 || ids["c00"] || ids["c09"] || !ids["c01"] {
		t.Errorf("the generated join matched customers %v; want most of c01..c63, none of c00, c09, ...", ids)
	}
	for _, s := range st.Stages {
		switch s.Name {
		case join.OrdersStage:
			// 16 KiB splits of two objects of about 45 and 90 KB.
			if s.Total < 6 || s.RecordsIn != 3000 {
				t.Errorf("orders stage: %d tasks, %d records in; want many splits of both prefixes and 3,000 records", s.Total, s.RecordsIn)
			}
		case "join":
			if s.Total != 4 {
				t.Errorf("join stage: %d tasks, want 4 (the shuffles' partitions)", s.Total)
			}
		}
	}
}
