package integration

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	sortex "github.com/batchwork/batchwork/examples/sort"
	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
)

// validateSort reads a sort job's outputs in partition order and checks
// them as valsort does: in key order across the outputs, and as many
// records with the same checksum as the generator's records [0, n). It
// returns the records per partition.
func validateSort(t *testing.T, e *env, id string, n uint64) []uint64 {
	t.Helper()
	st := e.waitJob(id, 2*time.Minute)
	if st.State != "SUCCEEDED" {
		t.Fatalf("job %s ended %s: %s", id, st.State, st.Error)
	}
	ctx := context.Background()
	m, err := blob.ReadManifest(ctx, e.r.Blob, st.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	var outs []domain.Output
	if err := blob.EachManifestOutput(ctx, e.r.Blob, m, func(o domain.Output) error { outs = append(outs, o); return nil }); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(outs, func(a, b domain.Output) int { return a.Partition - b.Partition })
	var v sortex.Validator
	var counts []uint64
	for _, o := range outs {
		raw, err := e.r.Blob.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		before := v.Records
		if err := v.Add(bytes.NewReader(raw), fmt.Sprintf("partition %d", o.Partition)); err != nil {
			t.Fatal(err)
		}
		counts = append(counts, v.Records-before)
	}
	if want := sortex.Summarize(0, n); v.Summary != want {
		t.Fatalf("outputs hold %d records, checksum %x; the generator's are %d, %x", v.Records, v.Checksum, want.Records, want.Checksum)
	}
	return counts
}

// The sort benchmark on the emulator, both ways: records generated into
// the range shuffle, and records read from S3 by a map stage. The
// outputs in partition order are the generated records sorted (order,
// count and checksum, as valsort checks), the partitions about equal;
// each map task wrote one sorted run, and the stage's manifest lists it.
func TestRangeSort(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	sortex.Register(reg)
	e := newEnv(t, reg, envOptions{})
	ctx := context.Background()

	const gens, perGen, reducers = 4, 5_000, 5
	genID := e.submit("sort-gen", sortex.GenSpec("sort-gen", gens, perGen, reducers))

	// 30,000 records in two objects, split into map tasks of ~256 KB.
	const n = 30_000
	data := sortex.Generate(0, n)
	e.putInput("tester", "sortin/a", data[:n/3*sortex.RecordLen])
	e.putInput("tester", "sortin/b", data[n/3*sortex.RecordLen:])
	inID := e.submit("sort-in", sortex.Spec("sort-in", e.inputsURI("tester")+"sortin/", 256<<10, reducers))

	for _, c := range []struct {
		id    string
		n     uint64
		maps  int
		stage string
	}{{genID, gens * perGen, gens, "gen"}, {inID, n, 12, "map"}} {
		counts := validateSort(t, e, c.id, c.n)
		t.Logf("job %s: records per partition %v", c.id, counts)
		share := c.n / reducers
		for p, k := range counts {
			if k < share/2 || k > share*3/2 {
				t.Errorf("job %s: partition %d holds %d records, want about %d: %v", c.id, p, k, share, counts)
			}
		}
		m, err := blob.ReadManifest(ctx, e.r.Blob, blob.StageManifestKey(c.id, c.stage))
		if err != nil {
			t.Fatal(err)
		}
		runs := 0
		err = blob.EachManifestOutput(ctx, e.r.Blob, m, func(o domain.Output) error {
			raw, err := e.r.Blob.Get(ctx, o.Key)
			if err != nil {
				return err
			}
			if o.Part != 0 || !bytes.HasPrefix(raw, []byte(blob.RunMagic)) {
				t.Errorf("map task %d's output part %d at %s is not a sorted run", o.Partition, o.Part, o.Key)
			}
			runs++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if runs < c.maps {
			t.Errorf("job %s: %d sorted runs, want one per map task (%d)", c.id, runs, c.maps)
		}
	}
}

// An exec stage's program reads a range shuffle's records on stdin in
// key order, and writes them on as they come (cat), keeping the total
// order.
func TestRangeSortExecReducer(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	sortex.Register(reg)
	dir := testdouble.Programs(t, map[string]string{"passthrough": "exec cat\n"})
	e := newEnv(t, reg, envOptions{execDir: dir})
	const gens, perGen, reducers = 3, 2_000, 4
	body := fmt.Appendf(nil, `{"name": "sort-exec", "stages": [
  {"name": "gen", "task": %q, "partitions": {"count": %d, "params": [{"first":"0","records":"%d"},{"first":"%d","records":"%d"},{"first":"%d","records":"%d"}]},
   "shuffle": {"partitions": %d, "by": "range"}},
  {"name": "sort", "exec": ["passthrough"], "after": ["gen"]}]}`,
		sortex.GenTask, gens, perGen, perGen, perGen, 2*perGen, perGen, reducers)
	id := e.submit("sort-exec", body)
	validateSort(t, e, id, gens*perGen)
}
