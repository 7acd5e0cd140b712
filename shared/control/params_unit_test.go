package control

import (
	"errors"
	"testing"

	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/principal"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/google/go-cmp/cmp"
)

// A submission's run parameters are resolved into the stored spec and are
// part of what its idempotency key stands for: the
// same key with the same values is the same job, with other values (even
// of a parameter no field names) a conflict.
func TestSubmitParams(t *testing.T) {
	t.Parallel()
	r := newUnitRig(t)
	body := []byte(`{"name":"p","lease":"10s","params":{"date":null,"tag":"x"},` +
		`"stages":[{"name":"s","task":"work","partitions":{"input":{"prefix":"inputs:logs/${params.date}/"}}}]}`)
	submit := func(key string, params map[string]string) (SubmitResult, error) {
		return r.svc.Submit(r.ctx, SubmitRequest{Owner: "alice", IdempotencyKey: key, Spec: body, Params: params})
	}
	first, err := submit("k", map[string]string{"date": "2026-03-01"})
	if err != nil || !first.Created {
		t.Fatalf("submit: %+v, %v", first, err)
	}
	want := "s3://" + testdouble.DefaultBucket + "/" + blob.InputsPrefix(principal.Key("alice")) + "logs/2026-03-01/"
	j, err := r.store.JobGet(r.ctx, first.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if got := j.Spec.Stages[0].Partitions.Input.Prefix; got != want {
		t.Errorf("stored prefix %q, want %q", got, want)
	}
	// The status's params and input are checked on the emulator
	// (integration/params_test.go): the double has no stage stats.
	if diff := cmp.Diff(map[string]string{"date": "2026-03-01", "tag": "x"}, j.Spec.RunParams()); diff != "" {
		t.Errorf("stored params (-want +got):\n%s", diff)
	}

	cases := []struct {
		name   string
		params map[string]string
		// conflict: ErrIdempotencyConflict; else the first job again.
		conflict bool
	}{
		{name: "same values", params: map[string]string{"date": "2026-03-01"}},
		{name: "the default given", params: map[string]string{"date": "2026-03-01", "tag": "x"}},
		{name: "another date", params: map[string]string{"date": "2026-03-02"}, conflict: true},
		{name: "another value of a parameter no field names", params: map[string]string{"date": "2026-03-01", "tag": "y"}, conflict: true},
	}
	for _, c := range cases {
		res, err := submit("k", c.params)
		switch {
		case c.conflict && !errors.Is(err, domain.ErrIdempotencyConflict):
			t.Errorf("%s: %+v, %v; want an idempotency conflict", c.name, res, err)
		case !c.conflict && (err != nil || res.Created || res.JobID != first.JobID):
			t.Errorf("%s: %+v, %v; want job %s again", c.name, res, err, first.JobID)
		}
	}

	// Nothing is written for a refused submission, and the error names
	// the field.
	refusals := []struct {
		name   string
		params map[string]string
		field  string
	}{
		{name: "required unset", params: nil, field: "params.date"},
		{name: "undeclared name", params: map[string]string{"date": "d", "day": "d"}, field: "param"},
	}
	for _, c := range refusals {
		_, err := submit("k-"+c.name, c.params)
		var ve *spec.ValidationError
		if !errors.As(err, &ve) || ve.Errors[0].Field != c.field {
			t.Errorf("%s: %v, want a validation error on %s", c.name, err, c.field)
		}
		if _, found, err := r.store.JobByIdemKey(r.ctx, "alice", "k-"+c.name); err != nil || found {
			t.Errorf("%s: a job was recorded (%v, %v)", c.name, found, err)
		}
	}
}
