package parquetout

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
	pqread "github.com/batchwork/batchwork/shared/split/parquet"
)

var everyType = []spec.Column{
	{Name: "s", Type: "string"},
	{Name: "i32", Type: "int32"},
	{Name: "i64", Type: "int64"},
	{Name: "f", Type: "float"},
	{Name: "d", Type: "double"},
	{Name: "b", Type: "boolean"},
	{Name: "ts", Type: "timestamp"},
	{Name: "day", Type: "date"},
	{Name: "small", Type: "decimal(5,2)"},
	{Name: "mid", Type: "decimal(18,3)"},
	{Name: "big", Type: "decimal(38,4)"},
	{Name: "raw", Type: "binary"},
	{Name: "tags", Type: "list<string>"},
	{Name: "opt", Type: "int64", Nullable: true},
	{Name: "optlist", Type: "list<int32>", Nullable: true},
}

// write runs records through a Writer and reads the published file back
// with Batchwork's own Parquet reader (shared/split/parquet), as JSON
// objects.
func write(t *testing.T, schema []spec.Column, opts Options, records string, chunk int) ([]map[string]any, error) {
	t.Helper()
	b := testdouble.NewBlob(nil)
	opts.TempDir = t.TempDir()
	w, err := New(schema, b, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// In chunks that cut lines anywhere, as a program's stdout arrives.
	data := []byte(records)
	for len(data) > 0 {
		n := min(chunk, len(data))
		if _, err := w.Write(data[:n]); err != nil {
			return nil, err
		}
		data = data[n:]
	}
	if err := w.Publish(context.Background(), "out/part-00000"); err != nil {
		return nil, err
	}
	return readBack(t, b, "out/part-00000"), nil
}

func readBack(t *testing.T, b *testdouble.Blob, key string) []map[string]any {
	t.Helper()
	body, ok := b.Object(key)
	if !ok {
		t.Fatalf("%s was not put", key)
	}
	rc, err := pqread.Open(context.Background(), bytes.NewReader(body), int64(len(body)), key, 0, int64(len(body)), nil)
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	defer rc.Close()
	var rows []map[string]any
	sc := bufio.NewScanner(rc)
	for sc.Scan() {
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("row %q: %v", sc.Text(), err)
		}
		rows = append(rows, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestEveryTypeRoundTrips(t *testing.T) {
	t.Parallel()
	records := `{"s":"héllo","i32":-2147483648,"i64":9007199254740993,"f":1.5,"d":-2.25e10,"b":true,"ts":"2024-03-01T12:30:45.123456+02:00","day":"1969-12-31","small":"-123.45","mid":12.5,"big":"-12345678901234567890123456789012.3456","raw":"AAH/","tags":["a","b"],"opt":7,"optlist":[1,2,3]}
{"s":"","i32":0,"i64":0,"f":0,"d":0,"b":false,"ts":"1970-01-01T00:00:00Z","day":"2024-02-29","small":0,"mid":"-0.001","big":"1","raw":"","tags":[],"opt":null,"optlist":[]}

{"s":"x","i32":1,"i64":1,"f":1,"d":1,"b":true,"ts":"1900-01-01T00:00:00Z","day":"0001-01-01","small":"999.99","mid":"999999999999999.999","big":"99999999999999999999999999999999.9999","raw":"aGk=","tags":["c"]}` // no final newline: the last record counts
	for _, chunk := range []int{1, 7, 1 << 20} {
		got, err := write(t, everyType, Options{}, records, chunk)
		if err != nil {
			t.Fatalf("chunks of %d: %v", chunk, err)
		}
		want := []map[string]any{
			{"s": "héllo", "i32": json.Number("-2147483648"), "i64": json.Number("9007199254740993"), "f": json.Number("1.5"), "d": json.Number("-2.25e+10"),
				"b": true, "ts": "2024-03-01T10:30:45.123456Z", "day": "1969-12-31", "small": "-123.45", "mid": "12.500",
				"big": "-12345678901234567890123456789012.3456", "raw": "AAH/", "tags": []any{"a", "b"}, "opt": json.Number("7"),
				"optlist": []any{json.Number("1"), json.Number("2"), json.Number("3")}},
			{"s": "", "i32": json.Number("0"), "i64": json.Number("0"), "f": json.Number("0"), "d": json.Number("0"), "b": false,
				"ts": "1970-01-01T00:00:00Z", "day": "2024-02-29", "small": "0.00", "mid": "-0.001", "big": "1.0000", "raw": "",
				"tags": []any{}, "opt": nil, "optlist": []any{}},
			{"s": "x", "i32": json.Number("1"), "i64": json.Number("1"), "f": json.Number("1"), "d": json.Number("1"), "b": true,
				"ts": "1900-01-01T00:00:00Z", "day": "0001-01-01", "small": "999.99", "mid": "999999999999999.999",
				"big": "99999999999999999999999999999999.9999", "raw": "aGk=", "tags": []any{"c"}, "opt": nil, "optlist": nil},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("chunks of %d: rows (-want +got):\n%s", chunk, diff)
		}
	}
}

// The columns keep the schema's order, not the alphabet's.
func TestColumnOrder(t *testing.T) {
	t.Parallel()
	w, err := New([]spec.Column{{Name: "zeta", Type: "string"}, {Name: "alpha", Type: "int64"}, {Name: "mid", Type: "date"}}, testdouble.NewBlob(nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range w.Schema().Fields() {
		names = append(names, f.Name())
	}
	if diff := cmp.Diff([]string{"zeta", "alpha", "mid"}, names); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
}

// Every way a record can miss the schema, with the reason it is rejected
// for; without maxBadRecords the first fails the attempt permanently,
// naming the line and the column.
func TestBadRecords(t *testing.T) {
	t.Parallel()
	schema := []spec.Column{{Name: "id", Type: "int64"}, {Name: "amt", Type: "decimal(6,2)", Nullable: true}, {Name: "ts", Type: "timestamp", Nullable: true},
		{Name: "tags", Type: "list<string>", Nullable: true}, {Name: "raw", Type: "binary", Nullable: true}, {Name: "small", Type: "int32", Nullable: true},
		{Name: "day", Type: "date", Nullable: true}, {Name: "ok", Type: "boolean", Nullable: true}}
	tests := []struct {
		record, reason string
	}{
		{`[1,2]`, `line 2: not a JSON object ([1,2])`},
		{`{"id":1} {"id":2}`, `line 2: holds more than one JSON value`},
		{`{"amt":"1.00"}`, `line 2: column "id": is missing, and the column is not nullable`},
		{`{"id":null}`, `line 2: column "id": is null, and the column is not nullable`},
		{`{"id":"1"}`, `line 2: column "id": want an int64 (an integer number), got the string "1"`},
		{`{"id":1.5}`, `line 2: column "id": want an int64 (an integer number in its range), got 1.5`},
		{`{"id":1,"small":2147483648}`, `line 2: column "small": want an int32 (an integer number in its range), got 2147483648`},
		{`{"id":1,"amt":"1.234"}`, `line 2: column "amt": want a decimal(6,2), got "1.234": more than 2 decimals`},
		{`{"id":1,"amt":12345.6}`, `line 2: column "amt": want a decimal(6,2), got "12345.6": more than 6 digits`},
		{`{"id":1,"amt":1e3}`, `line 2: column "amt": want a decimal(6,2), got "1e3": not a plain decimal number (digits, an optional sign and point, no exponent)`},
		{`{"id":1,"amt":true}`, `line 2: column "amt": want a decimal(6,2) as a string or a number, got true`},
		{`{"id":1,"ts":"2024-01-01 00:00:00"}`, `line 2: column "ts": want a timestamp as an RFC 3339 string (2006-01-02T15:04:05Z, or with an offset), got "2024-01-01 00:00:00"`},
		{`{"id":1,"ts":"2024-01-01T00:00:00.0000001Z"}`, `line 2: column "ts": "2024-01-01T00:00:00.0000001Z" has digits below a microsecond, which a TIMESTAMP(MICROS) cannot hold`},
		{`{"id":1,"day":"2024-13-01"}`, `line 2: column "day": want a date as YYYY-MM-DD, got "2024-13-01"`},
		{`{"id":1,"raw":"!!"}`, `line 2: column "raw": want binary as a base64 string, got "!!": illegal base64 data at input byte 0`},
		{`{"id":1,"ok":"yes"}`, `line 2: column "ok": want true or false, got the string "yes"`},
		{`{"id":1,"tags":"a"}`, `line 2: column "tags": want a list (an array), got the string "a"`},
		{`{"id":1,"tags":["a",null]}`, `line 2: column "tags": element 1 is null; a list's elements may not be`},
		{`{"id":1,"tags":["a",2]}`, `line 2: column "tags": element 1: want a string, got the number 2`},
		{`{"id":1,"extra":2,"another":3}`, `line 2: column "another": is not in the schema`},
	}
	for _, tt := range tests {
		records := "{\"id\":0}\n" + tt.record + "\n{\"id\":3}\n"
		// Allowed: the record is rejected, the others written.
		var rejected []string
		reject := func(rec []byte, reason string) error {
			if string(rec) != tt.record {
				t.Errorf("%s: rejected record %q, want %q", tt.record, rec, tt.record)
			}
			rejected = append(rejected, reason)
			return nil
		}
		rows, err := write(t, schema, Options{Reject: reject}, records, 5)
		if err != nil {
			t.Fatalf("%s: %v", tt.record, err)
		}
		if diff := cmp.Diff([]string{"parquet output " + tt.reason}, rejected); diff != "" {
			t.Errorf("%s: reasons (-want +got):\n%s", tt.record, diff)
		}
		if len(rows) != 2 || rows[0]["id"] != json.Number("0") || rows[1]["id"] != json.Number("3") {
			t.Errorf("%s: rows %v, want ids 0 and 3", tt.record, rows)
		}
		// Not allowed: the attempt fails for good, saying where.
		_, err = write(t, schema, Options{}, records, 5)
		if !errors.Is(err, ErrBadRecord) || !errors.Is(err, domain.ErrPermanent) || !strings.Contains(err.Error(), tt.reason) {
			t.Errorf("%s: error %v, want ErrBadRecord, permanent, saying %q", tt.record, err, tt.reason)
		}
	}
}

// A rejection past maxBadRecords fails the write with Reject's error.
func TestRejectRefusal(t *testing.T) {
	t.Parallel()
	stop := errors.New("past maxBadRecords")
	_, err := write(t, []spec.Column{{Name: "a", Type: "string"}}, Options{Reject: func([]byte, string) error { return stop }}, "{\"a\":1}\n", 100)
	if !errors.Is(err, stop) {
		t.Fatalf("error %v, want %v", err, stop)
	}
}

// Many rows make several row groups (flushed as they fill, so the writer
// holds one), and a file over SinglePutBytes goes up in parts; a store
// without reader puts gets the file from memory. Each reads back whole.
func TestRowGroupsAndUploads(t *testing.T) {
	// Not parallel: it lowers the package's sizes.
	defer func(g, s int64, p int) { RowGroupBytes, SinglePutBytes, PartBytes = g, s, p }(RowGroupBytes, SinglePutBytes, PartBytes)
	RowGroupBytes, SinglePutBytes, PartBytes = 4<<10, 16<<10, 8<<10
	var sb strings.Builder
	const n = 5000
	for i := range n {
		sb.WriteString(`{"id":` + itoa(i) + `,"name":"row ` + strings.Repeat("x", i%50) + `"}` + "\n")
	}
	schema := []spec.Column{{Name: "id", Type: "int64"}, {Name: "name", Type: "string"}}
	for _, tc := range []struct {
		name string
		blob *testdouble.Blob
	}{
		{"multipart", testdouble.NewBlob(nil, testdouble.MinPartSize(1))},
		{"no multipart", testdouble.NewBlob(nil, testdouble.Refusing(feed.ErrUnsupported, testdouble.Multipart))},
		{"no reader puts", testdouble.NewBlob(nil, testdouble.Refusing(feed.ErrUnsupported, testdouble.Multipart, testdouble.ReaderPuts))},
	} {
		w, err := New(schema, tc.blob, Options{TempDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(w, strings.NewReader(sb.String())); err != nil {
			t.Fatal(err)
		}
		if err := w.Publish(context.Background(), "k"); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		// A retried publish of the same attempt finds its object.
		if err := w.Publish(context.Background(), "k"); err != nil && !errors.Is(err, domain.ErrExists) {
			t.Logf("%s: second publish: %v", tc.name, err)
		}
		w.Close()
		body, _ := tc.blob.Object("k")
		if int64(len(body)) <= SinglePutBytes {
			t.Fatalf("%s: the file is %d bytes; the test wants one over %d", tc.name, len(body), SinglePutBytes)
		}
		rows := readBack(t, tc.blob, "k")
		if len(rows) != n || rows[n-1]["id"] != json.Number(itoa(n-1)) {
			t.Fatalf("%s: read %d rows back, want %d", tc.name, len(rows), n)
		}
		f, err := pqOpen(body)
		if err != nil {
			t.Fatal(err)
		}
		if g := len(f.RowGroups()); g < 3 {
			t.Errorf("%s: %d row groups, want several", tc.name, g)
		}
	}
}

// Publishing removes nothing until Close, which removes the file.
func TestCloseRemovesTheFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w, err := New([]spec.Column{{Name: "a", Type: "string"}}, testdouble.NewBlob(nil), Options{TempDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("{\"a\":\"x\"}\n")); err != nil {
		t.Fatal(err)
	}
	if n := countFiles(t, dir); n != 1 {
		t.Fatalf("%d files in the temporary directory, want 1", n)
	}
	w.Close()
	if n := countFiles(t, dir); n != 0 {
		t.Fatalf("%d files left after Close, want 0", n)
	}
}

// Flush takes a last line written without its newline as a record, as
// Write takes one with it: a bad one is refused at Flush (and so is
// everything after), a good one is a row of the published file, and a
// second Flush adds nothing.
func TestFlushTakesTheLastLine(t *testing.T) {
	t.Parallel()
	schema := []spec.Column{{Name: "a", Type: "int64"}}
	w, err := New(schema, testdouble.NewBlob(nil), Options{TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Write([]byte(`{"a":1}` + "\n" + `{"a":"x"}`)); err != nil {
		t.Fatalf("write before the last line ends: %v", err)
	}
	if err := w.Flush(); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), `line 2: column "a"`) {
		t.Fatalf("Flush: %v, want ErrBadRecord naming line 2 and column a", err)
	}
	if err := w.Publish(context.Background(), "k"); !errors.Is(err, ErrBadRecord) {
		t.Errorf("Publish after a refused Flush: %v, want the refusal", err)
	}

	b := testdouble.NewBlob(nil)
	w, err = New(schema, b, Options{TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Write([]byte(`{"a":1}` + "\n" + `{"a":2}`)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Publish(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	if rows := readBack(t, b, "k"); len(rows) != 2 || w.Rows() != 2 {
		t.Errorf("rows %v (Rows %d), want a=1 and a=2", rows, w.Rows())
	}
}

// After Close (the attempt's Output.Abort), a late write of an abandoned
// function, or a publish, fails with ErrClosed and opens no file: nobody
// would remove it. Also when the attempt had not written before.
func TestWritesAfterCloseOpenNoFile(t *testing.T) {
	t.Parallel()
	for _, before := range []string{"", "{\"a\":\"x\"}\n"} {
		dir := t.TempDir()
		w, err := New([]spec.Column{{Name: "a", Type: "string"}}, testdouble.NewBlob(nil), Options{TempDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(before + `{"a":"y`)); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte("\"}\n{\"a\":\"z\"}\n")); !errors.Is(err, ErrClosed) {
			t.Errorf("wrote %q first: write after Close: %v, want ErrClosed", before, err)
		}
		if err := w.Flush(); !errors.Is(err, ErrClosed) {
			t.Errorf("wrote %q first: Flush after Close: %v, want ErrClosed", before, err)
		}
		if err := w.Publish(context.Background(), "k"); !errors.Is(err, ErrClosed) {
			t.Errorf("wrote %q first: Publish after Close: %v, want ErrClosed", before, err)
		}
		if n := countFiles(t, dir); n != 0 {
			t.Errorf("wrote %q first: %d files left after Close and later writes, want 0", before, n)
		}
		if err := w.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	}
}
