package blob

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/batchwork/batchwork/shared/domain"
)

// ManifestPageSize is how many outputs one manifest object holds: about
// 1.5 MB of JSON, so that writing or reading a manifest holds one page,
// never the 1.6 million outputs of a 100,000-task stage with 16 shuffle
// parts (261 MB of JSON when it was one object).
const ManifestPageSize = 10_000

// Putter writes an object once (If-None-Match); an existing object is
// domain.ErrExists.
type Putter interface {
	PutIfAbsent(ctx context.Context, key string, body []byte) error
}

// Getter reads a whole object of the store's bucket.
type Getter interface {
	Get(ctx context.Context, key string) ([]byte, error)
}

// ManifestWriter writes a manifest page by page as outputs are added, and
// the manifest object itself last, so a manifest that exists is whole.
// Every object is written once: a page or manifest that exists already
// was written from the same committed records by an earlier writer (a
// retry after a crash) and is kept. Pages hold no time stamp, so such a
// retry's pages are byte for byte the ones it finds.
type ManifestWriter struct {
	put   Putter
	key   string
	m     domain.Manifest
	size  int
	buf   []domain.Output
	pages []string
	total int
	// indexed: the manifest of a shuffle stage whose map tasks may have
	// written indexed objects (IndexedShuffle).
	indexed bool
}

// IndexedShuffle marks the manifest as a shuffle stage's whose map tasks
// may have written their partitions as one indexed object (shuffle.go):
// its "outputs" is then the string IndexedOutputs, as PagedOutputs is for
// pages, so that a reader of the previous release (an executor during a
// deploy), which would read such an object as partition 0 and find
// nothing for the other partitions, fails instead of computing on the
// wrong records. An unpaged list goes in "shuffleOutputs". Call it
// before Close.
func (w *ManifestWriter) IndexedShuffle() { w.indexed = true }

// NewManifestWriter starts the manifest head describes (its Outputs,
// Pages and counts are ignored) at key, in pages of pageSize outputs
// (ManifestPageSize when pageSize ≤ 0).
func NewManifestWriter(put Putter, key string, head domain.Manifest, pageSize int) *ManifestWriter {
	if pageSize <= 0 {
		pageSize = ManifestPageSize
	}
	head.Outputs, head.Pages, head.PageSize, head.Total = nil, nil, 0, 0
	return &ManifestWriter{put: put, key: key, m: head, size: pageSize}
}

// Add appends an output, writing the page it fills once the next output
// shows that the manifest needs pages at all.
func (w *ManifestWriter) Add(ctx context.Context, o domain.Output) error {
	if len(w.buf) == w.size {
		if err := w.flush(ctx); err != nil {
			return err
		}
	}
	w.buf = append(w.buf, o)
	w.total++
	return nil
}

// Resume picks up after a writer that died or ran out of time: it finds
// the pages already written (a prefix: each page is written after the one
// before it) and keeps them. It returns the last output written, after
// which the caller Adds the rest; nil if no page was written. Without it a
// manifest too large to write in one call would be started over by every
// call, and never finished. Call it before Add.
func (w *ManifestWriter) Resume(ctx context.Context, g Getter) (*domain.Output, error) {
	exists := func(n int) (bool, error) {
		_, err := g.Get(ctx, ManifestPageKey(w.key, n))
		if errors.Is(err, domain.ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	}
	// Pages 1..lo exist, page hi does not: double, then halve the gap.
	lo, hi := 0, 1
	for {
		ok, err := exists(hi)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		lo, hi = hi, 2*hi
	}
	for lo+1 < hi {
		mid := (lo + hi) / 2
		ok, err := exists(mid)
		if err != nil {
			return nil, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		return nil, nil
	}
	key := ManifestPageKey(w.key, lo)
	raw, err := g.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read manifest page %s: %w", key, err)
	}
	var p domain.ManifestPage
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("decode manifest page %s: %w", key, err)
	}
	if p.Page != lo || len(p.Outputs) == 0 || len(p.Outputs) > w.size {
		return nil, fmt.Errorf("manifest page %s: page %d with %d outputs, want page %d with 1 to %d: %w",
			key, p.Page, len(p.Outputs), lo, w.size, ErrBadManifest)
	}
	// A full page stays written. A short one is the last of the manifest,
	// which Close writes just before the manifest object: its outputs go
	// back into the page being filled, for Close to write again (finding
	// it, and keeping it).
	kept := lo
	if len(p.Outputs) < w.size {
		kept = lo - 1
		w.buf = append(w.buf[:0], p.Outputs...)
	}
	w.pages = w.pages[:0]
	for n := 1; n <= kept; n++ {
		w.pages = append(w.pages, ManifestPageKey(w.key, n))
	}
	w.total = (lo-1)*w.size + len(p.Outputs)
	last := p.Outputs[len(p.Outputs)-1]
	return &last, nil
}

// Pages is the number of pages written so far.
func (w *ManifestWriter) Pages() int { return len(w.pages) }

func (w *ManifestWriter) flush(ctx context.Context) error {
	n := len(w.pages) + 1
	key := ManifestPageKey(w.key, n)
	raw, err := json.Marshal(domain.ManifestPage{Job: w.m.Job, Stage: w.m.Stage, Page: n, Outputs: w.buf})
	if err != nil {
		return fmt.Errorf("encode manifest page %s: %w", key, err)
	}
	if err := w.put.PutIfAbsent(ctx, key, raw); err != nil && !errors.Is(err, domain.ErrExists) {
		return fmt.Errorf("write manifest page %s: %w", key, err)
	}
	w.pages = append(w.pages, key)
	w.buf = w.buf[:0]
	return nil
}

// Close writes the last page, if the manifest has pages, then the
// manifest. A manifest of up to one page holds its outputs itself, in the
// form readers of unpaged manifests know.
func (w *ManifestWriter) Close(ctx context.Context) error {
	m := w.m
	m.Total = w.total
	if len(w.pages) == 0 {
		m.Outputs = w.buf
		if m.Outputs == nil {
			m.Outputs = []domain.Output{} // "outputs": [] as before, not null
		}
	} else {
		if len(w.buf) > 0 {
			if err := w.flush(ctx); err != nil {
				return err
			}
		}
		m.Pages, m.PageSize = w.pages, w.size
	}
	var v any = m
	switch {
	case w.indexed:
		j := manifestJSON{Manifest: m, Outputs: indexedOutputsJSON, ShuffleOutputs: m.Outputs}
		j.Manifest.Outputs = nil
		v = j
	case len(m.Pages) > 0:
		v = manifestJSON{Manifest: m, Outputs: pagedOutputsJSON}
	}
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode manifest %s: %w", w.key, err)
	}
	if err := w.put.PutIfAbsent(ctx, w.key, raw); err != nil && !errors.Is(err, domain.ErrExists) {
		return fmt.Errorf("write manifest %s: %w", w.key, err)
	}
	return nil
}

// ErrBadManifest means a manifest or one of its pages does not say what
// its writer writes.
var ErrBadManifest = errors.New("malformed manifest")

// PagedOutputs is a paged manifest's "outputs": a string where a list
// was, so that a reader that does not know pages (an executor of the
// previous release during a deploy, a user's script) fails to decode the
// manifest, rather than find no outputs and compute on nothing.
const PagedOutputs = "paged: read the objects under pages"

var pagedOutputsJSON, _ = json.Marshal(PagedOutputs)

// IndexedOutputs is the "outputs" of a shuffle stage's manifest whose map
// tasks may have written indexed objects (ManifestWriter.IndexedShuffle),
// paged or not: readers that do not know indexed objects fail to read it.
const IndexedOutputs = "indexed shuffle: read the objects under pages or shuffleOutputs, each map task's partitions in one indexed object"

var indexedOutputsJSON, _ = json.Marshal(IndexedOutputs)

// manifestJSON is a manifest as stored: its "outputs" (which shadows the
// embedded field) is a list of outputs, PagedOutputs or IndexedOutputs;
// in the last case an unpaged manifest's list is ShuffleOutputs.
type manifestJSON struct {
	domain.Manifest
	Outputs        json.RawMessage `json:"outputs"`
	ShuffleOutputs []domain.Output `json:"shuffleOutputs,omitempty"`
}

// ReadManifest reads the manifest at key: with its outputs if it holds
// them, or as the index of its pages (read them with ManifestPage or
// EachManifestOutput).
func ReadManifest(ctx context.Context, g Getter, key string) (domain.Manifest, error) {
	raw, err := g.Get(ctx, key)
	if err != nil {
		return domain.Manifest{}, err
	}
	var stored manifestJSON
	if err := json.Unmarshal(raw, &stored); err != nil {
		return domain.Manifest{}, fmt.Errorf("decode manifest %s: %w", key, err)
	}
	m := stored.Manifest
	var outs string
	indexed := json.Unmarshal(stored.Outputs, &outs) == nil && outs == IndexedOutputs
	if len(m.Pages) == 0 {
		if indexed {
			m.Outputs = stored.ShuffleOutputs
			if m.Outputs == nil {
				m.Outputs = []domain.Output{}
			}
			return m, nil
		}
		if err := json.Unmarshal(stored.Outputs, &m.Outputs); err != nil {
			return domain.Manifest{}, fmt.Errorf("decode manifest %s: outputs: %w", key, err)
		}
		return m, nil
	}
	if err := json.Unmarshal(stored.Outputs, &outs); err != nil || (outs != PagedOutputs && !indexed) ||
		m.PageSize <= 0 || m.Total <= (len(m.Pages)-1)*m.PageSize || m.Total > len(m.Pages)*m.PageSize {
		return domain.Manifest{}, fmt.Errorf("manifest %s: %d pages of %d for %d outputs, outputs %.40s: %w",
			key, len(m.Pages), m.PageSize, m.Total, stored.Outputs, ErrBadManifest)
	}
	return m, nil
}

// ManifestPage reads page i (from 0) of a paged manifest m and checks it
// holds what m says: PageSize outputs, or the rest on the last page.
func ManifestPage(ctx context.Context, g Getter, m domain.Manifest, i int) ([]domain.Output, error) {
	if i < 0 || i >= len(m.Pages) {
		return nil, fmt.Errorf("manifest page %d of %d: %w", i+1, len(m.Pages), ErrBadManifest)
	}
	key := m.Pages[i]
	raw, err := g.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read manifest page %s: %w", key, err)
	}
	var p domain.ManifestPage
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("decode manifest page %s: %w", key, err)
	}
	want := min(m.PageSize, m.Total-i*m.PageSize)
	if p.Page != i+1 || len(p.Outputs) != want {
		return nil, fmt.Errorf("manifest page %s: page %d with %d outputs, want page %d with %d: %w",
			key, p.Page, len(p.Outputs), i+1, want, ErrBadManifest)
	}
	return p.Outputs, nil
}

// EachManifestOutput calls fn with every output m lists, in order, reading
// one page at a time, and stops at fn's first error.
func EachManifestOutput(ctx context.Context, g Getter, m domain.Manifest, fn func(domain.Output) error) error {
	if len(m.Pages) == 0 {
		for _, o := range m.Outputs {
			if err := fn(o); err != nil {
				return err
			}
		}
		return nil
	}
	for i := range m.Pages {
		outs, err := ManifestPage(ctx, g, m, i)
		if err != nil {
			return err
		}
		for _, o := range outs {
			if err := fn(o); err != nil {
				return err
			}
		}
	}
	return nil
}
