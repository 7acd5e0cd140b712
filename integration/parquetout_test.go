package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/principal"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// pqoutRow is row i of partition p, as the task writes it (a JSON
// object), as DuckDB reads it back (with the query in duckDBOut), and as
// Batchwork's Parquet input reads it.
func pqoutRow(p, i int) (record, duck, batchworkRow map[string]any) {
	id := p*1000 + i
	ts := time.Date(2024, 1, 1, 0, 0, 0, 123456000, time.UTC).Add(time.Duration(i) * time.Hour)
	tsText := ts.Format(time.RFC3339Nano)
	if i%2 == 1 {
		tsText = ts.In(time.FixedZone("", 2*3600)).Format(time.RFC3339Nano) // the same instant, written with an offset
	}
	day := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, i).Format(time.DateOnly)
	amount := fmt.Sprintf("%d.%02d", i*7-300, i%100)
	if i*7-300 < 0 {
		amount = fmt.Sprintf("-%d.%02d", 300-i*7, i%100)
	}
	raw := base64.StdEncoding.EncodeToString([]byte{byte(p), byte(i), 0xff})
	tags := []any{}
	for k := range i % 3 {
		tags = append(tags, fmt.Sprintf("t%d", k))
	}
	var note any
	if i%5 != 0 {
		note = fmt.Sprintf("note %d", i)
	}
	record = map[string]any{"id": id, "name": fmt.Sprintf("row %d", id), "small": i - 50, "score": float64(i) / 4, "ratio": float32(i) / 2,
		"ok": i%2 == 0, "ts": tsText, "day": day, "amount": amount, "raw": raw, "tags": tags, "note": note}
	duck = map[string]any{"id": float64(id), "name": fmt.Sprintf("row %d", id), "small": float64(i - 50), "score": float64(i) / 4, "ratio": float64(i) / 2,
		"ok": i%2 == 0, "ts": ts.Format("2006-01-02T15:04:05.000000"), "day": day, "amount": amount, "raw": raw, "tags": tags, "note": note}
	batchworkRow = map[string]any{"id": float64(id), "name": fmt.Sprintf("row %d", id), "small": float64(i - 50), "score": float64(i) / 4, "ratio": float64(i) / 2,
		"ok": i%2 == 0, "ts": ts.Format(time.RFC3339Nano), "day": day, "amount": amount, "raw": raw, "tags": tags, "note": note}
	return record, duck, batchworkRow
}

const pqoutSchema = `[{"name":"id","type":"int64"},{"name":"name","type":"string"},{"name":"small","type":"int32"},` +
	`{"name":"score","type":"double"},{"name":"ratio","type":"float"},{"name":"ok","type":"boolean"},{"name":"ts","type":"timestamp"},` +
	`{"name":"day","type":"date"},{"name":"amount","type":"decimal(10,2)"},{"name":"raw","type":"binary"},` +
	`{"name":"tags","type":"list<string>"},{"name":"note","type":"string","nullable":true}]`

// duckDBOut reads Parquet files with DuckDB: the columns' names and types
// as DuckDB sees them, then every row as JSON, in id order, each value as
// text where JSON has no type of its own.
const duckDBOut = `
import duckdb, json, sys
con = duckdb.connect()
con.execute("SET TimeZone='UTC'")
files = sys.argv[1:]
for name, typ, *_ in con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [files]).fetchall():
    print(json.dumps({"column": name, "type": typ}))
q = """SELECT id, name, small, score, ratio, ok, strftime(ts, '%Y-%m-%dT%H:%M:%S.%f') AS ts, day::VARCHAR AS day,
       amount::VARCHAR AS amount, base64(raw) AS raw, tags, note FROM read_parquet(?) ORDER BY id"""
cur = con.execute(q, [files])
cols = [d[0] for d in cur.description]
for row in cur.fetchall():
    print(json.dumps(dict(zip(cols, row))))
`

// A stage whose output format is parquet (a Go task writing JSON records
// of every column type, one of them a bad record within maxBadRecords)
// publishes one .parquet file per partition; DuckDB reads from them the
// declared columns, in order, with the declared types, and exactly the
// rows written; and a job reading the published folder as a Parquet input
// reads them back too.
func TestParquetOutputReadByDuckDB(t *testing.T) {
	t.Parallel()
	const parts, rows = 3, 200
	reg := batchwork.NewRegistry()
	reg.Register("pqout.rows", func(ctx context.Context, t *batchwork.Task) error {
		p := t.Partition
		for i := range rows {
			rec, _, _ := pqoutRow(p, i)
			b, err := json.Marshal(rec)
			if err != nil {
				return err
			}
			if _, err := t.Out.Write(append(b, '\n')); err != nil {
				return err
			}
			if p == 1 && i == 10 {
				if _, err := t.Out.Write([]byte(`{"id":"not a number","name":"bad"}` + "\n")); err != nil {
					return err
				}
			}
		}
		return nil
	})
	reg.Register("pqout.copy", func(ctx context.Context, t *batchwork.Task) error {
		_, err := io.Copy(t.Out, t.Input)
		return err
	})
	e := newEnv(t, reg, envOptions{})
	const owner = "pqout"
	id := e.submitAs(owner, "write", fmt.Appendf(nil, `{"name":"pqout","output":"outputs:pq/","stages":[{"name":"rows","task":"pqout.rows",`+
		`"partitions":{"count":%d},"maxBadRecords":1,"output":{"format":"parquet","schema":%s}}]}`, parts, pqoutSchema))
	st := e.waitJobAs(owner, id, 2*time.Minute)
	if st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s (%s), want SUCCEEDED", st.State, st.Error)
	}
	if s := st.Stages[0]; s.BadRecords != 1 || s.RecordsOut != parts*rows+1 {
		t.Errorf("stage: %d bad records, %d records out; want 1 and %d (the lines written)", s.BadRecords, s.RecordsOut, parts*rows+1)
	}

	// The outputs list says they are Parquet files, as a download names them.
	var outs control.OutputList
	e.callJSON(owner, http.MethodGet, "/jobs/"+id+"/manifest", nil, http.StatusOK, &outs)
	if len(outs.Outputs) != parts {
		t.Errorf("%d outputs listed, want %d", len(outs.Outputs), parts)
	}
	for _, o := range outs.Outputs {
		if o.Format != spec.OutputParquet {
			t.Errorf("output %s: format %q, want parquet", o.Key, o.Format)
		}
	}

	folder := blob.OutputsPrefix(principal.Key(owner)) + "pq/"
	var files, wantKeys []string
	dir := t.TempDir()
	for p := range parts {
		key := fmt.Sprintf("%srows/part-%05d.parquet", folder, p)
		wantKeys = append(wantKeys, key)
		body, err := e.r.Blob.Get(context.Background(), key)
		if err != nil {
			t.Fatalf("published file: %v", err)
		}
		f := filepath.Join(dir, filepath.Base(key))
		if err := os.WriteFile(f, body, 0o600); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	wantKeys = append(wantKeys, folder+blob.ClaimName, folder+blob.SuccessName)
	if got := listKeys(t, e, folder); !sameSet(got, wantKeys) {
		t.Errorf("folder holds %v, want %v", got, wantKeys)
	}

	out, err := exec.Command("../.venv/bin/python", append([]string{"-c", duckDBOut}, files...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("DuckDB (make venv installs it): %v\n%s", err, out)
	}
	var columns []string
	var got []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("DuckDB printed %q: %v", line, err)
		}
		if c, ok := m["column"]; ok {
			columns = append(columns, fmt.Sprintf("%s %s", c, m["type"]))
			continue
		}
		got = append(got, m)
	}
	wantColumns := []string{"id BIGINT", "name VARCHAR", "small INTEGER", "score DOUBLE", "ratio FLOAT", "ok BOOLEAN",
		"ts TIMESTAMP WITH TIME ZONE", "day DATE", "amount DECIMAL(10,2)", "raw BLOB", "tags VARCHAR[]", "note VARCHAR"}
	if diff := cmp.Diff(wantColumns, columns); diff != "" {
		t.Errorf("columns DuckDB reads (-want +got):\n%s", diff)
	}
	var want, wantBatchwork []map[string]any
	for p := range parts {
		for i := range rows {
			_, duck, bw := pqoutRow(p, i)
			want = append(want, duck)
			wantBatchwork = append(wantBatchwork, bw)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rows DuckDB reads (-written +read):\n%s", diff)
	}

	// Batchwork reads its own Parquet back, from the published folder.
	back := e.submitAs(owner, "read", fmt.Appendf(nil, `{"name":"pqin","stages":[{"name":"copy","task":"pqout.copy",`+
		`"partitions":{"input":{"prefix":"s3://%s/%s","format":"parquet"}}}]}`, e.r.Resources.Bucket, folder+"rows/"))
	st = e.waitJobAs(owner, back, 2*time.Minute)
	var read []map[string]any
	for _, line := range jobLines(t, e, st) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		read = append(read, m)
	}
	slices.SortFunc(read, func(a, b map[string]any) int { return int(a["id"].(float64) - b["id"].(float64)) })
	if diff := cmp.Diff(wantBatchwork, read); diff != "" {
		t.Errorf("rows a parquet input reads (-written +read):\n%s", diff)
	}
}
