package output

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/batchwork/batchwork/internal/testdouble"
)

// streamBlob is S3 with multipart uploads, held to S3's rules, with
// parts of any size so tests stream small ones; its other optional
// capabilities are refused, so the Output's fallbacks run.
func streamBlob() *testdouble.Blob {
	return testdouble.NewBlob(nil, testdouble.Refusing(ErrUnsupported, testdouble.PinnedReads, testdouble.RangeReads,
		testdouble.ReaderPuts, testdouble.Copies, testdouble.Expiry), testdouble.MinPartSize(1))
}

// object is the body at key, nil if there is none.
func object(b *testdouble.Blob, key string) []byte {
	body, _ := b.Object(key)
	return body
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// A streamed object holds exactly the bytes written, in order.
func TestStreamedOutputContent(t *testing.T) {
	t.Parallel()
	b := streamBlob()
	o := New(1, 0)
	o.SetPartSizes(10, 1)
	o.Bind(context.Background(), b, func(int) string { return "k" })
	var want []byte
	for i := range 50 {
		w := []byte(fmt.Sprintf("line %d\n", i))
		want = append(want, w...)
		if _, err := o.Write(w); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.Publish(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if got := object(b, "k"); !bytes.Equal(got, want) {
		t.Fatalf("object %q, want %q", got, want)
	}
	if o.UploadedParts() < 30 || o.Records() != 50 {
		t.Fatalf("%d parts, %d records; want the 10-byte parts and 50 records", o.UploadedParts(), o.Records())
	}
}

// A wrapper of the blob store that only forwards the port keeps its
// multipart uploads: nothing is found by a type assertion that the
// wrapper would hide.
func TestWrappedBlobKeepsMultipart(t *testing.T) {
	t.Parallel()
	type wrapped struct{ Blob }
	ctx := context.Background()
	b := streamBlob()
	o := New(1, 0)
	o.SetPartSizes(10, 1)
	o.Bind(ctx, wrapped{b}, func(int) string { return "k" })
	if _, err := o.Write([]byte("twenty bytes of it.\n")); err != nil {
		t.Fatal(err)
	}
	if err := o.Publish(ctx, wrapped{b}); err != nil {
		t.Fatal(err)
	}
	if o.UploadedParts() == 0 {
		t.Error("the wrapped store's multipart streaming went unused")
	}
}
