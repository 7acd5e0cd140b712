package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/principal"
	"github.com/batchwork/batchwork/shared/spec"
)

// Where a job's inputs may come from. The planner lists an input prefix
// with a function's role and the executor reads it with its own, so
// without a check a spec naming s3://<data bucket>/jobs/, another owner's
// uploads or any bucket the roles can read would hand one owner another's
// data. An input prefix must name one of:
//   - the submitter's own inputs area of the data bucket,
//     inputs/<owner key>/ (blob.InputsPrefix of principal.Key), written in
//     full or as inputs:<path> (spec.InputsScheme), which submit resolves
//     and records resolved;
//   - the submitter's own outputs area, outputs/<owner key>/ (folders
//     its jobs published to, stages/publish.go); a folder whose publishing has
//     not finished (a claim, no _SUCCESS) is refused when planned;
//   - a bucket the operator allows (Config.InputBuckets), whose objects
//     the operator has decided every owner may read; but in a bucket that
//     is also an output bucket (Config.OutputBuckets), where owners publish
//     to <owner key>/..., only the submitter's own folder <owner key>/.
//
// A job's own area, jobs/<id>/..., is never an input, not even of its
// owner: it holds every attempt's outputs, failed and fenced ones
// included, so a listing of it reads records twice. A job that feeds
// another names an output folder (spec "output"), which holds exactly the
// committed outputs, and the next job reads that.
//
// The roles are scoped to match: they read the data bucket's jobs/ and
// inputs/ areas and the allowed buckets only (infra/batchwork).

// Identity is who the caller is to Batchwork and where its inputs go.
type Identity struct {
	// Owner is the caller's owner (an IAM principal ARN, or a role's).
	Owner string `json:"owner"`
	// OwnerKey is the owner's key in storage (principal.Key).
	OwnerKey string `json:"ownerKey"`
	// Inputs is the caller's inputs area, s3://<data bucket>/inputs/<key>/:
	// upload there and name it in a spec, or write inputs:<path>.
	Inputs string `json:"inputs"`
	// InputBuckets are the other buckets a spec may read inputs from.
	InputBuckets []string `json:"inputBuckets"`
	// Endpoint is the S3 endpoint to upload through when it is not AWS's
	// (the local runner on an emulator); empty on AWS.
	Endpoint string `json:"endpoint,omitempty"`
}

// WhoAmI returns the caller's identity and inputs area.
func (s *Admitter) WhoAmI(_ context.Context, owner string) (Identity, error) {
	if err := CheckOwner(owner); err != nil {
		return Identity{}, err
	}
	buckets := s.cfg.InputBuckets
	if buckets == nil {
		buckets = []string{}
	}
	return Identity{
		Owner: owner, OwnerKey: principal.Key(owner), Inputs: s.InputsURI(owner),
		InputBuckets: buckets, Endpoint: s.cfg.InputsEndpoint,
	}, nil
}

// InputsURI is the owner's inputs area: s3://<data bucket>/inputs/<key>/.
func (s *Admitter) InputsURI(owner string) string {
	return "s3://" + s.blob.Bucket() + "/" + blob.InputsPrefix(principal.Key(owner))
}

// ParseInputBuckets reads the operator's list of input buckets: names
// separated by commas or whitespace; empty is none. A bad name is an error
// naming it.
func ParseInputBuckets(s string) ([]string, error) {
	var out []string
	for _, name := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		if b, _, err := spec.ParseS3URI("s3://" + name); err != nil || b != name {
			return nil, fmt.Errorf("bucket %q must be 3 to 63 characters of a-z, 0-9, '.' and '-'", name)
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

// resolveInputs checks every input prefix of sp against where owner may
// read (see above) and rewrites each inputs:<path> prefix into the
// owner's inputs area. A refusal is a *spec.FieldError on the prefix.
func (s *Admitter) resolveInputs(ctx context.Context, owner string, sp *spec.Job) error {
	for i := range sp.Stages {
		st := &sp.Stages[i]
		for k, in := range st.Partitions.InputList() {
			field := fmt.Sprintf("stages[%d].partitions.inputs[%d].prefix", i, k)
			if st.Partitions.Input != nil {
				field = fmt.Sprintf("stages[%d].partitions.input.prefix", i)
			}
			if err := s.resolveInput(ctx, owner, st.Name, field, in); err != nil {
				return err
			}
		}
	}
	return nil
}

// resolveInput is resolveInputs for one input prefix, named field in the
// spec.
func (s *Admitter) resolveInput(ctx context.Context, owner, stage, field string, in *spec.Input) error {
	if path, ok := spec.InputsPath(in.Prefix); ok {
		in.Prefix = s.InputsURI(owner) + path
	}
	bucket, prefix, err := spec.ParseS3URI(in.Prefix)
	if err != nil {
		return &spec.FieldError{Field: field, Message: err.Error()}
	}
	if bucket != s.blob.Bucket() {
		if !slices.Contains(s.cfg.InputBuckets, bucket) {
			return &spec.FieldError{Field: field, Message: s.notAllowed(bucket, owner)}
		}
		if key := principal.Key(owner); slices.Contains(s.cfg.OutputBuckets, bucket) && !strings.HasPrefix(prefix, key+"/") {
			// Owners publish here to <owner key>/...: reads are held
			// to the submitter's folder, as writes are (resolveOutput).
			return &spec.FieldError{Field: field, Message: fmt.Sprintf("bucket %q holds the folders owners publish to; you may read only yours, under s3://%s/%s/",
				bucket, bucket, key)}
		}
		return nil
	}
	var fe *spec.FieldError
	if err := s.checkDataPrefix(ctx, owner, field, prefix); errors.As(err, &fe) {
		return fe
	} else if err != nil {
		return fmt.Errorf("check input of stage %s: %w", stage, err)
	}
	return nil
}

func (s *Admitter) notAllowed(bucket, owner string) string {
	msg := fmt.Sprintf("bucket %q is not one this installation reads inputs from; upload your inputs to %s (or write %s<path>)",
		bucket, s.InputsURI(owner), spec.InputsScheme)
	if len(s.cfg.InputBuckets) > 0 {
		msg += ", or name one of the buckets the operator allows: " + strings.Join(s.cfg.InputBuckets, ", ")
	}
	return msg
}

// checkDataPrefix checks a prefix of the data bucket: within the owner's
// inputs area or outputs area.
func (s *Admitter) checkDataPrefix(_ context.Context, owner, field, prefix string) error {
	if strings.HasPrefix(prefix, blob.InputsPrefix(principal.Key(owner))) ||
		strings.HasPrefix(prefix, blob.OutputsPrefix(principal.Key(owner))) { // published outputs (stages/publish.go)
		return nil
	}
	if prefix == "" {
		return &spec.FieldError{Field: field, Message: fmt.Sprintf("names the whole data bucket; name your inputs area (%s, or %s<path>) or a folder of your outputs area (%s<path>/)",
			s.InputsURI(owner), spec.InputsScheme, s.stages.OutputsURI(owner))}
	}
	if strings.HasPrefix(prefix, blob.JobsArea) || strings.HasPrefix(blob.JobsArea, prefix) {
		return &spec.FieldError{Field: field, Message: fmt.Sprintf("reads a job's working area (jobs/), which holds every attempt's outputs, failed ones included; "+
			"to read a job's outputs, give that job an output folder (\"output\": \"%s<path>/\") and name the folder here (%s<path>/)",
			spec.OutputsScheme, s.stages.OutputsURI(owner))}
	}
	return &spec.FieldError{Field: field, Message: fmt.Sprintf("is outside your inputs area (%s) and your outputs area (%s); upload inputs there, or write %s<path>",
		s.InputsURI(owner), s.stages.OutputsURI(owner), spec.InputsScheme)}
}
