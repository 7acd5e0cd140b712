package output

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/shared/domain"
)

// recorder is an Encoder that keeps what it is given.
type recorder struct {
	got       strings.Builder
	published string
	closed    bool
	failAt    int // fail the write that brings the total past this, if set
	flushErr  error
	flushed   int
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.failAt > 0 && r.got.Len()+len(p) > r.failAt {
		return 0, errors.New("refused")
	}
	return r.got.Write(p)
}

func (r *recorder) Flush() error                                { r.flushed++; return r.flushErr }
func (r *recorder) Publish(_ context.Context, key string) error { r.published = key; return nil }
func (r *recorder) Close() error                                { r.closed = true; return nil }

// An encoded output gives every write and emit to its encoder, streams
// nothing and buffers nothing (so the cap does not apply), counts the
// lines, publishes through the encoder at the attempt's key and releases
// it on Abort; it cannot checkpoint.
func TestEncodedOutput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := streamBlob()
	o := New(1, 8) // a cap smaller than what is written
	o.SetPartSizes(4, 1)
	o.AllowSegments(func(seq, r int) string { return "seg" })
	o.Bind(ctx, b, func(int) string { return "attempt/part-00000" })
	enc := &recorder{}
	o.Encode(enc)
	if _, err := o.Write([]byte("{\"a\":1}\n{\"a\":")); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Part(0).Write([]byte("2}\n")); err != nil {
		t.Fatal(err)
	}
	if err := o.Emit("k", "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Part(1).Write([]byte("x\n")); err == nil {
		t.Error("a write to partition 1 of one succeeded")
	}
	if got, want := enc.got.String(), "{\"a\":1}\n{\"a\":2}\nk\tv\n"; got != want {
		t.Errorf("encoder got %q, want %q", got, want)
	}
	if o.Records() != 3 || o.Buffered() != 0 || o.UploadedParts() != 0 || o.Unwritten() {
		t.Errorf("records %d, buffered %d, parts %d, unwritten %v; want 3, 0, 0, false", o.Records(), o.Buffered(), o.UploadedParts(), o.Unwritten())
	}
	if err := o.EnterSegments(nil); !errors.Is(err, domain.ErrCheckpoint) {
		t.Errorf("EnterSegments: %v, want ErrCheckpoint", err)
	}
	if err := o.Publish(ctx, b); err != nil {
		t.Fatal(err)
	}
	if enc.published != "attempt/part-00000" || len(b.Keys("")) != 0 {
		t.Errorf("published at %q, objects %v; want the encoder at the attempt's key and no object of the Output's", enc.published, b.Keys(""))
	}
	o.Abort(ctx, discard())
	if !enc.closed {
		t.Error("Abort did not release the encoder")
	}
}

// An encoder's refusal fails the attempt: every later write, and Refused.
func TestEncodedRefusal(t *testing.T) {
	t.Parallel()
	o := New(1, 0)
	o.Bind(context.Background(), streamBlob(), func(int) string { return "k" })
	o.Encode(&recorder{failAt: 3})
	if _, err := o.Write([]byte("abcd\n")); err == nil {
		t.Fatal("write succeeded past the encoder's refusal")
	}
	if _, err := o.Write([]byte("a")); err == nil || o.Refused() == nil {
		t.Fatalf("after a refusal: write %v, Refused %v; want both errors", err, o.Refused())
	}
}

// The encoder's refusal of the last line at Flush is the outputs'
// refusal: Refused says so, later writes fail, and a second Flush does
// not ask the encoder again. Without an encoder, Flush does nothing.
func TestEncodedFlushRefusal(t *testing.T) {
	t.Parallel()
	o := New(1, 0)
	o.Bind(context.Background(), streamBlob(), func(int) string { return "k" })
	enc := &recorder{flushErr: errors.New("last line refused")}
	o.Encode(enc)
	if _, err := o.Write([]byte("a\nb")); err != nil {
		t.Fatal(err)
	}
	if err := o.Flush(); !errors.Is(err, enc.flushErr) {
		t.Fatalf("Flush: %v, want the encoder's refusal", err)
	}
	if err := o.Flush(); !errors.Is(err, enc.flushErr) || enc.flushed != 1 {
		t.Errorf("second Flush: %v after %d encoder flushes; want the refusal, from one", err, enc.flushed)
	}
	if _, err := o.Write([]byte("c\n")); !errors.Is(err, enc.flushErr) || !errors.Is(o.Refused(), enc.flushErr) {
		t.Errorf("after the refusal: write %v, Refused %v; want both the refusal", err, o.Refused())
	}
	plain := New(1, 0)
	if _, err := plain.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := plain.Flush(); err != nil || plain.Refused() != nil {
		t.Errorf("Flush without an encoder: %v, Refused %v; want nil", err, plain.Refused())
	}
}
