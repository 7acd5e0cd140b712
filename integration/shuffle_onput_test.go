package integration

import (
	"bufio"
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/batchwork/batchwork/examples/wordcount"
	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/internal/iamrec"
	"github.com/batchwork/batchwork/shared/awsconf"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/split"
)

// The one-PUT shuffle on the emulator: word count with 64 reducers. Each
// map task writes its 64 shuffle partitions as one indexed object with
// one PutObject (counted by the SDK request counter the bench uses),
// commits one output, and the stage's manifest lists one output per map
// task; the reducers read their slices with ranged GETs, and the counts
// are exactly the corpus's.
func TestShuffleOnePutPerMapTask(t *testing.T) {
	t.Parallel()
	const reducers, splitSize = 64, 16 << 10
	reg := batchwork.NewRegistry()
	wordcount.Register(reg)
	e := newEnv(t, reg, envOptions{noRun: true})
	ctx := context.Background()

	// The executor's S3 requests, and only its, are counted.
	var counter awsconf.Counter
	counted := e.cfg.Copy()
	counter.Install(&counted)
	store := blob.New(s3.NewFromConfig(counted, awsconf.S3Options(counted)), e.r.Resources.Bucket)
	r := &executor.Runner{CP: e.r.Service, Blob: store, Registry: executor.PublicRegistry(reg),
		Log: newLogCounter().logger(), HeartbeatEvery: time.Hour}

	corpus := wordcount.Corpus(7, 150_000)
	e.putInput("tester", "wc64/corpus.txt", corpus)
	maps := int(split.Count([]split.Object{{Key: "corpus.txt", Size: int64(len(corpus))}}, splitSize))
	id := submitTo(t, e.r.Service, "wc64", string(wordcount.Spec("wc64", "inputs:wc64/", splitSize, reducers)))
	workAs(t, e, r, iamrec.FnExecutor)
	js := wantSucceeded(t, e.r.Service, id)

	counts, total := counter.Snapshot()
	puts := counts["S3.PutObject"]
	t.Logf("%d map tasks, %d reducers: executor S3 requests %v (%d in all)", maps, reducers, counts, total)
	// Every reduce task writes its one output; every map task one object.
	if want := maps + reducers; puts != want {
		t.Errorf("%d PutObject requests, want %d: one per map task (%d) and one per reduce task (%d), not %d per map task",
			puts, want, maps, reducers, reducers)
	}
	for _, op := range []string{"S3.CreateMultipartUpload", "S3.UploadPart", "S3.CompleteMultipartUpload"} {
		if counts[op] != 0 {
			t.Errorf("%d %s requests, want none: the objects are small", counts[op], op)
		}
	}
	// A reducer reads each map's slice with at most one ranged GET (the
	// objects fit in the first GET's read-ahead; once an executor holds a
	// map's index, an empty slice costs none), and the manifest once per
	// executor.
	if gets := counts["S3.GetObject"]; gets > maps+maps*reducers+2 {
		t.Errorf("%d GetObject requests, want at most %d: the map inputs, one per (map, reducer) and the manifest",
			gets, maps+maps*reducers+2)
	}

	// The stage manifest lists one output per map task, part 0, which is
	// the attempt's only object.
	m, err := blob.ReadManifest(ctx, e.r.Blob, blob.StageManifestKey(id, "map"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Len() != maps {
		t.Fatalf("map manifest lists %d outputs, want one per map task (%d)", m.Len(), maps)
	}
	err = blob.EachManifestOutput(ctx, e.r.Blob, m, func(o domain.Output) error {
		objs, err := e.r.Blob.List(ctx, e.r.Resources.Bucket, blob.AttemptPrefix(id, "map", o.Partition, o.Attempt))
		if err != nil {
			return err
		}
		if o.Part != 0 || len(objs) != 1 || objs[0].Key != o.Key {
			t.Errorf("map task %d: manifest lists part %d at %s; its attempt holds %v; want part 0, its only object", o.Partition, o.Part, o.Key, objs)
		}
		raw, err := e.r.Blob.Get(ctx, o.Key)
		if err != nil {
			return err
		}
		if !bytes.HasPrefix(raw, []byte(blob.ShuffleMagic)) {
			t.Errorf("map task %d's object %s is not indexed", o.Partition, o.Key)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// The result: every word's count, as the corpus has it.
	want := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(corpus))
	for sc.Scan() {
		for _, w := range wordcount.Words(sc.Text()) {
			want[w]++
		}
	}
	jm, err := blob.ReadManifest(ctx, e.r.Blob, js.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if jm.Len() != reducers {
		t.Fatalf("job manifest lists %d outputs, want %d", jm.Len(), reducers)
	}
	got := map[string]int{}
	err = blob.EachManifestOutput(ctx, e.r.Blob, jm, func(o domain.Output) error {
		raw, err := e.r.Blob.Get(ctx, o.Key)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
			if line == "" {
				continue
			}
			w, n, _ := strings.Cut(line, "\t")
			c, err := strconv.Atoi(n)
			if err != nil {
				t.Errorf("%s: line %q", o.Key, line)
			}
			if _, dup := got[w]; dup {
				t.Errorf("%q counted by two reducers", w)
			}
			got[w] = c
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("%d distinct words counted, want %d", len(got), len(want))
	}
	for w, n := range want {
		if got[w] != n {
			t.Errorf("%q counted %d times, want %d", w, got[w], n)
		}
	}
	// Records out are counted as emitted: the reduce stage read as many
	// as the map stage wrote.
	st, err := e.r.Service.Status(ctx, "tester", id)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Stages) != 2 || st.Stages[0].RecordsOut == 0 || st.Stages[0].RecordsOut != st.Stages[1].RecordsIn ||
		st.Stages[1].RecordsOut != int64(len(want)) {
		t.Errorf("records: map out %d, reduce in %d, reduce out %d; want map out = reduce in > 0, reduce out %d (distinct words)",
			st.Stages[0].RecordsOut, st.Stages[1].RecordsIn, st.Stages[1].RecordsOut, len(want))
	}
}
