package skew

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
)

// Key is where a stage's skew plan is written, beside its input plan
// (blob.PlanKey; a stage name has no dot).
func Key(job, stage string) string { return fmt.Sprintf("jobs/%s/plan/%s.skew.json", job, stage) }

// Blob is what planning reads and writes: the upstream manifests, the
// first bytes of each map output (its index) and the plan.
type Blob interface {
	Bucket() string
	Get(ctx context.Context, key string) ([]byte, error)
	PutIfAbsent(ctx context.Context, key string, body []byte) error
	Open(ctx context.Context, bucket, key string, start int64) (io.ReadCloser, error)
}

// Read is stage idx's plan, as its materializer wrote it.
func Read(ctx context.Context, g blob.Getter, job string, sp *spec.Job, idx int) (Plan, error) {
	key := Key(job, sp.Stages[idx].Name)
	raw, err := g.Get(ctx, key)
	if err != nil {
		return Plan{}, fmt.Errorf("skew plan: %w", err)
	}
	var p Plan
	if err := json.Unmarshal(raw, &p); err != nil {
		return Plan{}, fmt.Errorf("decode skew plan %s: %w", key, err)
	}
	return p, nil
}

// Load is stage idx's plan: the one written, or made now from the
// manifests of the shuffles it reads (all written before the stage
// starts) and written once; a concurrent planner's, if it wrote first, is
// the same plan.
func Load(ctx context.Context, b Blob, job string, sp *spec.Job, idx int) (Plan, error) {
	if p, err := Read(ctx, b, job, sp, idx); !errors.Is(err, domain.ErrNotFound) {
		return p, err
	}
	st := sp.Stages[idx]
	var srcs []Source
	for _, s := range sp.ShuffleSources(idx) {
		src, err := sizes(ctx, b, job, sp, s)
		if err != nil {
			return Plan{}, err
		}
		srcs = append(srcs, src)
	}
	parts := sp.Stages[sp.ShuffleSources(idx)[0]].Shuffle.Partitions
	threshold, minBytes := thresholds(st.Skew)
	p, err := Make(parts, srcs, threshold, minBytes, st.Skew.Combinable)
	if err != nil {
		return Plan{}, err
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return Plan{}, err
	}
	if err := b.PutIfAbsent(ctx, Key(job, st.Name), raw); errors.Is(err, domain.ErrExists) {
		return Read(ctx, b, job, sp, idx)
	} else if err != nil {
		return Plan{}, fmt.Errorf("write skew plan: %w", err)
	}
	return p, nil
}

// headReads bounds the concurrent reads of map outputs' indexes.
const headReads = 16

// sizes is shuffle stage src's map outputs with each partition's bytes,
// read from the index at the front of each indexed object
// (blob/shuffle.go): one GET each, only as far as the index. A map task
// of the per-part layout (one object per partition, which a map task
// whose outputs outgrew its memory writes) has no index; its sizes count
// as unknown (zero), which can only make its partitions look smaller.
func sizes(ctx context.Context, b Blob, job string, sp *spec.Job, src int) (Source, error) {
	m, err := blob.ReadManifest(ctx, b, blob.StageManifestKey(job, sp.Stages[src].Name))
	if err != nil {
		return Source{}, err
	}
	parts := sp.Stages[src].Shuffle.Partitions
	out := Source{Stage: src}
	var keys []string // of indexed objects, by out.Maps' position
	var first domain.Output
	n := 0
	done := func() {
		if n == 0 {
			return
		}
		key := ""
		if blob.ShuffleIndexed(parts, n) {
			key = first.Key
		}
		out.Maps = append(out.Maps, MapOutput{Task: first.Partition})
		keys = append(keys, key)
	}
	err = blob.EachManifestOutput(ctx, b, m, func(o domain.Output) error {
		if n == 0 || o.Partition != first.Partition || o.Stage != first.Stage {
			done()
			first, n = o, 0
		}
		n++
		return nil
	})
	if err != nil {
		return Source{}, err
	}
	done()
	var (
		wg   sync.WaitGroup
		sem  = make(chan struct{}, headReads)
		mu   sync.Mutex
		ferr error
	)
	for i, key := range keys {
		if key == "" {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			offs, err := index(ctx, b, key, parts)
			if err != nil {
				mu.Lock()
				ferr = cmpErr(ferr, err)
				mu.Unlock()
				return
			}
			s := make([]int64, parts)
			for p := range parts {
				s[p] = offs[p+1] - offs[p]
			}
			out.Maps[i].Sizes = s
		}()
	}
	wg.Wait()
	return out, ferr
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// index reads the offsets at the front of the indexed object at key.
func index(ctx context.Context, b Blob, key string, parts int) ([]int64, error) {
	rc, err := b.Open(ctx, b.Bucket(), key, 0)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	head := make([]byte, blob.ShuffleHeaderLen(parts))
	if _, err := io.ReadFull(rc, head); err != nil {
		return nil, fmt.Errorf("read the index of %s: %w", key, err)
	}
	offs, ok := blob.ShuffleOffsets(head, parts)
	if !ok {
		return nil, fmt.Errorf("%s: %w", key, blob.ErrBadShuffleObject)
	}
	return offs, nil
}

// thresholds are a stage's skew's threshold and minimum size, or their
// defaults.
func thresholds(s *spec.Skew) (int, int64) {
	t, m := s.Threshold, int64(s.MinBytes)
	if t == 0 {
		t = spec.DefaultSkewThreshold
	}
	if m == 0 {
		m = int64(spec.DefaultSkewMinBytes)
	}
	return t, m
}
