package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/batchwork/batchwork/shared/batch"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/principal"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Publishing a job's outputs (spec.Job.Output). When a job's last stage
// completes, the step that ends the job (finishJob) writes the job's
// manifest and then, before the job is marked SUCCEEDED, publishes the
// outputs the manifest lists into the job's output folder:
//
//  1. <folder>_batchwork.json, naming the job, with If-None-Match: *. It
//     claims the folder: if it exists and names another job, the job fails
//     with an error naming the folder and that job, and nothing is copied.
//  2. every output of the manifest, copied (CopyObject, with
//     If-None-Match: *) from its committed attempt's key to its final
//     name, blob.PublishedKey: <folder><stage>/part-<partition>[-<part>].
//     Only the manifest's keys are ever copied, so a published folder
//     never holds an uncommitted attempt's output.
//  3. <folder>_SUCCESS, last: a folder with it holds every output.
//
// Every step is idempotent: the step is repeated by the sweep when its
// runner died or ran out of time, and a repeat finds its own claim, skips
// the outputs already in place (it lists the folder, a page at a time, as
// it goes) and copies the rest. A failure no retry changes (access denied,
// no such bucket) fails the job with the error; others leave it for the
// sweep.
//
// Where an owner may publish: its own outputs area of the data bucket,
// outputs/<owner key>/<path>/ (outputs:<path>/ in a spec), or
// <owner key>/<path>/ in a bucket the operator grants for outputs
// (Config.OutputBuckets). Anything else is refused at submit with a 400 on
// "output" (resolveOutput). The roles that end jobs may write exactly
// there (infra/batchwork).

// Publisher is what publishing needs of the blob store (blob.Store has
// it): conditional writes and copies into any granted bucket, reads and
// listings of it.
type Publisher interface {
	PutIfAbsentIn(ctx context.Context, bucket, key string, body []byte) error
	CopyIfAbsent(ctx context.Context, srcKey, dstBucket, dstKey string) error
	Open(ctx context.Context, bucket, key string, start int64) (io.ReadCloser, error)
	ListPage(ctx context.Context, bucket, prefix, startAfter string) ([]string, bool, error)
}

var _ Publisher = (*blob.Store)(nil)

// publishCopies is how many copies run at once: a copy is one request
// that S3 serves without moving bytes through us.
const publishCopies = 16

// OutputClaim is the body of a published folder's _batchwork.json.
type OutputClaim struct {
	Job      string `json:"job"`
	Manifest string `json:"manifest"`
}

// OutputsURI is the owner's outputs area: s3://<data bucket>/outputs/<key>/.
func (s *Service) OutputsURI(owner string) string {
	return "s3://" + s.blob.Bucket() + "/" + blob.OutputsPrefix(principal.Key(owner))
}

// resolveOutput checks sp's output folder against where owner may publish
// and rewrites outputs:<path>/ into the owner's outputs area. A refusal is
// a *spec.FieldError on "output".
func (s *Service) resolveOutput(owner string, sp *spec.Job) error {
	if sp.Output == "" {
		return nil
	}
	const field = "output"
	if path, ok := spec.OutputsPath(sp.Output); ok {
		sp.Output = s.OutputsURI(owner) + path
	}
	bucket, prefix, err := spec.ParseS3URI(sp.Output)
	if err != nil {
		return &spec.FieldError{Field: field, Message: err.Error()}
	}
	key := principal.Key(owner)
	switch {
	case bucket == s.blob.Bucket():
		area := blob.OutputsPrefix(key)
		if !strings.HasPrefix(prefix, area) || prefix == area {
			return &spec.FieldError{Field: field, Message: fmt.Sprintf("is not a folder in your outputs area (%s<path>/); write %s<path>/",
				s.OutputsURI(owner), spec.OutputsScheme)}
		}
	case slices.Contains(s.cfg.OutputBuckets, bucket):
		if !strings.HasPrefix(prefix, key+"/") || prefix == key+"/" {
			return &spec.FieldError{Field: field, Message: fmt.Sprintf("in bucket %q your outputs go in folders under your owner key: s3://%s/%s/<path>/",
				bucket, bucket, key)}
		}
	default:
		msg := fmt.Sprintf("bucket %q is not one this installation publishes outputs to; write %s<path>/ for a folder in your outputs area",
			bucket, spec.OutputsScheme)
		if len(s.cfg.OutputBuckets) > 0 {
			msg += ", or name a folder under s3://<bucket>/" + key + "/ in one the operator allows: " + strings.Join(s.cfg.OutputBuckets, ", ")
		}
		return &spec.FieldError{Field: field, Message: msg}
	}
	if len(prefix) > spec.MaxOutputFolder {
		return &spec.FieldError{Field: field, Message: fmt.Sprintf("is %d bytes of key; at most %d leave room for the names published under it",
			len(prefix), spec.MaxOutputFolder)}
	}
	return nil
}

// PublishError is a failure to publish that no retry changes; the job
// fails with it.
type PublishError struct {
	Folder string
	Err    error
}

func (e *PublishError) Error() string {
	return fmt.Sprintf("publish outputs to %s: %s", e.Folder, publicError(e.Err))
}

func (e *PublishError) Unwrap() error { return e.Err }

// publishOutputs publishes a job's outputs, listed by its manifest at
// manifestKey, to its output folder, if it has one. It reports ended when
// it failed the job (a PublishError) or found it no longer running, so the
// caller does not mark it SUCCEEDED.
func (s *Service) publishOutputs(ctx context.Context, job string, sp *spec.Job, manifestKey string) (ended bool, err error) {
	if sp.Output == "" {
		return false, nil
	}
	j, err := s.store.GetJob(ctx, job)
	if err != nil {
		return false, err
	}
	if j.State != sm.JobRunning {
		return true, nil // cancelled or failed meanwhile: nothing is published
	}
	err = s.publish(ctx, job, sp.Output, manifestKey)
	var pe *PublishError
	if !errors.As(err, &pe) {
		return false, err
	}
	if err := ignoreInvalid(s.store.EndJob(ctx, job, sm.JobFail, pe.Error(), "", s.Now())); err != nil {
		return false, err
	}
	s.log.Error("job failed", "job_id", job, "reason", pe.Error())
	return true, nil
}

func (s *Service) publish(ctx context.Context, job, output, manifestKey string) error {
	pub, ok := s.blob.(Publisher)
	if !ok {
		return &PublishError{Folder: output, Err: errors.New("this installation's blob store cannot publish")}
	}
	bucket, folder, err := spec.ParseS3URI(output)
	if err != nil {
		return &PublishError{Folder: output, Err: err}
	}
	permanent := func(err error) error {
		if errors.Is(err, blob.ErrRefused) {
			return &PublishError{Folder: output, Err: err}
		}
		return err
	}
	if err := s.claimFolder(ctx, pub, job, output, bucket, folder, manifestKey); err != nil {
		return permanent(err)
	}
	m, err := blob.ReadManifest(ctx, s.blob, manifestKey)
	if err != nil {
		return err
	}
	c := &copier{pub: pub, bucket: bucket, folder: folder}
	err = blob.EachManifestOutput(ctx, s.blob, m, func(o batch.Output) error {
		if o.Key != blob.OutputKey(job, o.Stage, o.Partition, o.Attempt, o.Part) {
			return &PublishError{Folder: output, Err: fmt.Errorf("manifest %s lists %q, which is not one of the job's attempt outputs", manifestKey, o.Key)}
		}
		return c.add(ctx, o)
	})
	if err == nil {
		err = c.flush(ctx)
	}
	if err != nil {
		return permanent(err)
	}
	body, _ := json.Marshal(map[string]any{"job": job, "outputs": m.Len()})
	if err := pub.PutIfAbsentIn(ctx, bucket, folder+blob.SuccessName, body); err != nil && !errors.Is(err, batch.ErrExists) {
		return permanent(err)
	}
	s.log.Info("outputs published", "job_id", job, "output", output, "outputs", m.Len(), "copied", c.copied)
	return nil
}

// claimFolder writes the folder's claim, or finds its own from an earlier
// try; another job's is a PublishError.
func (s *Service) claimFolder(ctx context.Context, pub Publisher, job, output, bucket, folder, manifestKey string) error {
	key := folder + blob.ClaimName
	body, _ := json.Marshal(OutputClaim{Job: job, Manifest: "s3://" + s.blob.Bucket() + "/" + manifestKey})
	err := pub.PutIfAbsentIn(ctx, bucket, key, body)
	if !errors.Is(err, batch.ErrExists) {
		return err
	}
	rc, err := pub.Open(ctx, bucket, key, 0)
	if err != nil {
		return err
	}
	defer rc.Close()
	var got OutputClaim
	raw, err := io.ReadAll(io.LimitReader(rc, 64<<10))
	if err != nil {
		return fmt.Errorf("read s3://%s/%s: %w", bucket, key, err)
	}
	if err := json.Unmarshal(raw, &got); err != nil || got.Job != job {
		other := "another job"
		if err == nil && got.Job != "" {
			other = "job " + got.Job
		}
		return &PublishError{Folder: output, Err: fmt.Errorf("the folder already holds the outputs of %s (s3://%s/%s); name another output folder", other, bucket, key)}
	}
	return nil
}

// copier copies outputs to their final names, skipping those already in
// place, publishCopies at a time.
type copier struct {
	pub            Publisher
	bucket, folder string

	// The destination's keys under the current stage's folder, listed a
	// page at a time as the manifest's outputs (in key order within a
	// stage) reach them.
	stage   string
	listed  []string
	more    bool
	after   string
	started bool

	pending []copyJob
	copied  int
}

type copyJob struct{ src, dst string }

func (c *copier) add(ctx context.Context, o batch.Output) error {
	dst := blob.PublishedKey(c.folder, o.Stage, o.Partition, o.Part)
	if o.Stage != c.stage {
		c.stage, c.listed, c.more, c.after, c.started = o.Stage, nil, false, "", false
	}
	done, err := c.exists(ctx, dst)
	if err != nil || done {
		return err
	}
	c.pending = append(c.pending, copyJob{src: o.Key, dst: dst})
	if len(c.pending) < 4*publishCopies {
		return nil
	}
	return c.flush(ctx)
}

// exists reports whether dst is in the destination listing. Outputs come
// in key order within a stage, so the listing is read forward once; one
// out of order is only copied again, which is harmless.
func (c *copier) exists(ctx context.Context, dst string) (bool, error) {
	for {
		for len(c.listed) > 0 && c.listed[0] < dst {
			c.listed = c.listed[1:]
		}
		if len(c.listed) > 0 {
			return c.listed[0] == dst, nil
		}
		if c.started && !c.more {
			return false, nil
		}
		keys, more, err := c.pub.ListPage(ctx, c.bucket, c.folder+c.stage+"/", c.after)
		if err != nil {
			return false, err
		}
		c.started, c.listed, c.more = true, keys, more
		if len(keys) > 0 {
			c.after = keys[len(keys)-1]
		}
	}
}

func (c *copier) flush(ctx context.Context) error {
	jobs := c.pending
	c.pending = nil
	var mu sync.Mutex
	var first error
	sem := make(chan struct{}, publishCopies)
	var wg sync.WaitGroup
	for _, j := range jobs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := c.pub.CopyIfAbsent(ctx, j.src, c.bucket, j.dst)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				c.copied++
			case errors.Is(err, batch.ErrExists):
				// Copied by an earlier try: the folder is this job's.
			case first == nil || errors.Is(err, blob.ErrRefused) && !errors.Is(first, blob.ErrRefused):
				first = err
			}
		}()
	}
	wg.Wait()
	return first
}
