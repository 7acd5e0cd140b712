package executor

import (
	"context"
	"io"
	"testing"

	"github.com/batchwork/batchwork/internal/testdouble"
)

// A wrapper of the blob store that only forwards the port keeps every
// capability of the store it wraps: nothing is found by a type assertion
// that the wrapper would hide. (The outputs' multipart uploads are
// checked in package output.)
func TestWrappedBlobKeepsItsCapabilities(t *testing.T) {
	t.Parallel()
	type wrapped struct{ Blob }
	ctx := context.Background()
	cases := []struct {
		name string
		run  func(t *testing.T) (used bool)
	}{
		{"ranged reads", func(t *testing.T) bool {
			log := &testdouble.Journal{}
			b := rangedBlob(log)
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
			return len(ranges(log, 0)) == 1
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
