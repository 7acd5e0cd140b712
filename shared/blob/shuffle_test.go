package blob

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/batchwork/batchwork/shared/domain"
)

// A shuffle stage's manifest marked IndexedShuffle reads back with every
// output, paged or not, and a reader of the previous release, which reads
// an unpaged manifest's "outputs" as a list and a paged one's as
// PagedOutputs, fails on it instead of reading indexed objects as one
// partition each.
func TestIndexedShuffleManifest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		outputs, pageSize, pages int
	}{{0, 4, 0}, {3, 4, 0}, {4, 4, 0}, {9, 4, 3}} {
		t.Run(fmt.Sprintf("%d outputs in pages of %d", tc.outputs, tc.pageSize), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			const key = "jobs/j1/manifests/map.json"
			b := newMemBucket()
			w := NewManifestWriter(b, key, domain.Manifest{Job: "j1", Stage: "map", Bucket: "bkt", Created: "now"}, tc.pageSize)
			w.IndexedShuffle()
			want := make([]domain.Output, tc.outputs) // one per map task
			for p := range want {
				want[p] = domain.Output{Stage: "map", Partition: p, Attempt: 1, Key: OutputKey("j1", "map", p, 1, 0)}
				if err := w.Add(ctx, want[p]); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			m, err := ReadManifest(ctx, b, key)
			if err != nil {
				t.Fatal(err)
			}
			var got []domain.Output
			if err := EachManifestOutput(ctx, b, m, func(o domain.Output) error { got = append(got, o); return nil }); err != nil {
				t.Fatal(err)
			}
			if len(m.Pages) != tc.pages || m.Len() != tc.outputs || !slices.Equal(got, want) {
				t.Errorf("%d pages, len %d, outputs %v; want %d pages, %v", len(m.Pages), m.Len(), got, tc.pages, want)
			}
			// The previous release's reader.
			raw := b.objs[key]
			var old struct {
				domain.Manifest
				Outputs json.RawMessage `json:"outputs"`
			}
			if err := json.Unmarshal(raw, &old); err != nil {
				t.Fatal(err)
			}
			var list []domain.Output
			var s string
			oldReads := false
			if len(old.Pages) == 0 {
				oldReads = json.Unmarshal(old.Outputs, &list) == nil
			} else {
				oldReads = json.Unmarshal(old.Outputs, &s) == nil && s == PagedOutputs
			}
			if oldReads {
				t.Errorf("a reader that does not know indexed objects reads %s", raw)
			}
		})
	}
}
