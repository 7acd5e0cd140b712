package readside

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control/page"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// PresignTTL is how long a presigned output URL stays valid.
const PresignTTL = 15 * time.Minute

// ErrPresignUnavailable: this installation cannot presign URLs (a blob
// store that cannot answers Blob.PresignGet with it).
var ErrPresignUnavailable = errors.New("presigned URLs are not available")

// OutputsRequest asks for a page of a job's committed outputs.
type OutputsRequest struct {
	Owner, ID string
	// Stage, when set, lists that stage's committed outputs.
	Stage   string
	Presign bool
	Limit   int
	Cursor  string
}

// OutputInfo is one committed output.
type OutputInfo struct {
	domain.Output
	// URL is a presigned GET URL, when asked for.
	URL string `json:"url,omitempty"`
	// Format is the stage's output format when its objects are files of
	// one (parquet), which their published names end in (.parquet), so a
	// download can name them alike; empty for lines.
	Format string `json:"format,omitempty"`
}

// OutputList is a page of a job's committed outputs. Complete is true when
// the list is the job's manifest: the job succeeded and these are the
// outputs of its last stages. Otherwise (a running, failed or cancelled
// job, or one stage) it lists what has committed so far.
type OutputList struct {
	Job        string       `json:"job"`
	State      string       `json:"state"`
	Complete   bool         `json:"complete"`
	Bucket     string       `json:"bucket"`
	Manifest   string       `json:"manifest,omitempty"`
	Outputs    []OutputInfo `json:"outputs"`
	URLExpires *time.Time   `json:"urlExpires,omitempty"`
	NextCursor string       `json:"nextCursor,omitempty"`
}

// Outputs lists a job's committed outputs: for a succeeded job its
// manifest; for any other job (a cancelled job keeps what committed before
// the cancel) or for one stage, the outputs of its committed tasks, read
// from the task records.
func (r *Reader) Outputs(ctx context.Context, req OutputsRequest) (OutputList, error) {
	limit, err := page.CheckLimit(req.Limit)
	if err != nil {
		return OutputList{}, err
	}
	j, err := r.kernel.OwnedJob(ctx, req.Owner, req.ID)
	if err != nil {
		return OutputList{}, err
	}
	if !j.DataDeleted.IsZero() {
		return OutputList{}, &DataDeletedError{ID: j.ID, At: j.DataDeleted}
	}
	only := -1
	if req.Stage != "" {
		idx, ok := j.Spec.StageIndex(req.Stage)
		if !ok {
			return OutputList{}, &spec.FieldError{Field: "stage", Message: fmt.Sprintf("job has no stage %q", req.Stage)}
		}
		only = idx
	}
	var pre Blob
	if req.Presign {
		pre = r.blob
	}
	out := OutputList{Job: j.ID, State: string(j.State), Bucket: r.blob.Bucket(), Outputs: []OutputInfo{}}
	q := page.Query("outputs", req.Owner, req.ID, req.Stage)
	if j.State == sm.JobSucceeded && only < 0 {
		err = r.manifestPage(ctx, j, q, req.Cursor, limit, &out)
	} else {
		err = r.committedPage(ctx, j, only, q, req.Cursor, limit, &out)
	}
	if err != nil {
		return OutputList{}, err
	}
	outputFormats(j.Spec, out.Outputs)
	if pre != nil {
		exp := r.now().Add(PresignTTL).Truncate(time.Second)
		out.URLExpires = &exp
		for i := range out.Outputs {
			if out.Outputs[i].URL, err = pre.PresignGet(ctx, out.Outputs[i].Key, PresignTTL); err != nil {
				return OutputList{}, fmt.Errorf("presign %s: %w", out.Outputs[i].Key, err)
			}
		}
	}
	return out, nil
}

// outputFormats sets the format of the outputs of sp's stages that write
// Parquet.
func outputFormats(sp *spec.Job, outs []OutputInfo) {
	for i := range outs {
		if idx, ok := sp.StageIndex(outs[i].Stage); ok && sp.Stages[idx].Output.IsParquet() {
			outs[i].Format = spec.OutputParquet
		}
	}
}

// manifestPage pages through a succeeded job's manifest. Of a paged
// manifest it reads only the pages the requested range falls on (one or
// two, as a page of the API is smaller than one of a manifest).
func (r *Reader) manifestPage(ctx context.Context, j domain.Job, q, cur string, limit int, out *OutputList) error {
	from := 0
	if cur != "" {
		pos, err := page.Ints(q, cur, 1)
		if err != nil {
			return err
		}
		from = pos[0]
	}
	m, err := blob.ReadManifest(ctx, r.blob, j.Manifest)
	if err != nil {
		return err
	}
	out.Complete, out.Manifest = true, j.Manifest
	n := m.Len()
	if from < 0 || from > n {
		return &spec.FieldError{Field: "cursor", Message: "is not a cursor of this query; start again without it"}
	}
	to := min(from+limit, n)
	if len(m.Pages) == 0 {
		for _, o := range m.Outputs[from:to] {
			out.Outputs = append(out.Outputs, OutputInfo{Output: o})
		}
	}
	for i := from / max(m.PageSize, 1); len(m.Pages) > 0 && i*m.PageSize < to; i++ {
		outs, err := blob.ManifestPage(ctx, r.blob, m, i)
		if err != nil {
			return err
		}
		base := i * m.PageSize
		for k := max(from, base); k < min(to, base+len(outs)); k++ {
			out.Outputs = append(out.Outputs, OutputInfo{Output: outs[k-base]})
		}
	}
	if to < n {
		out.NextCursor = page.Encode(q, strconv.Itoa(to))
	}
	return nil
}

// committedPage lists the outputs of committed tasks, stage by stage. The
// position is the next output to list: stage, partition and part, since
// one task of a shuffle stage may have thousands of parts.
func (r *Reader) committedPage(ctx context.Context, j domain.Job, only int, q, cur string, limit int, out *OutputList) error {
	stage, part, skip := 0, -1, 0
	if only >= 0 {
		stage = only
	}
	if cur != "" {
		pos, err := page.Ints(q, cur, 3)
		if err != nil {
			return err
		}
		if pos[0] < stage || pos[0] >= len(j.Spec.Stages) || (only >= 0 && pos[0] != only) || pos[1] < 0 || pos[2] < 0 {
			return &spec.FieldError{Field: "cursor", Message: "is not a cursor of this query; start again without it"}
		}
		stage, part, skip = pos[0], pos[1]-1, pos[2]
	}
	stages, err := r.store.StageList(ctx, j.ID)
	if err != nil {
		return err
	}
	reads := 0
	for ; stage < len(stages); stage, part, skip = stage+1, -1, 0 {
		if only >= 0 && stage != only {
			break
		}
		st := stages[stage]
		name := j.Spec.Stages[stage].Name
		st.Total = listedTasks(j.Spec, stage, st.Total)
		for after := part; after+1 < st.Total; {
			if reads >= page.MaxReads {
				out.NextCursor = page.Encode(q, strconv.Itoa(stage), strconv.Itoa(after+1), "0")
				return nil
			}
			pg, err := r.store.TaskListPage(ctx, dynamo.TaskPageParams{
				Job: j.ID, Stage: stage, Total: st.Total, State: sm.TaskSucceeded, After: after,
				Limit: limit - len(out.Outputs), MaxReads: page.MaxReads - reads,
			})
			if err != nil {
				return err
			}
			reads += pg.Reads
			for _, t := range pg.Rows {
				if t.Ref.Partition >= st.Total {
					break // a skewed stage's piece (listedTasks)
				}
				first := 0
				if t.Ref.Partition == part+1 {
					first = skip
				}
				for p := first; p < t.Outputs; p++ {
					if len(out.Outputs) == limit {
						out.NextCursor = page.Encode(q, strconv.Itoa(stage), strconv.Itoa(t.Ref.Partition), strconv.Itoa(p))
						return nil
					}
					out.Outputs = append(out.Outputs, OutputInfo{Output: domain.Output{
						Stage: name, Partition: t.Ref.Partition, Attempt: t.CommittedAttempt, Part: p,
						Key: blob.OutputKey(j.ID, name, t.Ref.Partition, t.CommittedAttempt, p),
					}})
				}
			}
			after = pg.Next
			lastStage := only >= 0 || stage == len(stages)-1
			if len(out.Outputs) == limit && !(pg.Done && lastStage) {
				out.NextCursor = page.Encode(q, strconv.Itoa(stage), strconv.Itoa(after+1), "0")
				return nil
			}
		}
	}
	return nil
}

// listedTasks is how many of a stage's total tasks list outputs: all but
// a combinable skewed stage's pieces past its shuffle's partitions, whose
// partial results their partition's task reduces again (shared/skew), as
// the stage's manifest leaves them out.
func listedTasks(sp *spec.Job, idx, total int) int {
	if sk := sp.Stages[idx].Skew; sk != nil && sk.Combinable {
		if src, ok := sp.ShuffleSource(idx); ok {
			return min(total, sp.Stages[src].Shuffle.Partitions)
		}
	}
	return total
}
