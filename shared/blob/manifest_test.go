package blob

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/shared/domain"
)

// memBucket is an in-memory bucket with write-once puts, recording the
// order of the writes that applied.
type memBucket struct {
	mu     sync.Mutex
	objs   map[string][]byte
	puts   []string
	failAt string // a put of this key fails (once) with errPut
}

var errPut = errors.New("put failed")

func newMemBucket() *memBucket { return &memBucket{objs: map[string][]byte{}} }

func (b *memBucket) PutIfAbsent(_ context.Context, key string, body []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if key == b.failAt {
		b.failAt = ""
		return fmt.Errorf("put %s: %w", key, errPut)
	}
	if _, ok := b.objs[key]; ok {
		return fmt.Errorf("put %s: %w", key, domain.ErrExists)
	}
	b.objs[key] = slices.Clone(body)
	b.puts = append(b.puts, key)
	return nil
}

func (b *memBucket) Get(_ context.Context, key string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	body, ok := b.objs[key]
	if !ok {
		return nil, fmt.Errorf("get %s: %w", key, domain.ErrNotFound)
	}
	return body, nil
}

func outputs(n int) []domain.Output {
	out := make([]domain.Output, n)
	for i := range out {
		p, r := i/3, i%3
		out[i] = domain.Output{Stage: "map", Partition: p, Attempt: 1, Part: r, Key: OutputKey("j1", "map", p, 1, r)}
	}
	return out
}

func writeManifest(t *testing.T, b *memBucket, key string, outs []domain.Output, size int) error {
	t.Helper()
	w := NewManifestWriter(b, key, domain.Manifest{Job: "j1", Stage: "map", Bucket: "bkt", Created: "now"}, size)
	for _, o := range outs {
		if err := w.Add(context.Background(), o); err != nil {
			return err
		}
		if len(w.buf) > w.size || cap(w.buf) > 2*w.size {
			t.Fatalf("writer holds %d outputs (capacity %d), more than a page of %d", len(w.buf), cap(w.buf), w.size)
		}
	}
	return w.Close(context.Background())
}

// A manifest is written in pages of at most the page size, the manifest
// object last; one that fits a page keeps the unpaged form. Readers get
// every output back in order.
func TestManifestPages(t *testing.T) {
	t.Parallel()
	const key = "jobs/j1/manifests/map.json"
	tests := []struct {
		name      string
		n, size   int
		wantPages int
	}{
		{"no outputs", 0, 4, 0},
		{"less than a page", 3, 4, 0},
		{"exactly a page", 4, 4, 0},
		{"one more than a page", 5, 4, 2},
		{"whole pages", 12, 4, 3},
		{"the default page size", 2*ManifestPageSize + 1, 0, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newMemBucket()
			want := outputs(tt.n)
			if err := writeManifest(t, b, key, want, tt.size); err != nil {
				t.Fatal(err)
			}
			size := tt.size
			if size == 0 {
				size = ManifestPageSize
			}
			if last := b.puts[len(b.puts)-1]; last != key || len(b.puts) != tt.wantPages+1 {
				t.Errorf("writes %v, want %d pages and the manifest last", b.puts, tt.wantPages)
			}
			m, err := ReadManifest(context.Background(), b, key)
			if err != nil {
				t.Fatal(err)
			}
			if m.Len() != tt.n || len(m.Pages) != tt.wantPages || m.Job != "j1" || m.Stage != "map" || m.Bucket != "bkt" {
				t.Errorf("manifest: %d outputs, %d pages, %+v", m.Len(), len(m.Pages), m)
			}
			for i, pk := range m.Pages {
				if pk != ManifestPageKey(key, i+1) {
					t.Errorf("page %d at %s, want %s", i+1, pk, ManifestPageKey(key, i+1))
				}
				var p domain.ManifestPage
				if err := json.Unmarshal(b.objs[pk], &p); err != nil || len(p.Outputs) > size || len(p.Outputs) == 0 {
					t.Errorf("page %s: %d outputs (%v), want 1 to %d", pk, len(p.Outputs), err, size)
				}
			}
			var got []domain.Output
			if err := EachManifestOutput(context.Background(), b, m, func(o domain.Output) error {
				got = append(got, o)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" && tt.n > 0 {
				t.Errorf("outputs read back (-want +got):\n%s", diff)
			}
			// A reader of the unpaged form reads an unpaged manifest as
			// before, and cannot mistake a paged one for an empty one.
			var old domain.Manifest
			err = json.Unmarshal(b.objs[key], &old)
			if tt.wantPages == 0 && (err != nil || !strings.Contains(string(b.objs[key]), `"outputs": [`) || len(old.Outputs) != tt.n) {
				t.Errorf("an unpaged manifest read as before: %d outputs (%v), want %d: %s", len(old.Outputs), err, tt.n, b.objs[key])
			}
			if tt.wantPages > 0 && err == nil {
				t.Errorf("a paged manifest decodes as an unpaged one with %d outputs, want an error: %s", len(old.Outputs), b.objs[key])
			}
		})
	}
}

// A writer that died after some pages is repeated: the pages it finds are
// kept, the rest and the manifest are written, and the result is the
// manifest one writer alone writes.
func TestManifestRetryKeepsPages(t *testing.T) {
	t.Parallel()
	const key = "jobs/j1/manifest.json"
	outs := outputs(10)
	alone := newMemBucket()
	if err := writeManifest(t, alone, key, outs, 3); err != nil {
		t.Fatal(err)
	}
	for _, failing := range []string{ManifestPageKey(key, 1), ManifestPageKey(key, 3), ManifestPageKey(key, 4), key} {
		t.Run(failing, func(t *testing.T) {
			t.Parallel()
			b := newMemBucket()
			b.failAt = failing
			if err := writeManifest(t, b, key, outs, 3); !errors.Is(err, errPut) {
				t.Fatalf("first writer: %v, want its put to fail", err)
			}
			if _, ok := b.objs[key]; ok {
				t.Fatal("the manifest exists though a page was not written")
			}
			if err := writeManifest(t, b, key, outs, 3); err != nil {
				t.Fatalf("second writer: %v", err)
			}
			if diff := cmp.Diff(alone.objs, b.objs); diff != "" {
				t.Errorf("objects after a retry (-one writer +retried):\n%s", diff)
			}
		})
	}
}

// A writer that died after some pages is resumed: it keeps the pages it
// finds, is given back the last output written, adds only the outputs
// after it, and the result is what one writer alone writes.
func TestManifestResume(t *testing.T) {
	t.Parallel()
	const key = "jobs/j1/manifest.json"
	outs := outputs(10)
	alone := newMemBucket()
	if err := writeManifest(t, alone, key, outs, 3); err != nil {
		t.Fatal(err)
	}
	for _, failing := range []string{ManifestPageKey(key, 1), ManifestPageKey(key, 2), ManifestPageKey(key, 3), ManifestPageKey(key, 4), key} {
		t.Run(failing, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := newMemBucket()
			b.failAt = failing
			if err := writeManifest(t, b, key, outs, 3); !errors.Is(err, errPut) {
				t.Fatalf("first writer: %v, want its put to fail", err)
			}
			w := NewManifestWriter(b, key, domain.Manifest{Job: "j1", Stage: "map", Bucket: "bkt", Created: "now"}, 3)
			last, err := w.Resume(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			rest := outs
			if last != nil {
				i := slices.Index(outs, *last)
				if i < 0 {
					t.Fatalf("resumed after %+v, which was never added", *last)
				}
				rest = outs[i+1:]
			}
			if failing == ManifestPageKey(key, 1) && last != nil {
				t.Errorf("resumed after %+v with no page written", *last)
			}
			for _, o := range rest {
				if err := w.Add(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(alone.objs, b.objs); diff != "" {
				t.Errorf("objects after a resumed write (-one writer +resumed):\n%s", diff)
			}
		})
	}
}

// Readers refuse a manifest or page that does not say what a writer
// writes, rather than return part of a stage's outputs.
func TestManifestReadRefusesMismatch(t *testing.T) {
	t.Parallel()
	const key = "jobs/j1/manifests/map.json"
	tests := []struct {
		name  string
		patch func(b *memBucket)
	}{
		{"a page missing", func(b *memBucket) { delete(b.objs, ManifestPageKey(key, 2)) }},
		{"a page short", func(b *memBucket) {
			b.objs[ManifestPageKey(key, 2)] = mustJSON(domain.ManifestPage{Job: "j1", Page: 2, Outputs: outputs(3)})
		}},
		{"pages swapped", func(b *memBucket) {
			k1, k2 := ManifestPageKey(key, 1), ManifestPageKey(key, 2)
			b.objs[k1], b.objs[k2] = b.objs[k2], b.objs[k1]
		}},
		{"a total the pages cannot hold", func(b *memBucket) {
			var m map[string]any
			_ = json.Unmarshal(b.objs[key], &m)
			m["total"] = 100
			b.objs[key] = mustJSON(m)
		}},
		{"a list of outputs beside the pages", func(b *memBucket) {
			var m map[string]any
			_ = json.Unmarshal(b.objs[key], &m)
			m["outputs"] = []any{}
			b.objs[key] = mustJSON(m)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newMemBucket()
			if err := writeManifest(t, b, key, outputs(10), 4); err != nil {
				t.Fatal(err)
			}
			tt.patch(b)
			m, err := ReadManifest(context.Background(), b, key)
			if err == nil {
				err = EachManifestOutput(context.Background(), b, m, func(domain.Output) error { return nil })
			}
			if err == nil {
				t.Fatal("read succeeded")
			}
			if tt.name != "a page missing" && !errors.Is(err, ErrBadManifest) {
				t.Errorf("error %v, want ErrBadManifest", err)
			}
		})
	}
}

// Manifests written before pages (no total, no pages) read as before.
func TestManifestReadsUnpagedForm(t *testing.T) {
	t.Parallel()
	const key = "jobs/j1/manifest.json"
	b := newMemBucket()
	b.objs[key] = []byte(`{"job":"j1","bucket":"bkt","outputs":[{"stage":"s","partition":0,"attempt":1,"part":0,"key":"k0"},{"stage":"s","partition":1,"attempt":2,"part":0,"key":"k1"}],"created":"then"}`)
	m, err := ReadManifest(context.Background(), b, key)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	if err := EachManifestOutput(context.Background(), b, m, func(o domain.Output) error {
		keys = append(keys, o.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if m.Len() != 2 || !slices.Equal(keys, []string{"k0", "k1"}) {
		t.Errorf("len %d, keys %v", m.Len(), keys)
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
