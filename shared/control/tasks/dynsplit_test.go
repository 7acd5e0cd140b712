package tasks

import (
	"errors"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/split"
)

// A split offer is checked against the claim and the spec before anything
// is written: a stage or claim that may not split is refused
// (ErrSplitRefused, the holder reads on), and an offer whose pieces do
// not tile the rest of the claimed split is an error naming the problem.
func TestCheckSplit(t *testing.T) {
	t.Parallel()
	in := &split.Split{Key: "k.txt", Start: 0, End: 1000, ETag: "e", Version: "v1"}
	job := func(dynamic bool, lambda string) *spec.Job {
		return &spec.Job{Stages: []spec.Stage{{Name: "s", Lambda: lambda, Partitions: &spec.Partitions{
			Input: &spec.Input{Prefix: "s3://b/p/", DynamicSplit: dynamic}}}}}
	}
	claim := kernel.Claim{Spec: job(true, ""), Task: domain.Task{Ref: domain.TaskRef{Job: "j", Stage: 0, Partition: 0}, Input: in}}
	good := SplitRequest{Input: *in, At: 400, Give: []split.Split{
		{Key: "k.txt", Start: 400, End: 700, ETag: "e", Version: "v1"}, {Key: "k.txt", Start: 700, End: 1000, ETag: "e", Version: "v1"}}}
	tests := []struct {
		name    string
		claim   func(c kernel.Claim) kernel.Claim
		req     func(r SplitRequest) SplitRequest
		refused bool
		msg     string
	}{
		{name: "a good offer"},
		{name: "dynamicSplit off", claim: func(c kernel.Claim) kernel.Claim { c.Spec = job(false, ""); return c }, refused: true, msg: "dynamicSplit is not set"},
		{name: "a lambda stage", claim: func(c kernel.Claim) kernel.Claim { c.Spec = job(true, "fn"); return c }, refused: true, msg: "lambda"},
		{name: "a speculative copy", claim: func(c kernel.Claim) kernel.Claim { c.Speculative = true; return c }, refused: true, msg: "speculative"},
		{name: "a compressed input", claim: func(c kernel.Claim) kernel.Claim {
			c.Task.Input = &split.Split{Key: "k.gz", End: 1000, ETag: "e", Version: "v1"}
			return c
		}, req: func(r SplitRequest) SplitRequest {
			r.Input.Key = "k.gz"
			for i := range r.Give {
				r.Give[i].Key = "k.gz"
			}
			return r
		}, refused: true, msg: "compressed"},
		{name: "another object", req: func(r SplitRequest) SplitRequest { r.Input.Key = "x"; return r }, msg: "not the claimed task's input"},
		{name: "another ETag", req: func(r SplitRequest) SplitRequest { r.Input.ETag = "f"; return r }, msg: "not the claimed task's input"},
		{name: "another version", req: func(r SplitRequest) SplitRequest { r.Input.Version = "v2"; return r }, msg: "not the claimed task's input"},
		{name: "a piece of another version", req: func(r SplitRequest) SplitRequest { r.Give[1].Version = ""; return r }, msg: "do not tile"},
		{name: "a cut outside the split", req: func(r SplitRequest) SplitRequest { r.At = 1000; return r }, msg: "outside the split"},
		{name: "no pieces", req: func(r SplitRequest) SplitRequest { r.Give = nil; return r }, msg: "0 pieces"},
		{name: "a gap", req: func(r SplitRequest) SplitRequest { r.Give[1].Start = 701; return r }, msg: "do not tile"},
		{name: "short of the end", req: func(r SplitRequest) SplitRequest { r.Give[1].End = 999; return r }, msg: "not at the split's end"},
		{name: "a piece of another object", req: func(r SplitRequest) SplitRequest { r.Give[0].Key = "y"; return r }, msg: "do not tile"},
		{name: "another input", req: func(r SplitRequest) SplitRequest { r.Input.Source = 1; return r }, msg: "not the claimed task's input"},
		{name: "a piece of another input", req: func(r SplitRequest) SplitRequest { r.Give[1].Source = 1; return r }, msg: "do not tile"},
		{name: "a split of input 1, which splits", claim: func(c kernel.Claim) kernel.Claim {
			c.Spec = severalInputs(false, true)
			c.Task.Input = &split.Split{Key: "k.txt", End: 1000, ETag: "e", Version: "v1", Source: 1}
			return c
		}, req: withSource(1)},
		{name: "a split of input 0, which does not split", claim: func(c kernel.Claim) kernel.Claim {
			c.Spec = severalInputs(false, true)
			return c
		}, refused: true, msg: "dynamicSplit is not set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, r := claim, good
			r.Give = append([]split.Split(nil), good.Give...)
			if tt.claim != nil {
				c = tt.claim(c)
			}
			if tt.req != nil {
				r = tt.req(r)
			}
			err := checkSplit(c, r)
			switch {
			case tt.msg == "" && err != nil:
				t.Fatalf("checkSplit: %v, want nil", err)
			case tt.msg != "" && (err == nil || !strings.Contains(err.Error(), tt.msg)):
				t.Fatalf("checkSplit: %v, want an error saying %q", err, tt.msg)
			case err != nil && errors.Is(err, ErrSplitRefused) != tt.refused:
				t.Fatalf("checkSplit: %v: refused %v, want %v", err, errors.Is(err, ErrSplitRefused), tt.refused)
			}
		})
	}
}

// severalInputs is a stage of two inputs, each splitting dynamically or
// not.
func severalInputs(first, second bool) *spec.Job {
	return &spec.Job{Stages: []spec.Stage{{Name: "s", Partitions: &spec.Partitions{Inputs: []spec.Input{
		{Prefix: "s3://b/p/", DynamicSplit: first}, {Prefix: "s3://b/q/", DynamicSplit: second}}}}}}
}

// withSource marks an offer and its pieces as of input k.
func withSource(k int) func(SplitRequest) SplitRequest {
	return func(r SplitRequest) SplitRequest {
		r.Input.Source = k
		for i := range r.Give {
			r.Give[i].Source = k
		}
		return r
	}
}
