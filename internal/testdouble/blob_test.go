package testdouble_test

import (
	"errors"
	"io"
	"testing"

	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
)

// The executor's fallbacks are tested by refusing a capability: the
// refusal wraps the error the test names, and nothing is written.
func TestBlobRefusesWhatItIsToldTo(t *testing.T) {
	t.Parallel()
	errOff := errors.New("off")
	b := testdouble.NewBlob(nil, testdouble.Refusing(errOff, testdouble.Multipart, testdouble.Copies))
	if err := b.CanMultipart(); !errors.Is(err, errOff) {
		t.Fatalf("CanMultipart = %v, want the refusal", err)
	}
	if err := b.CopyIfAbsent(t.Context(), "a", "bkt", "b"); !errors.Is(err, errOff) {
		t.Fatalf("CopyIfAbsent = %v, want the refusal", err)
	}
	if _, err := b.OpenRange(t.Context(), "missing", 0, 1); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("OpenRange of a missing key = %v, want batch.ErrNotFound (ranged reads are not refused)", err)
	}
}

// Multipart uploads keep S3's rules: a part but the last below the
// minimum size fails the completion, an object appears only when its
// upload completes, and a completion onto an existing key is refused.
func TestBlobMultipartKeepsS3Rules(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := testdouble.NewBlob(nil, testdouble.MinPartSize(2))
	upload := func(key string, parts ...string) error {
		_, existed := b.Object(key)
		id, err := b.CreateMultipart(ctx, key)
		if err != nil {
			return err
		}
		var done []blob.CompletedPart
		for i, p := range parts {
			cp, err := b.UploadPart(ctx, key, id, int32(i+1), []byte(p))
			if err != nil {
				return err
			}
			done = append(done, cp)
		}
		if _, ok := b.Object(key); ok && !existed {
			t.Fatalf("%s visible before its upload completed", key)
		}
		return b.CompleteMultipartIfAbsent(ctx, key, id, done)
	}
	if err := upload("small", "a", "b"); err == nil {
		t.Fatal("a first part below the minimum completed")
	}
	if err := upload("k", "ab", "c"); err != nil {
		t.Fatalf("upload: %v", err)
	}
	if body, _ := b.Object("k"); string(body) != "abc" {
		t.Fatalf("object %q, want abc", body)
	}
	if err := upload("k", "xy", "z"); !errors.Is(err, domain.ErrExists) {
		t.Fatalf("a second completion onto k = %v, want batch.ErrExists", err)
	}
	if n := b.OpenUploads(); n != 2 {
		t.Fatalf("%d uploads open, want the two refused ones", n)
	}
	r, err := b.OpenRange(ctx, "k", 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(r); string(got) != "bc" {
		t.Fatalf("range 1-10 read %q, want bc (cut at the end)", got)
	}
}
