package executor

import (
	"context"
	"io"
	"testing"

	"github.com/batchwork/batchwork/internal/executor/output"
)

// A wrapper of the blob store that only forwards the port keeps every
// capability of the store it wraps: nothing is found by a type assertion
// that the wrapper would hide.
func TestWrappedBlobKeepsItsCapabilities(t *testing.T) {
	t.Parallel()
	type wrapped struct{ Blob }
	ctx := context.Background()
	cases := []struct {
		name string
		run  func(t *testing.T) (used bool)
	}{
		{"multipart streaming", func(t *testing.T) bool {
			b := &mpBlob{minPart: 1}
			o := output.New(1, 0)
			o.SetPartSizes(10, 1)
			o.Bind(ctx, wrapped{b}, func(int) string { return "k" })
			if _, err := o.Write([]byte("twenty bytes of it.\n")); err != nil {
				t.Fatal(err)
			}
			if err := o.Publish(ctx, wrapped{b}); err != nil {
				t.Fatal(err)
			}
			return o.UploadedParts() > 0
		}},
		{"ranged reads", func(t *testing.T) bool {
			b := &rangeBlob{}
			if err := b.PutIfAbsent(ctx, "k", []byte("0123456789")); err != nil {
				t.Fatal(err)
			}
			rc, err := rangeGetter(wrapped{b}).OpenRange(ctx, "k", 2, 5)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			if got, err := io.ReadAll(rc); err != nil || string(got) != "234" {
				t.Fatalf("read %q, %v; want 234", got, err)
			}
			b.mu.Lock()
			defer b.mu.Unlock()
			return len(b.ranges) == 1
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if !tc.run(t) {
				t.Errorf("the wrapped store's %s went unused", tc.name)
			}
		})
	}
}
