package testdouble

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// SetSegments splits a planned stage into segments once; a second call
// keeps the first size. Each segment starts where the stage's one chain
// left it, as dynamo.Store's does (domain.SegmentStart).
func (f *stageRecords) StageSetSegments(_ context.Context, job string, idx, size int) (domain.Stage, error) {
	return call(f.state, "StageSetSegments", func() (domain.Stage, error) {
		s, ok := f.stages[stageKey{job, idx}]
		if !ok {
			return domain.Stage{}, fmt.Errorf("get stage %s/%d: %w", job, idx, domain.ErrNotFound)
		}
		if s.st.SegmentTasks == 0 && size > 0 && s.st.Total > size {
			segs := map[int]int{}
			for k := 1; k*size < s.st.Total; k++ {
				segs[k] = domain.SegmentStart(s.st.Enqueued, s.st.Total, k, size)
			}
			s.st.SegmentTasks, s.st.Segments = size, segs
		}
		return s.st, nil
	})
}

// AdvanceSegment moves segment seg's count from from to to while the
// stage is RUNNING (segment 0's is the stage's own), and says whether it
// did. The map is replaced, never changed: stages handed out keep theirs.
func (f *stageRecords) StageAdvanceSegment(ctx context.Context, job string, idx, seg, from, to int, due time.Time) (bool, error) {
	if seg == 0 {
		return f.StageAdvanceEnqueued(ctx, job, idx, from, to, due)
	}
	return call(f.state, "StageAdvanceSegment", func() (bool, error) {
		s, ok := f.stages[stageKey{job, idx}]
		if !ok || s.st.State != sm.StageRunning {
			return false, nil
		}
		if n, ok := s.st.Segments[seg]; !ok || n != from {
			return false, nil
		}
		segs := maps.Clone(s.st.Segments)
		segs[seg] = to
		s.st.Segments = segs
		s.due = msTime(due)
		return true, nil
	})
}
