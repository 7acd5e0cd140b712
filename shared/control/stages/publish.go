package stages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/principal"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/split"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Publishing a job's outputs (spec.Job.Output). When a job's last stage
// completes, the step that ends the job (finishJob) writes the job's
// manifest, moves the job RUNNING -> PUBLISHING (publishJob: from then on
// neither a cancel nor the deadline ends it, so _SUCCESS is only ever
// written for a job that ends SUCCEEDED) and publishes the outputs the
// manifest lists into the job's output folder:
//
//  0. a check that no other job's published folder holds the folder or
//     lies in it (a claim above it, up to the owner's area, or under it;
//     checkNesting), repeated after step 1 for two jobs claiming nested
//     folders at once.
//  1. <folder>_batchwork.json, naming the job, with If-None-Match: *. It
//     claims the folder: if it exists and names another job, the job fails
//     with an error naming the folder and that job, and nothing is copied.
//  2. every output of the manifest, copied (CopyObject, with
//     If-None-Match: *) from its committed attempt's key to its final
//     name, blob.PublishedKey: <folder><stage>/part-<partition>[-<part>],
//     with .parquet after it for a stage whose output format is parquet
//     (publishedExts).
//     Only the manifest's keys are ever copied, so a published folder
//     never holds an uncommitted attempt's output.
//  3. <folder>_SUCCESS, last: a folder with it holds every output.
//
// Every step is idempotent: the step is repeated by the sweep when its
// runner died or ran out of time, and a repeat finds its own claim, skips
// the outputs already in place (it lists the folder, a page at a time, as
// it goes) and copies the rest. A failure no retry changes (access denied,
// no such bucket, any S3 4xx but throttling and conflicts:
// blob.permanentPublish) fails the job with the error; others leave it for
// the sweep, until PublishGiveUp after the stages completed.
//
// Readers: a folder with a claim and no _SUCCESS is refused as a job's
// input when planned (checkPublishedInputs).
//
// Where an owner may publish: its own outputs area of the data bucket,
// outputs/<owner key>/<path>/ (outputs:<path>/ in a spec), or
// <owner key>/<path>/ in a bucket the operator grants for outputs
// (Config.OutputBuckets). Anything else is refused at submit with a 400 on
// "output" (ResolveOutput). The roles that end jobs may write exactly
// there (infra/batchwork).

// publishCopies is how many copies run at once: a copy is one request
// that S3 serves without moving bytes through us.
const publishCopies = 16

// OutputClaim is the body of a published folder's _batchwork.json.
type OutputClaim struct {
	Job      string `json:"job"`
	Manifest string `json:"manifest"`
}

// OutputsURI is the owner's outputs area: s3://<data bucket>/outputs/<key>/.
func (s *Lifecycle) OutputsURI(owner string) string {
	return "s3://" + s.blob.Bucket() + "/" + blob.OutputsPrefix(principal.Key(owner))
}

// ResolveOutput checks sp's output folder against where owner may publish
// and rewrites outputs:<path>/ into the owner's outputs area. A refusal is
// a *spec.FieldError on "output".
func (s *Lifecycle) ResolveOutput(owner string, sp *spec.Job) error {
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

// PublishGiveUp bounds how long a job's publishing may keep failing with
// errors that look transient, counted from when its stages completed: a
// try that still fails after it, having copied nothing, fails the job
// with its error rather than keep it PUBLISHING, with no error to show,
// for ever (an output bucket in another region, a source a lifecycle rule
// archived, a KMS key the role may not use, when S3's answer is not one
// blob classifies as permanent). A try that copied something is progress
// and is always tried again.
const PublishGiveUp = 2 * time.Hour

// publishJob publishes the outputs of a job whose stages have all
// completed, listed by its manifest at manifestKey, to its output folder,
// and ends the job.
//
// Publishing is a step of the job's lifecycle (sm.JobPublishing): the job
// first moves RUNNING -> PUBLISHING, a guarded write that a cancel or the
// deadline, which act on RUNNING jobs only, cannot pass afterwards; from
// then on only the publisher ends the job: PUBLISHING -> SUCCEEDED after
// <folder>_SUCCESS is written, PUBLISHING -> FAILED on a failure no retry
// changes, without writing it. So a folder has _SUCCESS only when its job
// ends SUCCEEDED, and a cancelled or failed job never gets one: a job
// cancelled before the move is found not PUBLISHING and nothing is
// published. The step is repeated by the sweep (the last stage's entry in
// its index stays due until this returns nil), each step idempotent.
func (s *Lifecycle) publishJob(ctx context.Context, job string, sp *spec.Job, manifestKey string, completed time.Time) error {
	if err := s.store.JobStartPublishing(ctx, job, s.Now()); err != nil && !errors.Is(err, sm.ErrInvalidTransition) {
		return err
	}
	state, err := s.store.JobState(ctx, job)
	if err != nil {
		return err
	}
	if state != sm.JobPublishing {
		// Cancelled, failed or past its deadline before publishing
		// started (nothing is published), or ended by another publisher.
		s.NoteJobEnded(job, state)
		return nil
	}
	copied, err := s.publish(ctx, job, sp.Output, manifestKey, publishedExts(sp))
	var pe *PublishError
	switch {
	case err == nil:
	case errors.As(err, &pe):
	case copied == 0 && !completed.IsZero() && s.Now().Sub(completed) > PublishGiveUp:
		pe = &PublishError{Folder: sp.Output, Err: fmt.Errorf("still failing %s after the job's stages completed: %w", PublishGiveUp, err)}
	default:
		return err
	}
	if pe != nil && !s.published(ctx, job, sp.Output) {
		err := s.EndJob(ctx, job, sm.JobPublishFail, pe.Error(), "", s.Now())
		if err == nil {
			s.log.Error("job failed", "job_id", job, "reason", pe.Error())
		}
		return kernel.IgnoreInvalid(err)
	}
	err = s.EndJob(ctx, job, sm.JobPublished, "", manifestKey, s.Now())
	if err == nil {
		s.log.Info("job succeeded", "job_id", job, "manifest", manifestKey, "output", sp.Output)
	}
	return kernel.IgnoreInvalid(err)
}

// published reports whether output has its _SUCCESS, written by job: a
// concurrent try of the same job (a sweep repeating a step whose runner
// is still going) wrote it, so the job succeeded whatever this try met.
// Another job's _SUCCESS (this job found the folder claimed) is not; an
// error reading it counts as absent.
func (s *Lifecycle) published(ctx context.Context, job, output string) bool {
	pub := s.blob
	bucket, folder, err := spec.ParseS3URI(output)
	if err != nil {
		return false
	}
	got, err := ReadClaim(ctx, pub, bucket, folder+blob.SuccessName) // {"job": ...} as the claim
	return err == nil && got.Job == job
}

// publish copies the manifest's outputs into output and writes its
// _SUCCESS; it says how many outputs this try copied. A failure no retry
// changes is a *PublishError.
func (s *Lifecycle) publish(ctx context.Context, job, output, manifestKey string, exts map[string]string) (int, error) {
	pub := s.blob
	bucket, folder, err := spec.ParseS3URI(output)
	if err != nil {
		return 0, &PublishError{Folder: output, Err: err}
	}
	permanent := func(err error) error {
		if errors.Is(err, blob.ErrRefused) {
			return &PublishError{Folder: output, Err: err}
		}
		return err
	}
	if err := s.checkNesting(ctx, pub, job, output, bucket, folder); err != nil {
		return 0, permanent(err)
	}
	if err := s.claimFolder(ctx, pub, job, output, bucket, folder, manifestKey); err != nil {
		return 0, permanent(err)
	}
	if err := s.checkNesting(ctx, pub, job, output, bucket, folder); err != nil {
		return 0, permanent(err)
	}
	m, err := blob.ReadManifest(ctx, s.blob, manifestKey)
	if err != nil {
		return 0, err
	}
	c := &copier{pub: pub, bucket: bucket, folder: folder, exts: exts}
	err = blob.EachManifestOutput(ctx, s.blob, m, func(o domain.Output) error {
		if !s.ownOutput(ctx, job, o) { // reuse.go: a rerun's reused stages' too
			return &PublishError{Folder: output, Err: fmt.Errorf("manifest %s lists %q, which is not one of the job's attempt outputs", manifestKey, o.Key)}
		}
		return c.add(ctx, o)
	})
	if err == nil {
		err = c.flush(ctx)
	}
	if err != nil {
		return c.copied, permanent(err)
	}
	body, _ := json.Marshal(map[string]any{"job": job, "outputs": m.Len()})
	if err := pub.PutIfAbsentIn(ctx, bucket, folder+blob.SuccessName, body); err != nil && !errors.Is(err, domain.ErrExists) {
		return c.copied, permanent(err)
	}
	s.log.Info("outputs published", "job_id", job, "output", output, "outputs", m.Len(), "copied", c.copied)
	return c.copied, nil
}

// outputsRoot is the area of bucket that owners' published folders go
// in, for the key prefix given: outputs/<owner key>/ of the data bucket,
// <owner key>/ of an output bucket, or "" elsewhere.
func (s *Lifecycle) outputsRoot(bucket, prefix string) string {
	n := 0
	switch {
	case bucket == s.blob.Bucket() && strings.HasPrefix(prefix, blob.OutputsArea):
		n = 2
	case slices.Contains(s.cfg.OutputBuckets, bucket):
		n = 1
	default:
		return ""
	}
	root := ""
	for range n {
		i := strings.IndexByte(prefix[len(root):], '/')
		if i < 0 {
			return ""
		}
		root = prefix[:len(root)+i+1]
	}
	return root
}

// ancestorFolders are the folders strictly between root and prefix that
// hold prefix: for root "outputs/k/" and prefix "outputs/k/a/b/c", they
// are "outputs/k/a/" and "outputs/k/a/b/" (and "outputs/k/a/b/c/" is
// not, being prefix's own listing).
func ancestorFolders(root, prefix string) []string {
	var dirs []string
	for i := len(root); i < len(prefix); i++ {
		if prefix[i] == '/' && i+1 < len(prefix) {
			dirs = append(dirs, prefix[:i+1])
		}
	}
	return dirs
}

// exists reports whether bucket holds key.
func exists(ctx context.Context, pub Blob, bucket, key string) (bool, error) {
	rc, err := pub.Open(ctx, bucket, key, 0)
	if errors.Is(err, domain.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	rc.Close()
	return true, nil
}

// checkPublishedInputs refuses, as domain.ErrBadInput, an input listing
// that reads a published folder whose publishing has not finished: one
// with a claim and no _SUCCESS, listed (objs, the listing of prefix) or
// holding prefix (a claim in a folder above it, in an outputs area). Its
// outputs are being copied, or stopped part way when its job failed, so a
// reader would take part of the outputs for all of them.
func (s *Lifecycle) checkPublishedInputs(ctx context.Context, bucket, prefix string, objs []split.Object) error {
	listed := make(map[string]bool, len(objs))
	for _, o := range objs {
		if blob.IsPublishMarker(o.Key) {
			listed[o.Key] = true
		}
	}
	incomplete := func(folder string) error {
		return fmt.Errorf("%w: s3://%s/%s is a published folder whose publishing has not finished (it has %s but no %s): "+
			"its job is still publishing or failed part way, so it does not hold all of its outputs; read it once its job has succeeded",
			domain.ErrBadInput, bucket, folder, blob.ClaimName, blob.SuccessName)
	}
	for k := range listed {
		if folder, ok := strings.CutSuffix(k, blob.ClaimName); ok && !listed[folder+blob.SuccessName] {
			return incomplete(folder)
		}
	}
	root := s.outputsRoot(bucket, prefix)
	pub := s.blob
	if root == "" {
		return nil
	}
	for _, dir := range ancestorFolders(root, prefix) {
		claimed, err := exists(ctx, pub, bucket, dir+blob.ClaimName)
		if err != nil || !claimed {
			if err != nil {
				return err
			}
			continue
		}
		done, err := exists(ctx, pub, bucket, dir+blob.SuccessName)
		if err != nil {
			return err
		}
		if !done {
			return incomplete(dir)
		}
	}
	return nil
}

// checkNesting refuses, as a PublishError, an output folder that another
// job's published folder holds or that holds one: a claim
// (_batchwork.json) in a folder above it, up to the owner's area, or
// anywhere under it but its own. Either way one job's publishing would
// change a folder another job published, after its _SUCCESS. Publishing
// checks before it claims the folder (so it does not write into another
// job's folder) and again after (two jobs claiming nested folders at once
// each check after their own claim, so one of them at least sees the
// other's).
func (s *Lifecycle) checkNesting(ctx context.Context, pub Blob, job, output, bucket, folder string) error {
	other := func(key string) error {
		who := "another job"
		if c, err := ReadClaim(ctx, pub, bucket, key); err == nil && c.Job != "" {
			if c.Job == job {
				return nil
			}
			who = "job " + c.Job
		}
		return &PublishError{Folder: output, Err: fmt.Errorf("it is nested with the output folder s3://%s/%s of %s; published folders may not hold one another: name a folder outside it",
			bucket, strings.TrimSuffix(key, blob.ClaimName), who)}
	}
	if root := s.outputsRoot(bucket, folder); root != "" {
		for _, dir := range ancestorFolders(root, strings.TrimSuffix(folder, "/")) {
			claimed, err := exists(ctx, pub, bucket, dir+blob.ClaimName)
			if err != nil {
				return err
			}
			if claimed {
				if err := other(dir + blob.ClaimName); err != nil {
					return err
				}
			}
		}
	}
	for after, more := "", true; more; {
		keys, m, err := pub.ListPage(ctx, bucket, folder, after)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if k != folder+blob.ClaimName && strings.HasSuffix(k, "/"+blob.ClaimName) {
				if err := other(k); err != nil {
					return err
				}
			}
		}
		if more = m; len(keys) > 0 {
			after = keys[len(keys)-1]
		}
	}
	return nil
}

func ReadClaim(ctx context.Context, pub Blob, bucket, key string) (OutputClaim, error) {
	var got OutputClaim
	rc, err := pub.Open(ctx, bucket, key, 0)
	if err != nil {
		return got, err
	}
	defer rc.Close()
	raw, err := io.ReadAll(io.LimitReader(rc, 64<<10))
	if err != nil {
		return got, fmt.Errorf("read s3://%s/%s: %w", bucket, key, err)
	}
	err = json.Unmarshal(raw, &got)
	return got, err
}

// claimFolder writes the folder's claim, or finds its own from an earlier
// try; another job's is a PublishError.
func (s *Lifecycle) claimFolder(ctx context.Context, pub Blob, job, output, bucket, folder, manifestKey string) error {
	key := folder + blob.ClaimName
	body, _ := json.Marshal(OutputClaim{Job: job, Manifest: "s3://" + s.blob.Bucket() + "/" + manifestKey})
	err := pub.PutIfAbsentIn(ctx, bucket, key, body)
	if !errors.Is(err, domain.ErrExists) {
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
	pub            Blob
	bucket, folder string
	// exts are the name extensions of stages whose outputs are files of a
	// format (".parquet"), so tools reading the folder know them.
	exts map[string]string

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

func (c *copier) add(ctx context.Context, o domain.Output) error {
	dst := blob.PublishedKey(c.folder, o.Stage, o.Partition, o.Part) + c.exts[o.Stage]
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
			case errors.Is(err, domain.ErrExists):
				// Copied by an earlier try: the folder is this job's.
			case first == nil || errors.Is(err, blob.ErrRefused) && !errors.Is(first, blob.ErrRefused):
				first = err
			}
		}()
	}
	wg.Wait()
	return first
}

// ReadClaim reads the claim at key in bucket, an output folder's
// (blob.ClaimName): a rerun refuses a folder its original claimed.
func (s *Lifecycle) ReadClaim(ctx context.Context, bucket, key string) (OutputClaim, error) {
	return ReadClaim(ctx, s.blob, bucket, key)
}

// publishedExts are the extensions of the published names of sp's stages
// whose outputs are Parquet files. The spec is immutable, so every try
// of a publish names an output alike.
func publishedExts(sp *spec.Job) map[string]string {
	var exts map[string]string
	for _, st := range sp.Stages {
		if st.Output.IsParquet() {
			if exts == nil {
				exts = make(map[string]string)
			}
			exts[st.Name] = ".parquet"
		}
	}
	return exts
}
