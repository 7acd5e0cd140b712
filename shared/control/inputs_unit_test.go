package control

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/principal"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// An input prefix names the submitter's own inputs area of the data bucket
// (in full, or as inputs:<path>, which is recorded resolved), one of the
// submitter's own jobs, or a bucket the operator allows; anything else is
// refused at submit with an error on the prefix's field, and nothing is
// written.
func TestInputPrefixesAreScopedToTheOwner(t *testing.T) {
	t.Parallel()
	const allowed = "corp-data"
	alice := "s3://" + testdouble.DefaultBucket + "/" + blob.InputsPrefix(principal.Key("alice"))
	bob := "s3://" + testdouble.DefaultBucket + "/" + blob.InputsPrefix(principal.Key("bob"))
	oneInput := func(prefix string) string {
		return fmt.Sprintf(`{"name":"in","lease":"10s","stages":[{"name":"s","task":"work","partitions":{"input":{"prefix":%q}}}]}`, prefix)
	}
	cases := []struct {
		name, spec string
		// want is the prefix recorded in the job's spec; "" when refused.
		want string
		// field and msg are the refusal's field and a part of its message.
		field, msg string
	}{
		{name: "own inputs area", spec: oneInput(alice + "corpus/"), want: alice + "corpus/"},
		{name: "own inputs area, whole", spec: oneInput(alice), want: alice},
		{name: "shorthand", spec: oneInput("inputs:corpus/"), want: alice + "corpus/"},
		{name: "shorthand, whole area", spec: oneInput("inputs:"), want: alice},
		{name: "allowed bucket", spec: oneInput("s3://" + allowed + "/data/"), want: "s3://" + allowed + "/data/"},
		{name: "allowed bucket, whole", spec: oneInput("s3://" + allowed), want: "s3://" + allowed},

		{name: "another owner's inputs area", spec: oneInput(bob + "corpus/"),
			field: "stages[0].partitions.input.prefix", msg: "outside your inputs area"},
		{name: "every owner's inputs", spec: oneInput("s3://" + testdouble.DefaultBucket + "/inputs/"),
			field: "stages[0].partitions.input.prefix", msg: "outside your inputs area"},
		{name: "own key without its slash", spec: oneInput(strings.TrimSuffix(alice, "/")),
			field: "stages[0].partitions.input.prefix", msg: "outside your inputs area"},
		{name: "another prefix of the data bucket", spec: oneInput("s3://" + testdouble.DefaultBucket + "/uploads/"),
			field: "stages[0].partitions.input.prefix", msg: "outside your inputs area"},
		{name: "the whole data bucket", spec: oneInput("s3://" + testdouble.DefaultBucket),
			field: "stages[0].partitions.input.prefix", msg: "names the whole data bucket"},
		{name: "the job area", spec: oneInput("s3://" + testdouble.DefaultBucket + "/jobs/"),
			field: "stages[0].partitions.input.prefix", msg: "reads a job's working area (jobs/)"},
		{name: "part of the job area's name", spec: oneInput("s3://" + testdouble.DefaultBucket + "/jo"),
			field: "stages[0].partitions.input.prefix", msg: "reads a job's working area (jobs/)"},
		{name: "another owner's job", spec: oneInput("s3://" + testdouble.DefaultBucket + "/jobs/j00000000000000000000/out/"),
			field: "stages[0].partitions.input.prefix", msg: "reads a job's working area (jobs/)"},
		{name: "another owner's outputs area", spec: oneInput("s3://" + testdouble.DefaultBucket + "/" + blob.OutputsPrefix(principal.Key("bob")) + "wc/"),
			field: "stages[0].partitions.input.prefix", msg: "outside your inputs area"},
		{name: "a bucket not allowed", spec: oneInput("s3://elsewhere/data/"),
			field: "stages[0].partitions.input.prefix", msg: `bucket "elsewhere" is not one this installation reads inputs from`},
		{name: "a bucket whose name extends an allowed one", spec: oneInput("s3://" + allowed + "-2/data/"),
			field: "stages[0].partitions.input.prefix", msg: `bucket "corp-data-2" is not one`},
		{name: "the second stage's prefix", spec: fmt.Sprintf(`{"name":"in","lease":"10s","stages":[`+
			`{"name":"a","task":"work","partitions":{"input":{"prefix":"inputs:a/"}}},`+
			`{"name":"b","task":"work","partitions":{"input":{"prefix":%q}}}]}`, bob),
			field: "stages[1].partitions.input.prefix", msg: "outside your inputs area"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newUnitRig(t, func(cfg *Config) { cfg.InputBuckets = []string{allowed} })
			res, err := r.svc.Submit(r.ctx, SubmitRequest{Owner: "alice", IdempotencyKey: "k", Spec: []byte(c.spec)})
			if c.want == "" {
				var fe *spec.FieldError
				if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(fe.Message, c.msg) {
					t.Fatalf("submit: %v, want a field error on %s containing %q", err, c.field, c.msg)
				}
				if n := r.store.JobItems(); n != 0 {
					t.Fatalf("%d records written for a refused spec", n)
				}
				return
			}
			if err != nil {
				t.Fatalf("submit: %v", err)
			}
			j, err := r.store.JobGet(r.ctx, res.JobID)
			if err != nil {
				t.Fatal(err)
			}
			if got := j.Spec.Stages[0].Partitions.Input.Prefix; got != c.want {
				t.Fatalf("recorded prefix %q, want %q", got, c.want)
			}
			if j.SpecHash != j.Spec.Hash() {
				t.Fatalf("spec hash %s is not the recorded spec's (%s)", j.SpecHash, j.Spec.Hash())
			}
		})
	}
}

// A shorthand resolves per owner: the same spec and key from two owners
// reads each owner's own inputs, and a repeated submission is the same
// job.
func TestInputShorthandResolvesPerOwner(t *testing.T) {
	t.Parallel()
	r := newUnitRig(t)
	body := []byte(`{"name":"in","lease":"10s","stages":[{"name":"s","task":"work","partitions":{"input":{"prefix":"inputs:corpus/"}}}]}`)
	jobs := map[string]string{}
	for _, owner := range []string{"alice", "bob", "alice"} {
		res, err := r.svc.Submit(r.ctx, SubmitRequest{Owner: owner, IdempotencyKey: "same", Spec: body})
		if err != nil {
			t.Fatalf("submit as %s: %v", owner, err)
		}
		if prev, ok := jobs[owner]; ok && (prev != res.JobID || res.Created) {
			t.Fatalf("%s's repeated submission: %+v, want job %s again", owner, res, prev)
		}
		jobs[owner] = res.JobID
		j, err := r.store.JobGet(r.ctx, res.JobID)
		if err != nil {
			t.Fatal(err)
		}
		want := "s3://" + testdouble.DefaultBucket + "/" + blob.InputsPrefix(principal.Key(owner)) + "corpus/"
		if got := j.Spec.Stages[0].Partitions.Input.Prefix; got != want {
			t.Fatalf("%s's job reads %q, want %q", owner, got, want)
		}
	}
}

// The operator's list of input buckets is checked when it is read: a bad
// name is an error naming it.
func TestParseInputBuckets(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "", want: nil},
		{in: "corp-data", want: []string{"corp-data"}},
		{in: " corp-data, logs.example.com\traw-2 ", want: []string{"corp-data", "logs.example.com", "raw-2"}},
		{in: "corp-data,corp-data", want: []string{"corp-data"}},
		{in: "Corp", wantErr: `bucket "Corp" must be 3 to 63 characters`},
		{in: "ok-bucket,s3://x", wantErr: `bucket "s3://x"`},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseInputBuckets(c.in)
			switch {
			case c.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("ParseInputBuckets(%q) = %v, %v; want an error containing %q", c.in, got, err, c.wantErr)
				}
			case err != nil || strings.Join(got, ",") != strings.Join(c.want, ","):
				t.Fatalf("ParseInputBuckets(%q) = %v, %v; want %v", c.in, got, err, c.want)
			}
		})
	}
}

// The spec's bound on an inputs: path leaves room for the inputs area's
// own prefix, so a resolved prefix is never longer than an S3 key.
func TestInputsPathFitsAKey(t *testing.T) {
	t.Parallel()
	if got, want := len(blob.InputsPrefix(principal.Key("any owner"))), spec.InputsAreaPrefixBytes; got != want {
		t.Fatalf("inputs area prefix is %d bytes, spec.InputsAreaPrefixBytes %d", got, want)
	}
}

// A job may read a folder of its own outputs area as input. A folder whose
// publishing has not finished (claimed, some outputs copied, no _SUCCESS:
// a publish in progress or one that failed part way) is not read as if it
// were complete: planning refuses it, failing the job naming the folder,
// whether the prefix names the folder or a folder inside it.
func TestIncompletePublishedFolderIsNotReadAsInput(t *testing.T) {
	t.Parallel()
	r, pb := newPublishRig(t)
	folder := blob.OutputsPrefix(principal.Key("tester")) + "wc/"
	pb.Put(testdouble.DefaultBucket, folder+blob.ClaimName, []byte(`{"job":"jA"}`))
	pb.Put(testdouble.DefaultBucket, folder+"reduce/part-00000", []byte("a\t1\n"))
	// part-00001 is not copied yet, and there is no _SUCCESS.
	spec := fmt.Sprintf(`{"name":"in","lease":"10s","stages":[{"name":"s","task":"work","partitions":{"input":{"prefix":%q}}}]}`,
		"s3://"+testdouble.DefaultBucket+"/"+folder)
	res, err := r.svc.Submit(r.ctx, SubmitRequest{Owner: "tester", IdempotencyKey: "k", Spec: []byte(spec)})
	if err != nil {
		return // refused at submit: fine
	}
	r.sweep()
	j := r.job(res.JobID)
	st := r.stage(res.JobID, 0)
	if j.State == sm.JobRunning && st.Total > 0 {
		t.Fatalf("a job reading an incomplete published folder (no %s) was planned into %d task(s) over a partial output",
			blob.SuccessName, st.Total)
	}
	if j.State != sm.JobFailed || !strings.Contains(j.Error, folder) || !strings.Contains(j.Error, "publishing has not finished") {
		t.Fatalf("job %s (%q), want FAILED naming the folder %s", j.State, j.Error, folder)
	}
	// A prefix inside the folder: its claim is above the listing.
	spec = fmt.Sprintf(`{"name":"in","lease":"10s","stages":[{"name":"s","task":"work","partitions":{"input":{"prefix":%q}}}]}`,
		"s3://"+testdouble.DefaultBucket+"/"+folder+"reduce/")
	res, err = r.svc.Submit(r.ctx, SubmitRequest{Owner: "tester", IdempotencyKey: "k2", Spec: []byte(spec)})
	if err != nil {
		t.Fatal(err)
	}
	r.sweep()
	if j := r.job(res.JobID); j.State != sm.JobFailed || !strings.Contains(j.Error, folder) {
		t.Fatalf("job reading inside the folder: %s (%q), want FAILED naming %s", j.State, j.Error, folder)
	}
	// Once published, it reads.
	pb.Put(testdouble.DefaultBucket, folder+blob.SuccessName, []byte(`{}`))
	res, err = r.svc.Submit(r.ctx, SubmitRequest{Owner: "tester", IdempotencyKey: "k3", Spec: []byte(spec)})
	if err != nil {
		t.Fatal(err)
	}
	r.sweep()
	if j, st := r.job(res.JobID), r.stage(res.JobID, 0); j.State != sm.JobRunning || st.Total != 1 {
		t.Fatalf("job reading a published folder: %s (%q) with %d tasks, want RUNNING with 1", j.State, j.Error, st.Total)
	}
}

// A bucket that is both an output bucket and an input bucket (how an
// operator lets jobs read published folders of an output bucket) is read
// only under the submitter's own key, as it is written: otherwise any
// owner would read every other owner's published folders
// (s3://<bucket>/<their key>/...).
func TestOutputBucketFoldersAreOwnerScopedForReads(t *testing.T) {
	t.Parallel()
	const shared = "corp-results"
	r, _ := newPublishRig(t, func(cfg *Config) {
		cfg.OutputBuckets = []string{shared}
		cfg.InputBuckets = []string{shared}
	})
	// tester publishes to its folder of the shared bucket.
	theirs := "s3://" + shared + "/" + principal.Key("tester") + "/wc/"
	if _, err := r.svc.Submit(r.ctx, SubmitRequest{Owner: "tester", IdempotencyKey: "pub",
		Spec: []byte(oneStage(1, 1, fmt.Sprintf(`,"output":%q`, theirs)))}); err != nil {
		t.Fatalf("tester's publishing job: %v", err)
	}
	// bob reads it.
	spec := fmt.Sprintf(`{"name":"in","lease":"10s","stages":[{"name":"s","task":"work","partitions":{"input":{"prefix":%q}}}]}`, theirs)
	if _, err := r.svc.Submit(r.ctx, SubmitRequest{Owner: "bob", IdempotencyKey: "steal", Spec: []byte(spec)}); err == nil {
		t.Fatalf("bob's job reading tester's published folder %s was accepted", theirs)
	}
	// tester reads its own.
	if _, err := r.svc.Submit(r.ctx, SubmitRequest{Owner: "tester", IdempotencyKey: "mine", Spec: []byte(spec)}); err != nil {
		t.Fatalf("tester's job reading its own published folder: %v", err)
	}
}

// A job that reads another job's outputs never sees uncommitted attempts.
// A published folder holds only committed outputs; a job's own area
// (jobs/<id>/...) holds every attempt's, a failed or fenced attempt's part
// files next to the committed attempt's, so it is refused as an input at
// submit, even of its owner, with a 400 pointing at output folders.
func TestOwnJobAreaIsNotAnInput(t *testing.T) {
	t.Parallel()
	r, _ := newPublishRig(t)
	a := r.submit(oneStage(1, 2, ""))
	first := r.claim(taskRef(a, 0, 0))
	r.output(first, 1) // attempt 1 writes, then fails
	if _, err := r.svc.Fail(r.ctx, first, FailParams{Cause: "boom"}); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(time.Minute)
	r.commit(r.claim(taskRef(a, 0, 0)), 1)
	if st := r.job(a).State; st != sm.JobSucceeded {
		t.Fatalf("job A %s", st)
	}
	sp := fmt.Sprintf(`{"name":"in","lease":"10s","stages":[{"name":"s","task":"work","partitions":{"input":{"prefix":%q}}}]}`,
		"s3://"+testdouble.DefaultBucket+"/jobs/"+a+"/out/")
	res, err := r.svc.Submit(r.ctx, SubmitRequest{Owner: "tester", IdempotencyKey: "b", Spec: []byte(sp)})
	var fe *spec.FieldError
	if errors.As(err, &fe) && fe.Field == "stages[0].partitions.input.prefix" && strings.Contains(fe.Message, "output folder") {
		return
	}
	if err != nil {
		t.Fatalf("submit: %v, want a 400 on the prefix pointing at output folders", err)
	}
	b := res.JobID
	var keys []string
	for p := range r.stage(b, 0).Total {
		keys = append(keys, r.task(taskRef(b, 0, p)).Input.Key)
	}
	for _, k := range keys {
		if strings.Contains(k, "/a1/") {
			t.Fatalf("job B reads job A's failed attempt 1 (%s); its tasks read %v", k, keys)
		}
	}
}
