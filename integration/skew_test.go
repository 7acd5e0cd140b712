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
	"github.com/batchwork/batchwork/examples/wordcount"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/google/go-cmp/cmp"
)

// A word count whose map emits every occurrence, over text where one word
// is half of the words: the reduce stage (skew: combinable) splits that
// word's partition into pieces, each summing a share of the map outputs,
// and the partition's own task sums the pieces' partial counts. The counts
// equal those counted here, each word once, and the pieces' partial
// counts are not in the job's outputs.
func TestSkewedWordCount(t *testing.T) {
	t.Parallel()
	const owner = "skewer"
	text := wordcount.HotCorpus(7, 160<<10, "hotword")
	want := map[string]int{}
	for line := range strings.SplitSeq(string(text), "\n") {
		for _, w := range wordcount.Words(line) {
			want[w]++
		}
	}
	if want["hotword"]*3 < len(strings.Fields(string(text))) {
		t.Fatalf("the hot word is %d of the words; want about half", want["hotword"])
	}
	reg := batchwork.NewRegistry()
	wordcount.Register(reg)
	e := newEnv(t, reg, envOptions{})
	e.putInput(owner, "hot/text.txt", text)
	id := e.submitAs(owner, "wc", wordcount.SkewSpec("wc", "inputs:hot/", 16<<10, 8, true, 1))
	st := e.waitJobAs(owner, id, 3*time.Minute)
	got := map[string]int{}
	for _, line := range jobLines(t, e, st) {
		w, n, _ := strings.Cut(line, "\t")
		if _, dup := got[w]; dup {
			t.Errorf("word %q counted in two outputs", w)
		}
		var c int
		fmt.Sscan(n, &c)
		got[w] = c
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("counts (-want +job):\n%s", diff)
	}
	for _, s := range st.Stages {
		if s.Name == "reduce" && s.Total <= 8 {
			t.Errorf("reduce stage: %d tasks; want the hot partition's pieces past its 8 partitions", s.Total)
		}
	}
}

// A join where one customer has half of the orders: the join stage
// (skew: join) splits that customer's partition, each piece joining a
// share of the orders with all of the partition's customers. The result
// equals DuckDB's join of the same bytes.
func TestSkewedJoinEqualsDuckDB(t *testing.T) {
	t.Parallel()
	const owner = "skewjoiner"
	dir := t.TempDir()
	var customers bytes.Buffer
	for c := range 200 {
		line, err := json.Marshal(map[string]any{"id": fmt.Sprintf("c%03d", c), "name": fmt.Sprintf("Kunde %d", c), "since": 2000 + c%25})
		if err != nil {
			t.Fatal(err)
		}
		customers.Write(append(line, '\n'))
	}
	var orders bytes.Buffer
	w := csv.NewWriter(&orders)
	w.Write([]string{"order_id", "customer_id", "amount"})
	for i := range 3000 {
		c := fmt.Sprintf("c%03d", (i*37)%230) // ids past c199 name no customer
		if i%2 == 0 {
			c = "c007" // the hot customer: half of the orders
		}
		w.Write([]string{fmt.Sprintf("o%05d", i), c, fmt.Sprintf("%d.%02d", i%700, i%100)})
	}
	w.Flush()
	ordersPath, custPath := filepath.Join(dir, "orders.csv"), filepath.Join(dir, "customers.jsonl")
	if err := os.WriteFile(ordersPath, orders.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(custPath, customers.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`import duckdb, sys
rows = duckdb.connect().execute("""
  SELECT o.customer_id, c.name, o.order_id, o.amount
  FROM read_csv('%s', header = true, all_varchar = true) o
  JOIN read_json('%s', format = 'newline_delimited', columns = {'id': 'VARCHAR', 'name': 'VARCHAR', 'since': 'BIGINT'}) c
  ON o.customer_id = c.id""").fetchall()
sys.stdout.buffer.write("".join("\t".join(r) + "\n" for r in rows).encode())
`, ordersPath, custPath)
	out, err := exec.Command("../.venv/bin/python", "-c", script).Output()
	if err != nil {
		t.Fatalf("DuckDB (make venv installs it): %v\n%s", err, out)
	}
	want := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	slices.Sort(want)

	reg := batchwork.NewRegistry()
	join.Register(reg)
	e := newEnv(t, reg, envOptions{})
	e.putInput(owner, "orders/part-0.csv", orders.Bytes())
	e.putInput(owner, "customers/all.jsonl", customers.Bytes())
	id := e.submitAs(owner, "join", join.SkewSpec("join", "inputs:orders/", "inputs:customers/", 8, 3, 1))
	st := e.waitJobAs(owner, id, 3*time.Minute)
	if diff := cmp.Diff(want, jobLines(t, e, st)); diff != "" {
		t.Errorf("joined rows (-DuckDB +job):\n%s", diff)
	}
	for _, s := range st.Stages {
		if s.Name == "join" && s.Total <= 8 {
			t.Errorf("join stage: %d tasks; want the hot customer's partition split past its 8 partitions", s.Total)
		}
	}
}
