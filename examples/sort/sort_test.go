package sort

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"slices"
	"testing"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/spec"
)

func TestRecords(t *testing.T) {
	t.Parallel()
	b := Generate(5, 1000)
	if len(b) != 1000*RecordLen {
		t.Fatalf("%d bytes for 1,000 records", len(b))
	}
	var sum Summary
	keys := map[string]bool{}
	for i := 0; i < len(b); i += RecordLen {
		rec := b[i : i+RecordLen]
		for _, c := range rec[:KeyLen] {
			if c < '!' || c > '~' {
				t.Fatalf("record %q: key byte %q is not printable", rec, c)
			}
		}
		if rec[KeyLen] != '\t' || rec[RecordLen-1] != '\n' || bytes.Count(rec, []byte{'\n'}) != 1 || bytes.Count(rec, []byte{'\t'}) != 1 {
			t.Fatalf("record %q: want key, tab, value, newline", rec)
		}
		keys[string(rec[:KeyLen])] = true
		sum.Records++
		sum.Checksum += uint64(crc32.ChecksumIEEE(rec))
	}
	if len(keys) < 999 {
		t.Errorf("%d distinct keys of 1,000 records", len(keys))
	}
	if got := Summarize(5, 1000); got != sum {
		t.Errorf("Summarize = %+v, want %+v", got, sum)
	}
}

// Sorted records validate to the generator's summary; out of order, cut
// short, or missing or changed ones do not.
func TestValidator(t *testing.T) {
	t.Parallel()
	recs := func(b []byte) [][]byte {
		var out [][]byte
		for i := 0; i < len(b); i += RecordLen {
			out = append(out, b[i:i+RecordLen])
		}
		return out
	}
	all := recs(Generate(0, 500))
	slices.SortFunc(all, func(a, b []byte) int { return bytes.Compare(a[:KeyLen], b[:KeyLen]) })
	want := Summarize(0, 500)
	var v Validator
	if err := v.Add(bytes.NewReader(bytes.Join(all[:200], nil)), "part 0"); err != nil {
		t.Fatal(err)
	}
	if err := v.Add(bytes.NewReader(nil), "part 1"); err != nil {
		t.Fatal(err)
	}
	if err := v.Add(bytes.NewReader(bytes.Join(all[200:], nil)), "part 2"); err != nil {
		t.Fatal(err)
	}
	if v.Summary != want {
		t.Errorf("summary %+v, want %+v", v.Summary, want)
	}

	swapped := slices.Clone(all)
	swapped[10], swapped[11] = swapped[11], swapped[10]
	v = Validator{}
	if err := v.Add(bytes.NewReader(bytes.Join(swapped, nil)), "p"); !errors.Is(err, ErrUnordered) {
		t.Errorf("two records swapped: %v, want ErrUnordered", err)
	}
	v = Validator{}
	if err := v.Add(bytes.NewReader(bytes.Join(all, nil)[:250]), "p"); !errors.Is(err, ErrBadRecord) {
		t.Errorf("a record cut short: %v, want ErrBadRecord", err)
	}
	v = Validator{}
	_ = v.Add(bytes.NewReader(bytes.Join(all[1:], nil)), "p")
	if v.Summary == want {
		t.Error("a record missing, and the summary is the generator's")
	}
}

// Gen writes its params' records; the specs are valid range shuffles.
func TestGenAndSpecs(t *testing.T) {
	t.Parallel()
	res, err := batchwork.RunTask(context.Background(), Gen, batchwork.TaskInput{Params: map[string]string{"first": "30", "records": "25000"}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(res.Parts[0], Generate(30, 25000)) {
		t.Error("Gen wrote other records than Generate")
	}
	if _, err := batchwork.RunTask(context.Background(), Gen, batchwork.TaskInput{Params: map[string]string{"first": "x"}}); err == nil {
		t.Error("Gen ran without its params")
	}
	for _, body := range [][]byte{GenSpec("g", 3, 10, 4), Spec("s", "s3://bucket/in/", 1<<20, 4)} {
		j, err := spec.Parse(body)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if !j.Stages[0].Shuffle.Ranged() {
			t.Errorf("%s: not a range shuffle", body)
		}
	}
}
